package engine

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"sync"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
)

// hostState is one inventory host during a run. Only the goroutine running
// the host's current play touches it.
type hostState struct {
	name   string
	vars   map[string]inventory.Var
	groups []string
	conn   host.Host
	facts  cty.Value
	// reported is what the host reported of itself on its first connection,
	// for the recap (a controller records the node's identity from it).
	reported *host.Facts
	failed   bool
	// unreachable: a connection could not be made; the host is out of the run.
	unreachable bool
	touched     bool
	recap       HostRecap
	// planned counts this host's changed tasks so far in the run; in a
	// plan they are not applied, so later tasks plan with Pending.
	planned int
	scopes  map[*instance]*scope
	// includes is what each include's when decided for this host
	// (include_when.go).
	includes map[*instance]includeState
	// closed is the traffic of connections already closed (lost ones,
	// before a reconnect), so totals keep growing across reconnects;
	// metered says whether any connection counted it.
	closed  host.Counters
	metered bool
	// connBase is what conn had counted when this run took it: a
	// connection kept from an earlier run (Connections) counts that run's
	// traffic too.
	connBase host.Counters
	// gate, while a task's instances run at once on this host (its
	// parallelism), is held by the instance doing the engine's work:
	// evaluation, events, the recap, the connection. It is released only
	// around a module's calls to the host (outsideGate), so only those
	// overlap.
	gate *sync.Mutex
	// exclusive, with gate, is held shared by each instance's plan and
	// apply, and alone by a change that restarts services (planApplyOn).
	exclusive *sync.RWMutex
}

// outsideGate runs fn with the host's gate released, if instances are
// running at once; fn must not touch the engine's state.
func (hs *hostState) outsideGate(fn func()) {
	if g := hs.gate; g != nil {
		g.Unlock()
		defer g.Lock()
	}
	fn()
}

// counters is the host's traffic so far, over all its connections; ok is
// false when none of them was metered.
func (hs *hostState) counters() (host.Counters, bool) {
	c, ok := hs.closed, hs.metered
	if m, isMetered := hs.conn.(host.Metered); isMetered {
		c, ok = c.Add(m.Counters().Sub(hs.connBase)), true
	}
	return c, ok
}

// takeConn makes h the host's connection; counted is what it had counted
// for an earlier run (Connections), zero for a new one.
func (hs *hostState) takeConn(h host.Host, counted host.Counters) {
	hs.conn, hs.connBase = h, counted
}

// dropConn closes the host's connection, keeping what it counted.
func (hs *hostState) dropConn() {
	if h := hs.detachConn(); h != nil {
		h.Close()
	}
}

// detachConn takes the host's connection away from it, keeping what it
// counted, and returns it (nil when there was none).
func (hs *hostState) detachConn() host.Host {
	h := hs.conn
	if h == nil {
		return nil
	}
	if m, ok := h.(host.Metered); ok {
		hs.closed, hs.metered = hs.closed.Add(m.Counters().Sub(hs.connBase)), true
	}
	hs.conn, hs.connBase = nil, host.Counters{}
	return h
}

func newHostState(inv *inventory.Inventory, name string) *hostState {
	return &hostState{
		name:   name,
		vars:   inv.HostVars(name),
		groups: inv.GroupNames(name),
		facts:  cty.NullVal(cty.DynamicPseudoType),
		scopes: map[*instance]*scope{},
	}
}

// value is the `host` object expressions see.
func (hs *hostState) value() cty.Value {
	groups := make([]cty.Value, 0, len(hs.groups))
	for _, g := range hs.groups {
		groups = append(groups, cty.StringVal(g))
	}
	gl := cty.ListValEmpty(cty.String)
	if len(groups) > 0 {
		gl = cty.ListVal(groups)
	}
	vars := map[string]cty.Value{}
	for k, v := range hs.vars {
		if inventory.SecretName(k) {
			vars[k] = v.Value.Mark(Sensitive)
		} else {
			vars[k] = v.Value
		}
	}
	return cty.ObjectVal(map[string]cty.Value{
		"name":   cty.StringVal(hs.name),
		"groups": gl,
		"vars":   cty.ObjectVal(vars),
		"facts":  hs.facts,
	})
}

// scope holds the values expressions of one playbook instance see on one
// host (or, with hs nil, with no host: play hosts and serial).
type scope struct {
	r        *runner
	inst     *instance
	hs       *hostState
	vars     map[string]cty.Value
	tasks    map[string]cty.Value
	includes map[string]cty.Value
	locals   map[string]cty.Value // cache of locals that depend on no task
	funcs    map[string]function.Function
	hostVal  cty.Value
}

