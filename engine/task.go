package engine

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/notify"
)

// playOnHost runs a play's tasks, then its notified handlers, on one host.
func (r *runner) playOnHost(ctx context.Context, inst *instance, p *playbook.Play, hs *hostState) {
	hs.touched = true
	st, diags := r.includeStateFor(ctx, hs, inst)
	if diags.HasErrors() {
		r.failHost(hs, p.Name, diags)
		return
	}
	if st != includeOn {
		r.skipPlayOff(hs, inst, p, st)
		return
	}
	sc, diags := r.scope(hs, inst)
	if diags.HasErrors() {
		r.failHost(hs, p.Name, diags)
		return
	}
	playVars := map[string]cty.Value{}
	for _, name := range p.VarsOrder {
		v, d := sc.eval(p.Vars[name], nil, playVars)
		if d.HasErrors() {
			r.failHost(hs, p.Name, d)
			return
		}
		r.secrets.AddMarked(v)
		playVars[name] = v
	}
	notified := map[string]bool{}
	for i, t := range p.Tasks {
		if ctx.Err() != nil || hs.failed || hs.unreachable {
			return
		}
		if !r.selected(t) || r.start.skipsTask(inst, p, i) {
			continue
		}
		if changed := r.runTask(ctx, sc, playVars, t, hs, i, len(p.Tasks)); changed {
			for _, n := range t.Notify {
				notified[n] = true
			}
		}
	}
	// Handlers run once, in definition order, only if a changed task
	// notified them and the host is still healthy.
	for i, h := range p.Handlers {
		if ctx.Err() != nil || hs.failed || hs.unreachable {
			return
		}
		if notified[h.Name] {
			r.runTask(ctx, sc, playVars, h, hs, i, len(p.Handlers))
		}
	}
}

// selected applies --tags and --skip-tags. Tasks tagged "always" run unless
// skipped by name; handlers are governed by notification alone.
func (r *runner) selected(t *playbook.Task) bool {
	has := func(tags []string) bool {
		for _, want := range tags {
			for _, tt := range t.Tags {
				if tt == want {
					return true
				}
			}
		}
		return false
	}
	if len(r.req.SkipTags) > 0 && has(r.req.SkipTags) {
		return false
	}
	if len(r.req.Tags) == 0 {
		return true
	}
	return has(r.req.Tags) || has([]string{"always"})
}

func (sc *scope) addr(t *playbook.Task) string {
	if t.Handler {
		return fmt.Sprintf("%splay[%q].handler[%q]", sc.inst.path, t.Play.Name, t.Name)
	}
	return fmt.Sprintf("%stask[%q]", sc.inst.path, t.Name)
}

