// Package view turns engine events into what a user reads: a human view
// (colour and a live progress line on a terminal, plain lines when piped) and
// a JSON-lines view with one versioned event per line.
package view

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine"
)

// View receives engine events and can show diagnostics that happen outside
// a run (loading, saving a plan).
type View interface {
	engine.Hooks
	Diagnostics(diags hcl.Diagnostics)
	// Close ends the output (clears a progress line).
	Close()
}

// JSON writes one event per line.
type JSON struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewJSON returns a JSON view writing to w.
func NewJSON(w io.Writer) *JSON { return &JSON{enc: json.NewEncoder(w)} }

// Event implements engine.Hooks.
func (j *JSON) Event(e engine.Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.enc.Encode(e)
}

// Diagnostics implements View.
func (j *JSON) Diagnostics(diags hcl.Diagnostics) {
	if len(diags) == 0 {
		return
	}
	j.Event(engine.Event{Schema: engine.EventSchema, Type: engine.EventDiagnostic, Time: time.Now().UTC(), Diagnostics: engine.DiagViews(sortDiagnostics(diags))})
}

// Close implements View.
func (j *JSON) Close() {}

// Human is the view for people.
type Human struct {
	mu       sync.Mutex
	w        io.Writer
	errw     io.Writer // diagnostics outside a run
	color    bool
	progress bool // a terminal: keep a live status line
	diff     bool // show field diffs during apply
	verbose  bool
	sources  map[string][]byte
	hidden   func(file string, line int) bool
	mode     engine.Mode

	running  map[string]*runningTask // host -> its current task
	statusOn bool
	changes  map[string]int

	clock      Clock
	every      time.Duration // off a terminal: a line per running task this often
	stopTicker func()        // set while the progress ticker runs

	// order holds a plan's results until its play ends (see ordered).
	order playOrder
}

// HumanOptions configure the human view.
type HumanOptions struct {
	Color    bool
	Progress bool
	Diff     bool
	Verbose  bool
	// Sources lets diagnostics quote the offending line.
	Sources map[string][]byte
	// Hidden says which lines of Sources hold a sensitive value (setup's
	// Run.Hidden); a diagnostic on one is shown without its source. nil:
	// none.
	Hidden func(file string, line int) bool
	// Err receives diagnostics raised outside a run (loading, inputs);
	// nil means the main writer.
	Err io.Writer
	// ProgressEvery is how often, off a terminal (Progress false), each
	// task still running is reported with its elapsed time; 0 means
	// DefaultProgressEvery, negative never. On a terminal the status line
	// is redrawn every second instead.
	ProgressEvery time.Duration
	// Clock times tasks and ticks the progress; nil means the real clock.
	Clock Clock
}

// DefaultProgressEvery is how often a running task is reported off a
// terminal (a 15-minute node wait prints a line every 30 s).
const DefaultProgressEvery = 30 * time.Second

// Clock is the progress display's time: the seam a test replaces to tick
// without waiting.
type Clock interface {
	Now() time.Time
	// Every calls tick every d, from another goroutine, until stop is
	// called; stop returns once no call is in progress.
	Every(d time.Duration, tick func(now time.Time)) (stop func())
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Every(d time.Duration, tick func(time.Time)) func() {
	t := time.NewTicker(d)
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			select {
			case now := <-t.C:
				tick(now)
			case <-done:
				return
			}
		}
	}()
	return func() {
		t.Stop()
		close(done)
		<-exited
	}
}

// runningTask is a task a host is running, for progress.
type runningTask struct {
	label   string // task "name" (3/7)
	address string // the instance's, so another instance's result (a task's parallelism) leaves it shown
	start   time.Time
	attempt int
}

// NewHuman returns a human view writing to w.
func NewHuman(w io.Writer, o HumanOptions) *Human {
	errw := o.Err
	if errw == nil {
		errw = w
	}
	clock := o.Clock
	if clock == nil {
		clock = realClock{}
	}
	every := o.ProgressEvery
	if every == 0 {
		every = DefaultProgressEvery
	}
	return &Human{w: w, errw: errw, color: o.Color, progress: o.Progress, diff: o.Diff, verbose: o.Verbose, sources: o.Sources, hidden: o.Hidden,
		running: map[string]*runningTask{}, changes: map[string]int{}, clock: clock, every: every}
}

const (
	cReset  = "\x1b[0m"
	cBold   = "\x1b[1m"
	cRed    = "\x1b[31m"
	cGreen  = "\x1b[32m"
	cYellow = "\x1b[33m"
	cCyan   = "\x1b[36m"
	cDim    = "\x1b[2m"
)