func (r *runner) newScope(inst *instance, hs *hostState) *scope {
	sc := &scope{
		r: r, inst: inst, hs: hs,
		vars:     map[string]cty.Value{},
		tasks:    map[string]cty.Value{},
		includes: map[string]cty.Value{},
		locals:   map[string]cty.Value{},
		funcs:    r.funcs(inst),
		hostVal:  cty.UnknownVal(playbook.HostType),
	}
	for name, t := range inst.pb.Tasks {
		if t.ForEach != nil {
			sc.tasks[name] = cty.NullVal(cty.DynamicPseudoType)
		} else {
			sc.tasks[name] = cty.NullVal(t.Schema.ResultType())
		}
	}
	for name, inc := range inst.pb.Includes {
		outs := map[string]cty.Value{}
		for o := range inc.Playbook.Outputs {
			outs[o] = cty.NullVal(cty.DynamicPseudoType)
		}
		sc.includes[name] = cty.ObjectVal(outs)
	}
	return sc
}

// scope returns (creating on first use) the host's scope in inst, with its
// variables resolved.
func (r *runner) scope(hs *hostState, inst *instance) (*scope, hcl.Diagnostics) {
	if sc, ok := hs.scopes[inst]; ok {
		return sc, nil
	}
	sc := r.newScope(inst, hs)
	sc.hostVal = hs.value()
	var diags hcl.Diagnostics
	var parent *scope
	if inst.parent != nil {
		var d hcl.Diagnostics
		parent, d = r.scope(hs, inst.parent)
		if d.HasErrors() {
			return nil, d
		}
	}
	for _, name := range inst.pb.VariableOrder {
		v := inst.pb.Variables[name]
		var inc *rawValue
		if inst.inc != nil {
			if expr, ok := inst.inc.Vars[name]; ok {
				val, d := parent.eval(expr, nil, nil)
				if d.HasErrors() {
					diags = append(diags, d...)
					continue
				}
				inc = &rawValue{value: val, source: "include " + inst.inc.Name, rng: expr.Range().Ptr()}
			}
		}
		val, d := r.inputs.resolve(v, hs.vars, inc)
		r.secrets.AddMarked(val) // before its validation's messages are shown
		diags = append(diags, d...)
		if !d.HasErrors() {
			sc.vars[name] = val
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	r.recordVars(hs, inst, sc.vars)
	hs.scopes[inst] = sc
	return sc, diags
}

// globalScope is an instance's scope without a host: inventory values and
// per-host include values are unknown there.
func (r *runner) globalScope(inst *instance) (*scope, hcl.Diagnostics) {
	sc := r.newScope(inst, nil)
	var parent *scope
	if inst.parent != nil {
		var d hcl.Diagnostics
		if parent, d = r.globalScope(inst.parent); d.HasErrors() {
			return nil, d
		}
	}
	var diags hcl.Diagnostics
	for _, name := range inst.pb.VariableOrder {
		v := inst.pb.Variables[name]
		var inc *rawValue
		if inst.inc != nil {
			if expr, ok := inst.inc.Vars[name]; ok {
				val, d := parent.eval(expr, nil, nil)
				if d.HasErrors() {
					sc.vars[name] = cty.UnknownVal(v.Type) // depends on a host
					continue
				}
				inc = &rawValue{value: val, source: "include " + inst.inc.Name, rng: expr.Range().Ptr()}
			}
		}
		val, d := r.inputs.resolve(v, nil, inc)
		if d.HasErrors() {
			// Inventory values may still supply it per host; only a use
			// of it here is an error.
			sc.vars[name] = cty.UnknownVal(v.Type)
			continue
		}
		sc.vars[name] = val
	}
	return sc, diags
}

// ctx builds the evaluation context for traversals trs.
func (sc *scope) ctx(trs []hcl.Traversal, extra map[string]cty.Value, playVars map[string]cty.Value) (*hcl.EvalContext, hcl.Diagnostics) {
	variables := sc.roots(trs, extra, playVars)
	locals := map[string]cty.Value{}
	var diags hcl.Diagnostics
	for _, tr := range trs {
		if tr.RootName() != playbook.RootLocal {
			continue
		}
		if name, ok := localName(tr); ok {
			v, d := sc.local(name, extra, playVars, map[string]bool{})
			diags = append(diags, d...)
			locals[name] = v
		}
	}
	variables[playbook.RootLocal] = cty.ObjectVal(locals)
	return &hcl.EvalContext{Variables: variables, Functions: sc.funcs}, diags
}

// roots returns the non-local roots trs refer to. Only what the expressions
// name goes in: building objects of every task result for every task made a
// play O(tasks²).
func (sc *scope) roots(trs []hcl.Traversal, extra map[string]cty.Value, playVars map[string]cty.Value) map[string]cty.Value {
	vars := sc.vars
	if len(playVars) > 0 {
		vars = make(map[string]cty.Value, len(sc.vars)+len(playVars))
		for k, v := range sc.vars {
			vars[k] = v
		}
		for k, v := range playVars {
			vars[k] = v
		}
	}
	want := map[string]map[string]bool{}
	whole := map[string]bool{}
	for _, tr := range trs {
		root := tr.RootName()
		if name, ok := localName(tr); ok {
			if want[root] == nil {
				want[root] = map[string]bool{}
			}
			want[root][name] = true
		} else {
			whole[root] = true
		}
	}
	pick := func(root string, all map[string]cty.Value) cty.Value {
		if whole[root] {
			return cty.ObjectVal(all)
		}
		sub := make(map[string]cty.Value, len(want[root]))
		for name := range want[root] {
			if v, ok := all[name]; ok {
				sub[name] = v
			}
		}
		return cty.ObjectVal(sub)
	}
	variables := map[string]cty.Value{
		playbook.RootVar:     pick(playbook.RootVar, vars),
		playbook.RootTask:    pick(playbook.RootTask, sc.tasks),
		playbook.RootInclude: pick(playbook.RootInclude, sc.includes),
		playbook.RootHost:    sc.hostVal,
	}
	for k, v := range extra {
		variables[k] = v
	}
	return variables
}

func localName(tr hcl.Traversal) (string, bool) {
	if len(tr) < 2 {
		return "", false
	}
	switch s := tr[1].(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() {
			return s.Key.AsString(), true
		}
	}
	return "", false
}

// local evaluates one local value, and the locals it needs first. A value
// that depends only on declared variables and the host is cached for the
// scope's life; one that reads a task, an include or a play variable is
// evaluated at each use.
func (sc *scope) local(name string, extra, playVars map[string]cty.Value, visiting map[string]bool) (cty.Value, hcl.Diagnostics) {
	if v, ok := sc.locals[name]; ok {
		return v, nil
	}
	l := sc.inst.pb.Locals[name]
	if l == nil || visiting[name] {
		return cty.DynamicVal, nil // reported by the loader
	}
	visiting[name] = true
	defer delete(visiting, name)
	trs := l.Expr.Variables()
	locals := map[string]cty.Value{}
	var diags hcl.Diagnostics
	volatile := false
	for _, tr := range trs {
		n, ok := localName(tr)
		switch tr.RootName() {
		case playbook.RootLocal:
			if ok {
				v, d := sc.local(n, extra, playVars, visiting)
				diags = append(diags, d...)
				locals[n] = v
				if _, cached := sc.locals[n]; !cached {
					volatile = true
				}
			}
		case playbook.RootTask, playbook.RootInclude, playbook.RootEach, playbook.RootSelf:
			volatile = true
		case playbook.RootVar:
			if _, declared := sc.vars[n]; !declared {
				volatile = true // a play variable
			}
		}
	}
	vars := sc.roots(trs, extra, playVars)
	vars[playbook.RootLocal] = cty.ObjectVal(locals)
	cacheable := !volatile && sc.hs != nil
	shared, key, inputs := cacheable && hostFree(trs), sharedLocalKey{sc.inst, name}, cty.NilVal
	if shared {
		inputs = cty.ObjectVal(map[string]cty.Value{playbook.RootVar: vars[playbook.RootVar], playbook.RootLocal: vars[playbook.RootLocal]})
		if v, ok := sc.r.shared.get(key, inputs); ok {
			sc.locals[name] = v
			return v, diags
		}
	}
	v, d := l.Expr.Value(&hcl.EvalContext{Variables: vars, Functions: sc.funcs})
	diags = append(diags, d...)
	if cacheable && !d.HasErrors() {
		sc.locals[name] = v
		if shared {
			sc.r.shared.put(key, inputs, v)
		}
	}
	return v, diags
}

// eval evaluates one expression in the scope.
func (sc *scope) eval(expr hcl.Expression, extra map[string]cty.Value, playVars map[string]cty.Value) (cty.Value, hcl.Diagnostics) {
	ctx, diags := sc.ctx(expr.Variables(), extra, playVars)
	if diags.HasErrors() {
		return cty.DynamicVal, diags
	}
	v, d := expr.Value(ctx)
	return v, append(diags, d...)
}
