package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/engine/funcs"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// The task pipeline: every task instance (one per for_each element) goes
// through the same named steps, each a method of taskInstance, in order:
//
//	when      skipped (false) and deferred (unknown) instances stop here
//	decode    the module block against its schema; secrets noted for hiding
//	validate  the module's own checks (modules.Validate), before connecting
//	connect   host modules only; the task's traffic is counted from here
//	attempts  plan, apply, until; retries, and reconnects after a lost connection
//	finish    result re-marked, recap counted, plan recorded, result reported
//
// A step that fails reports the instance itself (failed, ignored or
// unreachable) and the pipeline stops.

// taskInstance is one task instance on its way through the pipeline; each
// step reads what the steps before it filled in.
type taskInstance struct {
	r        *runner
	sc       *scope
	t        *playbook.Task
	hs       *hostState
	playVars map[string]cty.Value
	extra    map[string]cty.Value // each, for a for_each instance
	// ev is the instance's event: connect adds the traffic meter, and
	// every report after that carries it.
	ev    Event
	start time.Time

	mod      modules.Module
	cfg      modules.Config
	secret   secretFields
	h        host.Host       // nil for controller modules
	warnings hcl.Diagnostics // validate's, shown with the outcome
}

// outcome is what a successful attempts step hands to finish.
type outcome struct {
	result   cty.Value
	change   *modules.Change
	attempts int
	warnings hcl.Diagnostics // of the attempt that succeeded
}

// runTaskInstance runs one task instance through the pipeline. It returns
// the task result and whether the instance changed (in plan: will change).
func (r *runner) runTaskInstance(ctx context.Context, sc *scope, playVars map[string]cty.Value, t *playbook.Task, hs *hostState, extra map[string]cty.Value, ev Event) (cty.Value, bool) {
	ti := &taskInstance{r: r, sc: sc, t: t, hs: hs, playVars: playVars, extra: extra, ev: ev, start: time.Now()}
	r.emit(withType(ev, EventTaskStart))
	if res, run := ti.when(); !run {
		return res, false
	}
	null := cty.NullVal(t.Schema.ResultType())
	if d := ti.decode(); d.HasErrors() {
		ti.fail(d)
		return null, false
	}
	if d := ti.validate(); d.HasErrors() {
		ti.fail(d)
		return null, false
	}
	if err := ti.connect(ctx); err != nil {
		r.unreachable(ctx, hs, ti.ev, err)
		return null, false
	}
	out, ok := ti.attempts(ctx)
	if !ok {
		return null, false
	}
	return ti.finish(out)
}