func (h *Human) paint(code, s string) string {
	if !h.color {
		return s
	}
	return code + s + cReset
}

func (h *Human) printf(format string, args ...any) {
	h.clearStatus()
	fmt.Fprintf(h.w, format, args...)
}

// Event implements engine.Hooks. A plan's results are printed in a fixed
// order (see playOrder); apply prints each result as it happens.
func (h *Human) Event(e engine.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.Mode != "" {
		h.mode = e.Mode
	}
	switch e.Type {
	case engine.EventTaskStart:
		h.order.started(e)
		h.started(e)
		h.drawStatus()
		return
	case engine.EventTaskRetry:
		if rt := h.running[e.Host]; rt != nil {
			rt.attempt = e.Attempts + 1
		}
		h.drawStatus()
		return
	}
	if h.mode == engine.ModePlan && !live(e) {
		if h.order.hold(e) {
			if e.Type == engine.EventTaskResult || e.Type == engine.EventUnreachable {
				delete(h.running, e.Host)
			}
			h.drawStatus()
			return
		}
		for _, held := range h.order.release() {
			h.show(held)
		}
		if e.Type == engine.EventPlayStart {
			h.order.begin(e)
		}
	}
	h.show(e)
	h.drawStatus()
}

// live: a plan shows this event as it happens, not held for the play's
// ordered listing: a connection retry says what wsu is waiting on now
// (up to connect_retry_window), as apply and -o json show it.
func live(e engine.Event) bool {
	return e.Type == engine.EventConnectRetry || e.Type == engine.EventReconnecting
}

// show prints one event, its texts escaped (Escape): they may come from
// a host.
func (h *Human) show(e engine.Event) {
	e = escapeEvent(e)
	switch e.Type {
	case engine.EventPlayStart:
		n := len(e.Hosts)
		batches := ""
		if len(e.Batches) > 1 {
			batches = fmt.Sprintf(", %d batches", len(e.Batches))
		}
		note := ""
		if e.Message != "" {
			note = "; " + e.Message // --start-at-task
		}
		h.printf("\n%s %s\n", h.paint(cBold, "PLAY "+quote(e.Play)), h.paint(cDim, fmt.Sprintf("(%d %s%s%s)", n, plural(n, "host", "hosts"), batches, note)))
	case engine.EventPlayNotRun:
		h.printf("\n%s %s\n", h.paint(cBold, "PLAY "+quote(e.Play)), h.paint(cYellow, "("+e.Message+")"))
	case engine.EventTaskResult:
		if rt := h.running[e.Host]; rt == nil || rt.address == e.Address || e.Key == "" {
			delete(h.running, e.Host)
		}
		h.taskResult(e)
	case engine.EventUnreachable:
		delete(h.running, e.Host)
		h.printf("  %s [%s] %s\n", h.paint(cRed, "unreachable"), e.Host, h.diagText(e.Diagnostics))
	case engine.EventHostFailed, engine.EventDiagnostic, engine.EventPlayAborted:
		where := ""
		if e.Host != "" {
			where = " [" + e.Host + "]"
		}
		h.printf("  %s%s\n%s", h.paint(cRed, "error"), where, h.diagBlock(e.Diagnostics, "    "))
	case engine.EventReconnecting:
		h.printf("  %s [%s] %s\n", h.paint(cYellow, "reconnecting"), e.Host, e.Message)
	case engine.EventConnectRetry:
		h.printf("  %s [%s] %s\n", h.paint(cYellow, "retrying"), e.Host, e.Message)
	case engine.EventHostWarning:
		h.printf("  %s [%s]\n%s", h.paint(cYellow, "warning"), e.Host, h.diagBlock(e.Diagnostics, "    "))
	case engine.EventRunCancelled:
		h.printf("\n%s\n", h.paint(cYellow, "Interrupted: tasks in flight finished or were stopped (file writes roll back); nothing else was started."))
	case engine.EventRecap:
		h.recap(e)
	}
}