// runTask runs every instance of a task (one, or one per for_each element)
// and records its result. It reports whether anything changed.
func (r *runner) runTask(ctx context.Context, sc *scope, playVars map[string]cty.Value, t *playbook.Task, hs *hostState, idx, count int) bool {
	addr := sc.addr(t)
	base := Event{Play: t.Play.Name, Host: hs.name, Task: t.Name, Address: addr, Module: t.Module, Handler: t.Handler, Index: idx + 1, Count: count}
	if hs.conn == nil && needsFacts(t, sc.inst.pb) {
		if _, err := r.connect(ctx, hs); err != nil {
			r.unreachable(ctx, hs, base, err)
			return false
		}
	}
	if t.ForEach == nil {
		res, changed := r.runTaskInstance(ctx, sc, playVars, t, hs, nil, base)
		if !t.Handler {
			sc.tasks[t.Name] = res
		}
		return changed
	}
	fe, diags := sc.eval(t.ForEach, nil, playVars)
	if diags.HasErrors() {
		r.taskFailed(t, hs, base, diags, nil)
		return false
	}
	if fe.HasMark(Sensitive) {
		// Each key shows in the instance's address, its events and a
		// saved plan, and keys cannot be hidden the way values are.
		r.taskFailed(t, hs, base, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid for_each argument",
			Detail:   "Sensitive values, or values derived from sensitive values, cannot be used as for_each arguments: each key would be shown in the task's address, its output and a saved plan. Use a map whose keys are not secret; its values may be sensitive.",
			Subject:  t.ForEach.Range().Ptr(),
		}}, nil)
		return false
	}
	fe, _ = fe.Unmark()
	if !fe.IsWhollyKnown() {
		ev := base
		ev.Type, ev.Status = EventTaskResult, StatusDeferred
		ev.Message = "for_each depends on values known only after apply"
		hs.recap.Deferred++
		r.recordPlan(hs, addr, StatusDeferred, "deferred", func() []string { return fingerprint(t.Module, cty.DynamicVal, StatusDeferred, nil) })
		r.emit(ev)
		sc.tasks[t.Name] = cty.DynamicVal
		return false
	}
	if fe.IsNull() || !playbook.ForEachType(fe.Type()) {
		r.taskFailed(t, hs, base, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid for_each argument",
			Detail:   fmt.Sprintf("for_each takes a map, an object or a set of strings, not %s.", friendly(fe)),
			Subject:  t.ForEach.Range().Ptr(),
		}}, nil)
		return false
	}
	results := map[string]cty.Value{}
	changedAny := false
	type kv struct {
		key string
		val cty.Value
	}
	var items []kv
	for it := fe.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if fe.Type().IsSetType() {
			k = v
		}
		items = append(items, kv{k.AsString(), v})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
	runOne := func(ctx context.Context, item kv) {
		each := cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(item.key), "value": item.val})
		ev := base
		ev.Address = fmt.Sprintf("%s[%q]", addr, item.key)
		ev.Key = item.key
		res, changed := r.runTaskInstance(ctx, sc, playVars, t, hs, map[string]cty.Value{playbook.RootEach: each}, ev)
		results[item.key] = res
		changedAny = changedAny || changed
	}
	stop := func() bool {
		return hs.failed || hs.unreachable || ctx.Err() != nil // an unreachable host is counted once, not per instance
	}
	if n := r.parallelism(t); n > 1 && len(items) > 1 {
		keys := make([]string, len(items))
		byKey := make(map[string]kv, len(items))
		for i, it := range items {
			keys[i], byKey[it.key] = it.key, it
		}
		runAtOnce(hs, n, keys, stop, func(key string) {
			runOne(host.WithMeter(ctx, &host.Meter{}), byKey[key])
		})
	} else {
		for _, item := range items {
			if stop() {
				break
			}
			runOne(ctx, item)
		}
	}
	if !t.Handler {
		sc.tasks[t.Name] = cty.ObjectVal(results)
	}
	return changedAny
}

func (r *runner) retryPolicy(sc *scope, t *playbook.Task, extra, playVars map[string]cty.Value) (int, time.Duration, hcl.Diagnostics) {
	retries, delay := 0, 5*time.Second
	if t.Until != nil {
		retries = 3 // as Ansible: until without retries tries a few times
	}
	num := func(e hcl.Expression, name string) (float64, hcl.Diagnostics) {
		v, d := sc.eval(e, extra, playVars)
		if d.HasErrors() {
			return 0, d
		}
		v, _ = v.Unmark()
		n, err := convert.Convert(v, cty.Number)
		if err != nil || n.IsNull() || !n.IsKnown() {
			return 0, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid " + name, Detail: name + " must be a number.", Subject: e.Range().Ptr()}}
		}
		f, _ := n.AsBigFloat().Float64()
		if f < 0 {
			return 0, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid " + name, Detail: name + " cannot be negative.", Subject: e.Range().Ptr()}}
		}
		return f, nil
	}
	if t.Retries != nil {
		f, d := num(t.Retries, "retries")
		if d.HasErrors() {
			return 0, 0, d
		}
		retries = int(f)
	}
	if t.Delay != nil {
		f, d := num(t.Delay, "delay")
		if d.HasErrors() {
			return 0, 0, d
		}
		delay = time.Duration(f * float64(time.Second))
	}
	return retries, delay, nil
}

func (r *runner) untilMet(sc *scope, t *playbook.Task, extra, playVars map[string]cty.Value, result cty.Value) (bool, hcl.Diagnostics) {
	ex := map[string]cty.Value{playbook.RootSelf: result}
	for k, v := range extra {
		ex[k] = v
	}
	v, d := sc.eval(t.Until, ex, playVars)
	if d.HasErrors() {
		return false, d
	}
	v, _ = v.Unmark()
	b, err := convert.Convert(v, cty.Bool)
	if err != nil || b.IsNull() || !b.IsKnown() {
		return false, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid until", Detail: "until must be true or false.", Subject: t.Until.Range().Ptr()}}
	}
	return b.True(), nil
}

