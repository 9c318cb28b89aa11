//go:build linux

package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// Event is one wsu.event/v1 line, with the fields the tests look at.
type Event struct {
	Type      string          `json:"type"`
	Mode      string          `json:"mode"`
	Play      string          `json:"play"`
	Host      string          `json:"host"`
	Task      string          `json:"task"`
	Address   string          `json:"address"`
	Module    string          `json:"module"`
	Status    string          `json:"status"`
	RPCs      *int64          `json:"rpcs"`
	BytesSent *int64          `json:"bytes_sent"`
	Change    *Change         `json:"change"`
	Recap     []Recap         `json:"recap"`
	Diags     []Diagnostic    `json:"diagnostics"`
	Raw       json.RawMessage `json:"-"`
}

// Change is a task's planned or applied change.
type Change struct {
	Action  string `json:"action"`
	Subject string `json:"subject"`
	Fields  []struct {
		Name string `json:"name"`
		Old  string `json:"old"`
		New  string `json:"new"`
	} `json:"fields"`
	// Restarts names the services the change stops and starts again, in
	// stop order.
	Restarts []string `json:"restarts"`
}

// Recap is one host's line of the recap.
type Recap struct {
	Host        string `json:"host"`
	OK          int    `json:"ok"`
	Changed     int    `json:"changed"`
	Failed      int    `json:"failed"`
	Skipped     int    `json:"skipped"`
	Unreachable int    `json:"unreachable"`
	RPCs        int64  `json:"rpcs"`
	BytesSent   int64  `json:"bytes_sent"`
	// AgentBytes is the agent binary uploaded to the host (0: current).
	AgentBytes int64 `json:"agent_bytes"`
}

// Diagnostic is an error or warning in an event.
type Diagnostic struct {
	Severity string `json:"severity"`
	Summary  string `json:"summary"`
	Detail   string `json:"detail"`
	Range    *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
		Column   int    `json:"column"`
	} `json:"range"`
}

func (d Diagnostic) String() string {
	s := d.Summary + ": " + d.Detail
	if d.Range != nil {
		s = fmt.Sprintf("%s:%d:%d: %s", d.Range.Filename, d.Range.Line, d.Range.Column, s)
	}
	return s
}

// Result is one finished wsu run.
type Result struct {
	Args     []string
	ExitCode int
	Stdout   string
	Stderr   string
	Events   []Event
	// ProcessState is wsu's, for its resource usage (peak RSS).
	ProcessState *os.ProcessState
}

// Cmd returns a wsu command with the inventory and variable file added
// after args (a subcommand and playbook first, e.g. "apply", "join"); an
// apply also gets --auto-approve, which wsu needs to apply unattended.
func (e *Env) Cmd(ctx context.Context, args ...string) *exec.Cmd {
	full := append(append([]string{}, args...), "-i", e.Inventory, "--var-file", e.VarFile)
	if len(args) > 0 && args[0] == "apply" && !slices.Contains(args, "--auto-approve") {
		full = append(full, "--auto-approve")
	}
	cmd := exec.CommandContext(ctx, e.WSU, full...)
	cmd.Env = append(cmd.Environ(), "NO_COLOR=1")
	return cmd
}

// Run runs wsu with human output copied to w as it comes.
func (e *Env) Run(ctx context.Context, w io.Writer, args ...string) (*Result, error) {
	cmd := e.Cmd(ctx, args...)
	var out, errb bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, w)
	cmd.Stderr = io.MultiWriter(&errb, w)
	return finish(cmd, &out, &errb)
}

// RunJSON runs wsu with `-o json` and parses its events; onEvent, when not
// nil, sees each event as it arrives (to inject a fault at the right time).
func (e *Env) RunJSON(ctx context.Context, onEvent func(Event), args ...string) (*Result, error) {
	return RunCmdJSON(e.Cmd(ctx, append(append([]string{}, args...), "-o", "json")...), onEvent)
}

// RunCmdJSON runs a wsu command made elsewhere (its own inputs and
// environment; its arguments include `-o json`) and parses its events as
// RunJSON does.
func RunCmdJSON(cmd *exec.Cmd, onEvent func(Event)) (*Result, error) {
	pr, pw := io.Pipe()
	var out, errb bytes.Buffer
	cmd.Stdout = io.MultiWriter(&out, pw)
	cmd.Stderr = &errb
	var events []Event
	parsed := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var perr error
		for sc.Scan() {
			line := sc.Bytes()
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var ev Event
			if err := json.Unmarshal(line, &ev); err != nil {
				perr = errors.Join(perr, fmt.Errorf("not an event: %q: %w", line, err))
				continue
			}
			ev.Raw = append(json.RawMessage(nil), line...)
			events = append(events, ev)
			if onEvent != nil {
				onEvent(ev)
			}
		}
		io.Copy(io.Discard, pr)
		parsed <- perr
	}()
	r, err := finish(cmd, &out, &errb)
	pw.Close()
	perr := <-parsed
	if r != nil {
		r.Events = events
	}
	if err == nil {
		err = perr
	}
	return r, err
}

func finish(cmd *exec.Cmd, out, errb *bytes.Buffer) (*Result, error) {
	err := cmd.Run()
	r := &Result{Args: cmd.Args[1:], Stdout: out.String(), Stderr: errb.String(), ProcessState: cmd.ProcessState}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.ExitCode = exit.ExitCode()
	case err != nil:
		return nil, fmt.Errorf("running %s: %w", strings.Join(cmd.Args, " "), err)
	}
	return r, nil
}

// Recap returns the recap event's line for host.
func (r *Result) Recap(host string) (Recap, bool) {
	for i := len(r.Events) - 1; i >= 0; i-- {
		if r.Events[i].Type != "recap" {
			continue
		}
		for _, l := range r.Events[i].Recap {
			if l.Host == host {
				return l, true
			}
		}
	}
	return Recap{}, false
}

// Tasks returns the task_result events, optionally only those of host.
func (r *Result) Tasks(host string) []Event {
	var out []Event
	for _, ev := range r.Events {
		if ev.Type == "task_result" && (host == "" || ev.Host == host) {
			out = append(out, ev)
		}
	}
	return out
}

// Changed returns the addresses of host's changed tasks, in order.
func (r *Result) Changed(host string) []string {
	var out []string
	for _, ev := range r.Tasks(host) {
		if ev.Status == "changed" {
			out = append(out, ev.Play+"/"+ev.Address)
		}
	}
	return out
}

// Failures describes every failure diagnostic in the run, for messages.
func (r *Result) Failures() string {
	var b strings.Builder
	for _, ev := range r.Events {
		for _, d := range ev.Diags {
			if d.Severity == "error" {
				fmt.Fprintf(&b, "%s %s %s: %s\n", ev.Type, ev.Host, ev.Task, d)
			}
		}
	}
	if b.Len() == 0 {
		return r.Stderr
	}
	return b.String()
}