func (h *Human) taskResult(e engine.Event) {
	kind := "task"
	if e.Handler {
		kind = "handler"
	}
	name := fmt.Sprintf("%s %s", kind, quote(e.Task))
	if e.Key != "" {
		name += fmt.Sprintf("[%q]", e.Key)
	}
	if h.mode == engine.ModePlan {
		h.planLine(e, name)
		return
	}
	// Pad before colouring: escape codes would count towards the width.
	text, code := string(e.Status), ""
	switch e.Status {
	case engine.StatusOK:
		code = cGreen
	case engine.StatusChanged:
		code = cYellow
	case engine.StatusSkipped:
		code = cCyan
	case engine.StatusIgnored:
		text, code = "failed (ignored)", cRed
	case engine.StatusFailed:
		code = cRed
	}
	label := h.paint(code, fmt.Sprintf("%-8s", text))
	line := fmt.Sprintf("  %s [%s] %s", label, e.Host, name)
	if e.Change != nil && e.Change.Subject != "" {
		line += h.paint(cDim, "  "+e.Change.Subject)
	}
	if e.Message != "" {
		line += ": " + strings.TrimRight(e.Message, "\n")
	}
	h.printf("%s\n", line)
	if h.diff && e.Change != nil {
		h.printf("%s", h.fields(e.Change, "           "))
	}
	if len(e.Diagnostics) > 0 {
		h.printf("%s", h.diagBlock(e.Diagnostics, "           "))
	}
}

func (h *Human) planLine(e engine.Event, name string) {
	switch e.Status {
	case engine.StatusChanged:
		h.changes[e.Host]++
		sym := e.Change.Symbol
		code := cYellow
		switch sym {
		case "+":
			code = cGreen
		case "-", "-/+":
			code = cRed
		}
		line := fmt.Sprintf("  %s [%s] %s (%s)", h.paint(code, fmt.Sprintf("%3s", sym)), e.Host, name, e.Module)
		if e.Change.Subject != "" {
			line += " " + e.Change.Subject
		}
		h.printf("%s\n%s", line, h.fields(e.Change, "        "))
	case engine.StatusOK:
		if e.Message != "" {
			h.printf("      [%s] %s: %s\n", e.Host, name, strings.TrimRight(e.Message, "\n"))
		} else if h.verbose || len(e.Diagnostics) > 0 {
			h.printf("  %s [%s] %s (%s)\n", h.paint(cDim, "  ="), e.Host, name, h.paint(cDim, "no change"))
		}
	case engine.StatusDeferred:
		h.printf("  %s [%s] %s (%s): %s\n", h.paint(cCyan, "  ?"), e.Host, name, e.Module, e.Message)
	case engine.StatusSkipped:
		if h.verbose {
			h.printf("  %s [%s] %s (%s)\n", h.paint(cDim, "  ·"), e.Host, name, h.paint(cDim, "skipped"))
		}
	case engine.StatusFailed, engine.StatusIgnored:
		h.printf("  %s [%s] %s\n%s", h.paint(cRed, "  ✗"), e.Host, name, h.diagBlock(e.Diagnostics, "        "))
		return
	}
	// Warnings of a task that went through (a service left alone).
	if len(e.Diagnostics) > 0 && (e.Status != engine.StatusSkipped || h.verbose) {
		h.printf("%s", h.diagBlock(e.Diagnostics, "        "))
	}
}

func (h *Human) fields(c *engine.ChangeView, indent string) string {
	var b strings.Builder
	for _, f := range c.Fields {
		switch {
		case f.Old == "" && f.New != "":
			fmt.Fprintf(&b, "%s%s %s: %s\n", indent, h.paint(cGreen, "+"), f.Name, f.New)
		case f.New == "" && f.Old != "":
			fmt.Fprintf(&b, "%s%s %s: %s\n", indent, h.paint(cRed, "-"), f.Name, f.Old)
		default:
			fmt.Fprintf(&b, "%s%s %s: %s → %s\n", indent, h.paint(cYellow, "~"), f.Name, f.Old, f.New)
		}
	}
	for _, s := range c.Restarts {
		fmt.Fprintf(&b, "%s%s service %s will be stopped and started again\n", indent, h.paint(cYellow, "↻"), quote(s))
	}
	b.WriteString(h.diffText(c.Diff, indent+"  "))
	return b.String()
}