func (r *runner) ignoreErrors(sc *scope, t *playbook.Task, extra, playVars map[string]cty.Value) bool {
	if t.IgnoreErrors == nil {
		return false
	}
	v, d := sc.eval(t.IgnoreErrors, extra, playVars)
	if d.HasErrors() {
		return false
	}
	v, _ = v.Unmark()
	b, err := convert.Convert(v, cty.Bool)
	return err == nil && b.IsKnown() && !b.IsNull() && b.True()
}

func (r *runner) taskFailed(t *playbook.Task, hs *hostState, ev Event, diags hcl.Diagnostics, start *time.Time) {
	hs.failed = true
	hs.recap.Failed++
	e := ev
	e.Type, e.Status = EventTaskResult, StatusFailed
	e.Diagnostics = DiagViews(diags)
	if start != nil {
		e.DurationMS = time.Since(*start).Milliseconds()
	}
	r.recordPlan(hs, ev.Address, StatusFailed, "failed", nil)
	r.emit(e)
}

// unreachable reports a host that could not be reached, once. A connection
// cut short by the run's interruption (Ctrl-C) says nothing about the
// host: the run_cancelled event reports that, and the host is not
// counted unreachable.
func (r *runner) unreachable(ctx context.Context, hs *hostState, ev Event, err error) {
	if hs.unreachable || ctx.Err() != nil {
		return // reported and counted once; or interrupted, not unreachable
	}
	hs.unreachable = true
	hs.recap.Unreachable++
	e := ev
	e.Type = EventUnreachable
	e.Diagnostics = []DiagnosticView{{Severity: "error", Summary: "Host unreachable", Detail: err.Error()}}
	r.emit(e)
}

// maxReconnects bounds how often one task may lose its connection.
const maxReconnects = 3

// DefaultReconnectTimeout is how long a host gets to come back after a task
// cut its connection; the inventory variable reconnect_timeout overrides it.
// The engine owns the variable, since the engine reconnects; transports
// ignore it.
const DefaultReconnectTimeout = 5 * time.Minute

// reconnectTimeout reads a host's reconnect_timeout: "90s", "5m" or a
// number of seconds. A bad value is an error naming where it was set.
func reconnectTimeout(vars map[string]inventory.Var) (time.Duration, error) {
	const name = "reconnect_timeout"
	v, ok := vars[name]
	if !ok {
		return DefaultReconnectTimeout, nil
	}
	val, _ := v.Value.Unmark()
	if val.IsNull() {
		return DefaultReconnectTimeout, nil
	}
	d, err := parseDuration(val)
	if err != nil || d < 0 {
		where := ""
		if v.Range.Filename != "" {
			where = fmt.Sprintf("%s:%d:%d: ", v.Range.Filename, v.Range.Start.Line, v.Range.Start.Column)
		}
		return 0, fmt.Errorf(`%s%s must be a duration such as "30s" or "5m", or a number of seconds`, where, name)
	}
	return d, nil
}

func lost(h host.Host) bool {
	l, ok := h.(host.Lossy)
	return ok && l.Lost()
}