// when evaluates the task's when. run is false when the instance stops
// here, already reported: skipped (null result), deferred (unknown result)
// or failed (an invalid condition).
func (ti *taskInstance) when() (result cty.Value, run bool) {
	t := ti.t
	null := cty.NullVal(t.Schema.ResultType())
	if t.When == nil {
		return null, true
	}
	w, diags := ti.sc.eval(t.When, ti.extra, ti.playVars)
	if diags.HasErrors() {
		ti.fail(diags)
		return null, false
	}
	w, _ = w.Unmark()
	if !w.IsKnown() {
		ti.hs.recap.Deferred++
		ti.r.recordPlan(ti.hs, ti.ev.Address, StatusDeferred, "deferred", func() []string { return fingerprint(t.Module, cty.DynamicVal, StatusDeferred, nil) })
		ti.report(StatusDeferred, nil, "the condition depends on values known only after apply", 0, nil)
		return cty.UnknownVal(t.Schema.ResultType()), false
	}
	b, err := convert.Convert(w, cty.Bool)
	if err != nil || b.IsNull() {
		ti.fail(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid when", Detail: "when must be true or false.", Subject: t.When.Range().Ptr()}})
		return null, false
	}
	if b.False() {
		ti.hs.recap.Skipped++
		ti.r.recordPlan(ti.hs, ti.ev.Address, StatusSkipped, "skipped", func() []string { return fingerprint(t.Module, cty.NilVal, StatusSkipped, nil) })
		ti.report(StatusSkipped, nil, "", 0, nil)
		return null, false
	}
	return null, true
}

// decode evaluates the module block against the module's schema into the
// Config the module receives.
func (ti *taskInstance) decode() hcl.Diagnostics {
	t := ti.t
	ti.mod, _ = ti.r.req.Registry.Lookup(t.Module)
	spec := t.Spec
	ectx, diags := ti.sc.ctx(hcldec.Variables(t.Body, spec), ti.extra, ti.playVars)
	if diags.HasErrors() {
		return diags
	}
	raw, diags := hcldec.Decode(t.Body, spec, ectx)
	if diags.HasErrors() {
		return diags
	}
	ti.cfg = modules.Config{Value: ti.noteSecrets(raw), Block: t.BodyRange, Ranges: map[string]hcl.Range{}}
	for name, a := range t.Body.Attributes {
		ti.cfg.Ranges[name] = a.Expr.Range()
	}
	return confineLocal(t.Schema, ti.cfg, ti.sc.inst.pb.Roots)
}

// confineLocal refuses, in a confined run (roots set), an argument naming
// a file on this machine (modules.Attribute.Local) outside roots: the
// module would read it, and a site playbook from a ConfigMap must not
// copy the pod's files to a host. A symbolic link is followed first.
func confineLocal(schema modules.Schema, cfg modules.Config, roots []string) hcl.Diagnostics {
	if len(roots) == 0 {
		return nil
	}
	var diags hcl.Diagnostics
	for _, a := range schema.Attributes {
		if !a.Local {
			continue
		}
		for _, p := range localPaths(cfg.Value.GetAttr(a.Name)) {
			if localInside(roots, p) {
				continue
			}
			diags = append(diags, cfg.Error(a.Name, "File outside the directories this run may read",
				fmt.Sprintf("%s is outside %s: %s.", p, strings.Join(roots, ", "), funcs.ErrOutsideRoots)))
		}
	}
	return diags
}

// localPaths are the known paths a Local argument names: a string, or
// the values of a map.
func localPaths(v cty.Value) []string {
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	if v.Type() == cty.String {
		return []string{v.AsString()}
	}
	var out []string
	if v.CanIterateElements() {
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsKnown() && !e.IsNull() && e.Type() == cty.String {
				out = append(out, e.AsString())
			}
		}
	}
	return out
}