// diffText is a change's content diff, indented and coloured as diff(1)
// users expect.
func (h *Human) diffText(diff, indent string) string {
	if diff == "" {
		return ""
	}
	var b strings.Builder
	for i, l := range strings.Split(diff, "\n") {
		code := ""
		switch {
		case i < 2 && (strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ")):
			code = cBold
		case strings.HasPrefix(l, "@@"):
			code = cCyan
		case strings.HasPrefix(l, "+"):
			code = cGreen
		case strings.HasPrefix(l, "-"):
			code = cRed
		}
		if code != "" {
			l = h.paint(code, l)
		}
		fmt.Fprintf(&b, "%s%s\n", indent, l)
	}
	return b.String()
}

func (h *Human) recap(e engine.Event) {
	h.printf("\n%s\n", h.paint(cBold, "RECAP"))
	width := 0
	for _, r := range e.Recap {
		width = max(width, len(r.Host))
	}
	total := 0
	for _, r := range e.Recap {
		line := fmt.Sprintf("  %-*s  ok=%-3d changed=%-3d failed=%-3d skipped=%-3d unreachable=%-3d ignored=%d", width, r.Host, r.OK, r.Changed, r.Failed, r.Skipped, r.Unreachable, r.Ignored)
		if r.Deferred > 0 {
			line += fmt.Sprintf(" deferred=%d", r.Deferred)
		}
		// File content sent is what a re-run should not repeat; round
		// trips are in the JSON events.
		if r.Traffic != nil && r.BytesSent > 0 {
			line += " sent=" + formatBytes(r.BytesSent)
		}
		code := cGreen
		switch {
		case r.Failed > 0 || r.Unreachable > 0:
			code = cRed
		case r.Changed > 0:
			code = cYellow
		}
		h.printf("%s\n", h.paint(code, line))
		total += r.Changed
	}
	failed := e.Failed
	for _, r := range e.Recap {
		failed = failed || r.Failed > 0 || r.Unreachable > 0
	}
	switch {
	case failed:
		what := "The run failed"
		if h.mode == engine.ModePlan {
			what = "The plan failed"
		}
		h.printf("\n%s\n", h.paint(cRed, what+": see the errors above."))
		return
	case e.NothingChecked != "":
		h.printf("\n%s\n", h.paint(cYellow, "Nothing was checked: "+e.NothingChecked+"."))
		return
	}
	if h.mode == engine.ModePlan {
		hosts := 0
		for _, n := range h.changes {
			if n > 0 {
				hosts++
			}
		}
		if total == 0 {
			h.printf("\n%s\n", h.paint(cGreen, "No changes. The hosts match the playbook."))
		} else {
			h.printf("\n%s\n", h.paint(cBold, fmt.Sprintf("Plan: %d %s to change on %d %s.", total, plural(total, "task", "tasks"), hosts, plural(hosts, "host", "hosts"))))
		}
	}
}

// Diagnostics implements View, quoting the source line when it is known:
// sorted by file and line, at most maxDiagnostics of them (a count stands
// for the rest), each quoting a bounded excerpt (see excerpt).
func (h *Human) Diagnostics(diags hcl.Diagnostics) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(diags) == 0 {
		return
	}
	h.clearStatus()
	diags = sortDiagnostics(diags)
	shown := diags
	if len(shown) > maxDiagnostics {
		shown = shown[:maxDiagnostics]
	}
	for _, d := range shown {
		h.writeDiagnostic(d)
	}
	if rest := diags[len(shown):]; len(rest) > 0 {
		errs := len(rest.Errs())
		fmt.Fprintf(h.errw, "%s\n\n", h.paint(cBold, fmt.Sprintf("… and %d more (%d %s, %d %s) not shown: fix the ones above first.",
			len(rest), errs, plural(errs, "error", "errors"), len(rest)-errs, plural(len(rest)-errs, "warning", "warnings"))))
	}
}

// writeDiagnostic writes one diagnostic with its bounded source excerpt,
// or without one when the lines hold a sensitive value.
func (h *Human) writeDiagnostic(d *hcl.Diagnostic) {
	d = escapeDiagnostic(d)
	if h.quotesHidden(d) {
		// Without its file the writer names the line but quotes nothing.
		c := *d
		c.Detail = strings.TrimSpace(c.Detail + "\n\n(The source line is not shown: it holds a sensitive value.)")
		_ = hcl.NewDiagnosticTextWriter(h.errw, nil, 100, h.color).WriteDiagnostic(&c)
		return
	}
	files := map[string]*hcl.File{}
	if d.Subject != nil {
		if src, ok := h.sources[d.Subject.Filename]; ok {
			var q []byte
			q, d = excerpt(src, d)
			files[d.Subject.Filename] = &hcl.File{Bytes: q}
		}
	}
	_ = hcl.NewDiagnosticTextWriter(h.errw, files, 100, h.color).WriteDiagnostic(d)
}

