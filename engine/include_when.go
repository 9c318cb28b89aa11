package engine

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/engine/playbook"
)

// An include's when switches a whole included playbook on or off per
// host, the way a task's when does one task: a site drops a step (the
// hybrid overlay on a cluster whose CNI runs as a DaemonSet) without
// forking the playbook that includes it. The condition is evaluated once
// per host, in the including playbook, when the include is first reached;
// an include inside a switched-off include is off too. Off, every task of
// the included playbook is reported as skipped (and planned as skipped),
// its handlers never run and its outputs read as null. A condition known
// only after apply defers the tasks, as a task's would.

// includeState is what an include's when decided for one host.
type includeState int

const (
	includeOn includeState = iota
	includeOff
	includeDeferred
)

// includeStateFor decides, once per host, whether inst (an included
// playbook, or the root) runs on hs. diags are those of an invalid
// condition; the host fails on them.
func (r *runner) includeStateFor(ctx context.Context, hs *hostState, inst *instance) (includeState, hcl.Diagnostics) {
	if inst.inc == nil {
		return includeOn, nil
	}
	if st, ok := hs.includes[inst]; ok {
		return st, nil
	}
	st, diags := r.includeStateFor(ctx, hs, inst.parent)
	if diags.HasErrors() {
		return st, diags
	}
	if st == includeOn && inst.inc.When != nil {
		st, diags = r.evalIncludeWhen(ctx, hs, inst)
		if diags.HasErrors() {
			return st, diags
		}
	}
	if hs.includes == nil {
		hs.includes = map[*instance]includeState{}
	}
	hs.includes[inst] = st
	return st, nil
}

// evalIncludeWhen evaluates inst's include condition in its parent's
// scope, connecting first when it reads the host's facts.
func (r *runner) evalIncludeWhen(ctx context.Context, hs *hostState, inst *instance) (includeState, hcl.Diagnostics) {
	when := inst.inc.When
	parent, diags := r.scope(hs, inst.parent)
	if diags.HasErrors() {
		return includeOff, diags
	}
	if hs.conn == nil && exprsReadFacts([]hcl.Expression{when}, inst.parent.pb) {
		if _, err := r.connect(ctx, hs); err != nil {
			return includeOff, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Host unreachable", Detail: err.Error(), Subject: when.Range().Ptr()}}
		}
	}
	v, diags := parent.eval(when, nil, nil)
	if diags.HasErrors() {
		return includeOff, diags
	}
	v, _ = v.Unmark()
	if !v.IsKnown() {
		return includeDeferred, nil
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil || b.IsNull() {
		return includeOff, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid when",
			Detail: fmt.Sprintf("The when of include %q must be true or false.", inst.inc.Name), Subject: when.Range().Ptr()}}
	}
	if b.True() {
		return includeOn, nil
	}
	return includeOff, nil
}

// skipPlayOff reports every task of p that the run would have run on hs
// as skipped (the include is off) or deferred (its condition is not known
// yet).
func (r *runner) skipPlayOff(hs *hostState, inst *instance, p *playbook.Play, st includeState) {
	status, msg := StatusSkipped, "include is off for this host (its when is false)"
	if st == includeDeferred {
		status, msg = StatusDeferred, "the include's condition depends on values known only after apply"
	}
	for i, t := range p.Tasks {
		if !r.selected(t) || r.start.skipsTask(inst, p, i) {
			continue
		}
		addr := fmt.Sprintf("%stask[%q]", inst.path, t.Name)
		ev := Event{Play: p.Name, Host: hs.name, Task: t.Name, Address: addr, Module: t.Module, Index: i + 1, Count: len(p.Tasks)}
		if status == StatusSkipped {
			hs.recap.Skipped++
		} else {
			hs.recap.Deferred++
		}
		module := t.Module
		r.recordPlan(hs, addr, status, string(status), func() []string { return fingerprint(module, cty.NilVal, status, nil) })
		ev.Type, ev.Status, ev.Message = EventTaskResult, status, msg
		r.emit(ev)
	}
}

// offOutputs is an include's outputs for a host it did not run on: null
// when it is off, unknown when its condition is not known yet.
func offOutputs(pb *playbook.Playbook, st includeState) cty.Value {
	outs := map[string]cty.Value{}
	for _, name := range pb.OutputOrder {
		if st == includeDeferred {
			outs[name] = cty.DynamicVal
		} else {
			outs[name] = cty.NullVal(cty.DynamicPseudoType)
		}
	}
	return cty.ObjectVal(outs)
}