// localInside says whether p, made absolute as the module would and with
// its symbolic links followed, is inside one of roots.
func localInside(roots []string, p string) bool {
	abs, err := filepath.Abs(p)
	if err != nil {
		return false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	_, _, ok := funcs.Inside(roots, abs)
	return ok
}

// noteSecrets removes the sensitive marks from the decoded block (modules
// receive plain values: the secret must reach the host) and notes which
// arguments carried them, to hide what derives from them. Their text goes
// to the run's scrubber: whatever a module copies from a secret (into a
// subject, an error) is scrubbed before anyone sees it, and so is a
// derived value (a command line built from a secret) wherever it shows up.
func (ti *taskInstance) noteSecrets(raw cty.Value) cty.Value {
	cfgVal, paths := raw.UnmarkDeepWithPaths()
	sensitive := map[string]bool{}
	secrets := ti.r.secrets
	for _, pm := range paths {
		if _, ok := pm.Marks[Sensitive]; ok && len(pm.Path) > 0 {
			if ga, ok := pm.Path[0].(cty.GetAttrStep); ok {
				sensitive[ga.Name] = true
			}
			if v, err := pm.Path.Apply(cfgVal); err == nil {
				secrets.AddValue(v)
			}
		}
	}
	ti.secret = secretFields{args: map[string]bool{}, sensitive: sensitive, credentials: map[string]bool{}}
	for _, a := range ti.t.Schema.Attributes {
		ti.secret.args[a.Name] = true
		ti.secret.credentials[a.Name] = a.Credential
		if a.Sensitive {
			sensitive[a.Name] = true
			secrets.AddValue(cfgVal.GetAttr(a.Name))
		}
	}
	return cfgVal
}

// validate runs the module's own checks with the real values; its
// warnings are shown with the outcome.
func (ti *taskInstance) validate() hcl.Diagnostics {
	d := modules.Validate(ti.mod, ti.cfg)
	if !d.HasErrors() {
		ti.warnings = d
	}
	return d
}

// connect opens (or reuses) the host's connection for a host module. From
// here on, reconnects included, the task's traffic is the growth of the
// host's counters; connecting was not the task's.
func (ti *taskInstance) connect(ctx context.Context) error {
	if ti.t.Schema.Target != modules.TargetHost {
		return nil
	}
	h, err := ti.r.connect(ctx, ti.hs)
	if err != nil {
		return err
	}
	ti.h = h
	hs := ti.hs
	if own := host.ContextMeter(ctx); own != nil {
		// Instances running at once share the connection, whose totals
		// mix them: this one counts its own calls.
		if _, ok := h.(host.Metered); ok {
			ti.ev.traffic = func() *Traffic { return trafficOf(own.Counters()) }
		}
		return nil
	}
	if before, ok := hs.counters(); ok {
		ti.ev.traffic = func() *Traffic {
			now, _ := hs.counters()
			return trafficOf(now.Sub(before))
		}
	}
	return nil
}

// attempts tries until an attempt succeeds: again after delay on an error
// or an unmet until, up to retries more times (apply only), and again
// without counting a try when the task cut its own connection (hybrid-
// overlay and HNS changes do), after reconnecting; that converges because
// modules are idempotent. ok is false when it gave up, the instance
// already reported.
func (ti *taskInstance) attempts(ctx context.Context) (out outcome, ok bool) {
	retries, delay, d := ti.r.retryPolicy(ti.sc, ti.t, ti.extra, ti.playVars)
	if d.HasErrors() {
		ti.fail(d)
		return outcome{}, false
	}
	reconnects := 0
	for attempt := 1; ; attempt++ {
		result, change, diags := ti.attempt(ctx, attempt)
		if !diags.HasErrors() {
			return outcome{result: result, change: change, attempts: attempt, warnings: append(ti.warnings, diags...)}, true
		}
		if lost(ti.h) && reconnects < maxReconnects && ctx.Err() == nil {
			reconnects++
			attempt--
			if cur := ti.hs.conn; cur != nil && cur != ti.h && !lost(cur) {
				ti.h = cur // an instance running beside this one reconnected
				continue
			}
			h, err := ti.r.reconnect(ctx, ti.hs, ti.ev)
			if err != nil {
				ti.r.unreachable(ctx, ti.hs, ti.ev, err)
				return outcome{}, false
			}
			ti.h = h
			continue
		}
		if attempt > retries || ctx.Err() != nil || ti.r.req.Mode == ModePlan {
			ti.giveUp(change, attempt, append(ti.warnings, diags...))
			return outcome{}, false
		}
		ti.retrying(attempt, delay, diags)
		ti.hs.outsideGate(func() {
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
		})
	}
}

// retrying reports that attempt n failed and the task tries again after
// delay: a task_retry event, its errors as warnings (the task has not
// failed yet).
func (ti *taskInstance) retrying(n int, delay time.Duration, diags hcl.Diagnostics) {
	e := withType(ti.ev, EventTaskRetry)
	e.Attempts, e.RetryInMS = n, delay.Milliseconds()
	e.Diagnostics = DiagViews(diags)
	for i := range e.Diagnostics {
		e.Diagnostics[i].Severity = "warning"
	}
	ti.r.emit(e)
}

// attempt is one try: plan, apply when applying and there is a change,
// then until (apply mode only) with self = this try's result.
func (ti *taskInstance) attempt(ctx context.Context, n int) (cty.Value, *modules.Change, hcl.Diagnostics) {
	t := ti.t
	var (
		result    cty.Value
		change    *modules.Change
		reconnect bool
		diags     hcl.Diagnostics
	)
	pending := ti.hs.planned > 0
	ti.hs.outsideGate(func() {
		result, change, reconnect, diags = ti.r.planApplyOn(ctx, ti.hs, ti.mod, ti.cfg, ti.h, pending)
	})
	if reconnect {
		ti.freshConnection(ctx)
	}
	if diags.HasErrors() || ti.r.req.Mode != ModeApply || t.Until == nil {
		return result, change, diags
	}
	ok, d := ti.r.untilMet(ti.sc, t, ti.extra, ti.playVars, markResult(t.Schema, result, ti.secret))
	diags = append(diags, d...)
	if !d.HasErrors() && !ok {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Condition not met",
			Detail:   fmt.Sprintf("until was still false after %d attempts.", n),
			Subject:  t.Until.Range().Ptr(),
		})
	}
	return result, change, diags
}