// quotesHidden reports whether quoting d's source would show a line that
// holds a sensitive value.
func (h *Human) quotesHidden(d *hcl.Diagnostic) bool {
	if h.hidden == nil || d.Subject == nil {
		return false
	}
	from, to := d.Subject.Start.Line, d.Subject.End.Line
	if d.Context != nil && d.Context.Filename == d.Subject.Filename {
		from, to = min(from, d.Context.Start.Line), max(to, d.Context.End.Line)
	}
	for l := from; l <= to; l++ {
		if h.hidden(d.Subject.Filename, l) {
			return true
		}
	}
	return false
}

func (h *Human) diagText(ds []engine.DiagnosticView) string {
	var parts []string
	for _, d := range ds {
		s := d.Summary
		if d.Detail != "" {
			s += ": " + d.Detail
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

func (h *Human) diagBlock(ds []engine.DiagnosticView, indent string) string {
	var b strings.Builder
	for _, d := range ds {
		label := h.paint(cRed, "Error:")
		if d.Severity == "warning" {
			label = h.paint(cYellow, "Warning:")
		}
		fmt.Fprintf(&b, "%s%s %s\n", indent, label, d.Summary)
		if d.Range != nil {
			fmt.Fprintf(&b, "%s  on %s line %d, column %d\n", indent, d.Range.Filename, d.Range.Line, d.Range.Column)
		}
		for _, l := range strings.Split(strings.TrimSpace(d.Detail), "\n") {
			if l != "" {
				fmt.Fprintf(&b, "%s  %s\n", indent, l)
			}
		}
	}
	return b.String()
}

// Close implements View.
func (h *Human) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, held := range h.order.release() {
		h.show(held)
	}
	h.clearStatus()
	if stop := h.stopTicker; stop != nil {
		h.stopTicker = nil
		h.mu.Unlock() // a tick being handled finishes first
		stop()
		h.mu.Lock()
	}
}

// started notes the task a host begins, and starts the progress ticker
// with the first one.
func (h *Human) started(e engine.Event) {
	kind := "task"
	if e.Handler {
		kind = "handler"
	}
	label := fmt.Sprintf("%s %s", kind, quote(e.Task))
	if e.Key != "" {
		label += fmt.Sprintf("[%q]", e.Key)
	}
	if e.Count > 0 {
		label += fmt.Sprintf(" (%d/%d)", e.Index, e.Count)
	}
	h.running[e.Host] = &runningTask{label: label, address: e.Address, start: h.clock.Now(), attempt: 1}
	if h.stopTicker != nil || (!h.progress && h.every < 0) {
		return
	}
	period := h.every
	if h.progress {
		period = time.Second
	}
	h.stopTicker = h.clock.Every(period, h.tick)
}

// tick redraws the status line with the elapsed times on a terminal; off
// one it reports each task running for at least the progress interval,
// hosts in name order.
func (h *Human) tick(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.progress {
		h.drawStatus()
		return
	}
	for _, host := range h.runningHosts() {
		rt := h.running[host]
		if now.Sub(rt.start) >= h.every {
			h.printf("  %s [%s] %s: %s\n", h.paint(cDim, "running "), host, rt.label, rt.elapsed(now))
		}
	}
}

// elapsed is how long the task has run, and its attempt after the first.
func (rt *runningTask) elapsed(now time.Time) string {
	s := now.Sub(rt.start).Round(time.Second).String() + " elapsed"
	if rt.attempt > 1 {
		s += fmt.Sprintf(", attempt %d", rt.attempt)
	}
	return s
}

func (h *Human) runningHosts() []string {
	hosts := make([]string, 0, len(h.running))
	for k := range h.running {
		hosts = append(hosts, k)
	}
	sort.Strings(hosts)
	return hosts
}

func (h *Human) clearStatus() {
	if h.statusOn {
		fmt.Fprint(h.w, "\r\x1b[K")
		h.statusOn = false
	}
}

func (h *Human) drawStatus() {
	if !h.progress || len(h.running) == 0 {
		return
	}
	hosts := h.runningHosts()
	rt := h.running[hosts[0]]
	line := fmt.Sprintf("… %d running: %s: %s, %s", len(hosts), hosts[0], rt.label, rt.elapsed(h.clock.Now()))
	if len(line) > 100 {
		line = line[:99] + "…"
	}
	h.clearStatus()
	fmt.Fprint(h.w, h.paint(cDim, line))
	h.statusOn = true
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// formatBytes is n in bytes or binary units, with one decimal at most:
// 23B, 640KiB, 1.5MiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, i := float64(n)/unit, 0
	for ; v >= unit && i < 3; i++ {
		v /= unit
	}
	s := strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0")
	return s + []string{"KiB", "MiB", "GiB", "TiB"}[i]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