// reconnect replaces a lost connection, trying until reconnect_timeout.
func (r *runner) reconnect(ctx context.Context, hs *hostState, ev Event) (host.Host, error) {
	hs.dropConn()
	timeout, err := reconnectTimeout(hs.vars)
	if err != nil {
		return nil, err // connect refused it before: not reached
	}
	e := ev
	e.Type = EventReconnecting
	e.Message = fmt.Sprintf("the connection was lost during the task; reconnecting (up to %s)", timeout)
	r.emit(e)
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	backoff := 500 * time.Millisecond
	for {
		h, err := r.connect(rctx, hs)
		if err == nil {
			return h, nil
		}
		select {
		case <-rctx.Done():
			return nil, fmt.Errorf("reconnecting after the connection was lost: %w (last error: %v)", rctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// parseDuration reads "90s", "5m" or a number of seconds.
func parseDuration(v cty.Value) (time.Duration, error) {
	v, _ = v.Unmark()
	if v.IsNull() || !v.IsKnown() {
		return 0, fmt.Errorf("no value")
	}
	if v.Type() == cty.Number {
		f, _ := v.AsBigFloat().Float64()
		return time.Duration(f * float64(time.Second)), nil
	}
	if v.Type() == cty.String {
		s := strings.TrimSpace(v.AsString())
		if d, err := time.ParseDuration(s); err == nil {
			return d, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return time.Duration(f * float64(time.Second)), nil
		}
	}
	return 0, fmt.Errorf("not a duration")
}

// redialer opens another connection to hs through the run's connector,
// with some inventory variables replaced (a null value removes one). The
// host's own connection, facts and counters are not touched.
func (r *runner) redialer(hs *hostState) modules.Redialer {
	if r.req.Connector == nil {
		return nil
	}
	return func(ctx context.Context, vars map[string]cty.Value) (host.Host, error) {
		merged := maps.Clone(hs.vars)
		if merged == nil {
			merged = map[string]inventory.Var{}
		}
		for k, v := range vars {
			if v.IsNull() {
				delete(merged, k)
			} else {
				merged[k] = inventory.Var{Value: v}
			}
		}
		ctx = notify.With(ctx, r.notifier(hs.name))
		return r.req.Connector.Connect(ctx, Target{Name: hs.name, Vars: merged})
	}
}

// dial opens a connection to t through the request's connector: one an
// earlier run kept (Connections), with what it had counted, or a new one.
func (r *runner) dial(ctx context.Context, t Target) (host.Host, host.Counters, error) {
	if kc, ok := r.req.Connector.(*keptConnector); ok {
		return kc.connect(ctx, t)
	}
	h, err := r.req.Connector.Connect(ctx, t)
	return h, host.Counters{}, err
}

// connect opens the host's connection on first use and gathers its facts.
func (r *runner) connect(ctx context.Context, hs *hostState) (host.Host, error) {
	if hs.conn != nil {
		return hs.conn, nil
	}
	if r.req.Connector == nil {
		return nil, fmt.Errorf("no transport configured")
	}
	if _, err := reconnectTimeout(hs.vars); err != nil {
		return nil, fmt.Errorf("host %s: %w", hs.name, err)
	}
	// What the transport reports while connecting (a host key recorded on
	// first use, retries) becomes host_warning and host_connect_retry.
	ctx = notify.With(ctx, r.notifier(hs.name))
	h, counted, err := r.dial(ctx, Target{Name: hs.name, Vars: hs.vars})
	if err != nil {
		return nil, err
	}
	hs.takeConn(h, counted)
	if f, err := h.Facts(ctx); err == nil {
		hs.facts = factsValue(f)
		if hs.reported == nil {
			hs.reported = &f
		}
		for _, sc := range hs.scopes {
			sc.hostVal = hs.value()
			// Locals read before the facts were known are read again.
			clear(sc.locals)
		}
	}
	return h, nil
}

func factsValue(f host.Facts) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"os":           cty.StringVal(f.OS),
		"platform":     cty.StringVal(f.Platform),
		"version":      cty.StringVal(f.Version),
		"build":        cty.StringVal(f.Build),
		"hostname":     cty.StringVal(f.Hostname),
		"fqdn":         cty.StringVal(f.FQDN),
		"architecture": cty.StringVal(f.Architecture),
		"ipv4":         cty.StringVal(f.IPv4),
		"boot_time":    cty.StringVal(f.BootTime),
	})
}

func withType(e Event, t EventType) Event {
	e.Type = t
	return e
}

func friendly(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	return strings.TrimSpace(v.Type().FriendlyName())
}

// parallelism is how many instances of t run at once on a host: its
// parallelism in an apply, one in a plan (so a plan's tasks, events and
// changes come in the same order every time).
func (r *runner) parallelism(t *playbook.Task) int {
	if r.req.Mode != ModeApply || t.Parallelism < 1 {
		return 1
	}
	return t.Parallelism
}

// runAtOnce runs run(key) for each key in order, up to n at once, until
// stop says the host is done (instances already running finish; no new
// one starts). The host's gate (hostState.gate) serialises everything an
// instance does except its module's calls to the host, so run needs no
// locking of its own.
func runAtOnce(hs *hostState, n int, keys []string, stop func() bool, run func(key string)) {
	gate := &sync.Mutex{}
	hs.gate, hs.exclusive = gate, &sync.RWMutex{}
	defer func() { hs.gate, hs.exclusive = nil, nil }()
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	gate.Lock()
	for _, key := range keys {
		if stop() {
			break
		}
		gate.Unlock()
		slots <- struct{}{} // a free slot, without holding the gate
		gate.Lock()
		if stop() {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			gate.Lock()
			defer gate.Unlock()
			run(key)
		}()
	}
	gate.Unlock()
	wg.Wait()
}