// giveUp reports the last failed attempt: ignored under ignore_errors (the
// host goes on), else failed (the host drops out).
func (ti *taskInstance) giveUp(change *modules.Change, attempts int, diags hcl.Diagnostics) {
	if ti.r.ignoreErrors(ti.sc, ti.t, ti.extra, ti.playVars) {
		ti.hs.recap.Ignored++
		ti.report(StatusIgnored, renderChange(change, ti.secret), "", attempts, diags)
		return
	}
	ti.fail(diags)
}

// finish re-marks the result's secrets, counts the instance in the recap,
// records it in the plan and reports it.
func (ti *taskInstance) finish(out outcome) (cty.Value, bool) {
	t, hs := ti.t, ti.hs
	result := markResult(t.Schema, out.result, ti.secret)
	ti.r.secrets.AddMarked(result)
	cv := renderChange(out.change, ti.secret)
	status, summary := StatusOK, "no change"
	if out.change != nil {
		status = StatusChanged
		summary = ti.r.secrets.Scrub(cv.Symbol + " " + cv.Action + " " + cv.Subject)
		hs.recap.Changed++
		hs.planned++
		ti.r.countChange()
	} else {
		hs.recap.OK++
	}
	cfgVal := ti.cfg.Value
	ti.r.recordPlanChange(hs, planfile.Task{Address: ti.ev.Address, Status: string(status), Summary: summary, Module: t.Module, Change: cv},
		func() []string { return fingerprint(t.Module, cfgVal, status, out.change) })
	ti.report(status, cv, shownMessage(t.Schema, result), out.attempts, out.warnings)
	return result, out.change != nil
}

// report emits the instance's task_result.
func (ti *taskInstance) report(status Status, change *ChangeView, msg string, attempts int, diags hcl.Diagnostics) {
	e := ti.ev
	e.Type, e.Status, e.Change, e.Message, e.Attempts = EventTaskResult, status, change, msg, attempts
	e.DurationMS = time.Since(ti.start).Milliseconds()
	e.Diagnostics = DiagViews(diags)
	ti.r.emit(e)
}

// fail reports the instance failed; the host drops out.
func (ti *taskInstance) fail(diags hcl.Diagnostics) {
	ti.r.taskFailed(ti.t, ti.hs, ti.ev, diags, &ti.start)
}

// shownMessage is the result attribute the schema's Show names, as the
// views display it after the task.
func shownMessage(s modules.Schema, result cty.Value) string {
	if s.Show == "" || !result.IsKnown() || result.IsNull() {
		return ""
	}
	mv := result.GetAttr(s.Show)
	switch {
	case mv.HasMark(Sensitive):
		return shownSensitive
	case mv.IsKnown() && !mv.IsNull() && mv.Type() == cty.String:
		return mv.AsString()
	}
	return Render(mv)
}

// planApplyOn is planApply on hs. While a task's instances run at once
// there (hostState.gate), a change that stops and starts services
// (Change.Restarts) is planned again and applied alone: the others' checks
// and changes would otherwise see the services stopped for a moment, or
// start them again under it.
func (r *runner) planApplyOn(ctx context.Context, hs *hostState, mod modules.Module, cfg modules.Config, h host.Host, pending bool) (cty.Value, *modules.Change, bool, hcl.Diagnostics) {
	redial := r.redialer(hs)
	ex := hs.exclusive
	if ex == nil {
		return r.planApply(ctx, mod, cfg, h, redial, pending)
	}
	ex.RLock()
	pr := r.plan(ctx, mod, cfg, h, redial, pending)
	if pr.Change == nil || len(pr.Change.Restarts) == 0 || pr.Diagnostics.HasErrors() || r.req.Mode == ModePlan {
		defer ex.RUnlock()
		return r.apply(ctx, mod, cfg, h, redial, pr)
	}
	ex.RUnlock()
	ex.Lock()
	defer ex.Unlock()
	return r.planApply(ctx, mod, cfg, h, redial, pending)
}

// planApply asks the module for its plan and, when applying, applies it.
// reconnect: the module says the host's connection no longer reaches it.
func (r *runner) planApply(ctx context.Context, mod modules.Module, cfg modules.Config, h host.Host, redial modules.Redialer, pending bool) (_ cty.Value, _ *modules.Change, reconnect bool, _ hcl.Diagnostics) {
	return r.apply(ctx, mod, cfg, h, redial, r.plan(ctx, mod, cfg, h, redial, pending))
}

// plan asks the module for its plan.
func (r *runner) plan(ctx context.Context, mod modules.Module, cfg modules.Config, h host.Host, redial modules.Redialer, pending bool) modules.PlanResponse {
	return mod.Plan(ctx, modules.PlanRequest{Config: cfg, Host: h, Pending: r.req.Mode == ModePlan && pending, Redial: redial,
		Diff: r.req.Mode == ModePlan || r.req.Diff})
}

// apply makes pr's change when applying; otherwise, or when there is none
// or the plan failed, it returns the plan's answer.
func (r *runner) apply(ctx context.Context, mod modules.Module, cfg modules.Config, h host.Host, redial modules.Redialer, pr modules.PlanResponse) (_ cty.Value, _ *modules.Change, reconnect bool, _ hcl.Diagnostics) {
	if pr.Diagnostics.HasErrors() {
		return cty.NilVal, pr.Change, false, pr.Diagnostics
	}
	if pr.Change == nil || r.req.Mode == ModePlan {
		return pr.Result, pr.Change, false, pr.Diagnostics
	}
	ar := mod.Apply(ctx, modules.ApplyRequest{Config: cfg, Host: h, Change: pr.Change, Redial: redial})
	return ar.Result, pr.Change, ar.Reconnect, append(pr.Diagnostics, ar.Diagnostics...)
}

// freshConnection replaces the host's connection after a task that made
// it useless (a reboot), which also reads the facts again (the boot time
// moved). A host that cannot be reached now is left without one: its next
// task connects and reports why not.
func (ti *taskInstance) freshConnection(ctx context.Context) {
	ti.hs.dropConn()
	if h, err := ti.r.connect(ctx, ti.hs); err == nil {
		ti.h = h
	}
}

// markResult re-applies sensitivity to a result: attributes the schema
// declares sensitive, and those derived from a sensitive argument (every
// one, unless it says what it derives from).
func markResult(s modules.Schema, v cty.Value, secret secretFields) cty.Value {
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() {
		return v
	}
	m := v.AsValueMap()
	for _, a := range s.Results {
		if rv, ok := m[a.Name]; ok && (a.Sensitive || secret.hideResult(a)) {
			m[a.Name] = rv.Mark(Sensitive)
		}
	}
	return cty.ObjectVal(m)
}
