package playbook

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/wsu-project/wsu/engine/funcs"
	"github.com/wsu-project/wsu/modules"
)

// Scope names the roots an expression may refer to.
const (
	RootVar     = "var"
	RootLocal   = "local"
	RootTask    = "task"
	RootInclude = "include"
	RootHost    = "host"
	RootEach    = "each"
	RootSelf    = "self"
)

// where describes the place of an expression for reference checking.
type where struct {
	roots   []string
	play    *Play // for play vars
	taskIdx int   // tasks with a smaller Index may be referenced; -1: none
	itemIdx int   // includes with a smaller item index may be referenced
}

func (w where) allows(root string) bool {
	for _, r := range w.roots {
		if r == root {
			return true
		}
	}
	return false
}

type checker struct {
	pb    *Playbook
	reg   *modules.Registry
	diags hcl.Diagnostics
	// localRefs caches the tasks and includes each local reaches.
	localTasks    map[string][]string
	localIncludes map[string][]string
	localHost     map[string]bool
}

func check(pb *Playbook, reg *modules.Registry) hcl.Diagnostics {
	var diags hcl.Diagnostics
	pb.Walk(func(p *Playbook) {
		c := &checker{pb: p, reg: reg, localTasks: map[string][]string{}, localIncludes: map[string][]string{}, localHost: map[string]bool{}}
		c.run()
		diags = append(diags, c.diags...)
	})
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		if a == nil || b == nil || a.Filename != b.Filename {
			return false
		}
		return a.Start.Byte < b.Start.Byte
	})
	return diags
}

func (c *checker) errorf(r hcl.Range, summary, format string, args ...any) {
	c.diags = append(c.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: r.Ptr()})
}

func (c *checker) run() {
	pb := c.pb
	c.checkLocalCycles()
	for _, name := range pb.VariableOrder {
		v := pb.Variables[name]
		for _, val := range v.Validations {
			for _, e := range []hcl.Expression{val.Condition, val.ErrorMessage} {
				c.refs(e, where{roots: []string{RootVar}, taskIdx: -1})
				c.validationRefs(e, name)
			}
		}
	}
	for _, name := range pb.LocalOrder {
		c.refs(pb.Locals[name].Expr, where{roots: []string{RootVar, RootLocal, RootTask, RootInclude, RootHost}, taskIdx: len(pb.Tasks) + 1, itemIdx: len(pb.Items) + 1})
	}
	for idx, it := range pb.Items {
		switch it := it.(type) {
		case *Play:
			c.checkPlay(it, idx)
		case *Include:
			for _, e := range []hcl.Expression{it.Hosts, it.Serial, it.MaxFailPercentage} {
				if e != nil {
					c.refs(e, where{roots: []string{RootVar, RootLocal}, taskIdx: -1, itemIdx: idx})
				}
			}
			if it.When != nil {
				c.refs(it.When, where{roots: []string{RootVar, RootLocal, RootTask, RootInclude, RootHost}, taskIdx: c.firstTaskAfter(idx), itemIdx: idx})
			}
			for _, name := range it.VarsOrder {
				c.refs(it.Vars[name], where{roots: []string{RootVar, RootLocal, RootTask, RootInclude, RootHost}, taskIdx: c.firstTaskAfter(idx), itemIdx: idx})
				if it.Playbook != nil {
					if _, ok := it.Playbook.Variables[name]; !ok {
						c.errorf(it.Vars[name].Range(), "Unknown include variable", "%s declares no variable %q.%s", it.Playbook.Filename, name, suggest(name, it.Playbook.VariableOrder))
					}
				}
			}
		}
	}
	allRoots := []string{RootVar, RootLocal, RootTask, RootInclude, RootHost}
	for _, name := range pb.OutputOrder {
		c.refs(pb.Outputs[name].Value, where{roots: allRoots, taskIdx: len(pb.Tasks) + 1, itemIdx: len(pb.Items) + 1})
	}
	if !c.diags.HasErrors() {
		c.checkTypes()
	}
}

// validationRefs reports references to other variables in a validation
// rule: the engine evaluates a rule with only its own variable set.
func (c *checker) validationRefs(expr hcl.Expression, name string) {
	for _, tr := range expr.Variables() {
		n, ok := attrName(tr)
		if tr.RootName() != RootVar || !ok || n == name || c.pb.Variables[n] == nil {
			continue // undeclared names are reported by refs
		}
		c.errorf(tr.SourceRange(), "Invalid reference in variable validation",
			"A validation rule of variable %q can refer only to var.%s, not var.%s.", name, name, n)
	}
}

// firstTaskAfter returns the Index of the first task in items before idx
// ends, i.e. the number of tasks declared in items [0, idx).
func (c *checker) firstTaskAfter(idx int) int {
	n := 0
	for _, it := range c.pb.Items[:idx] {
		if p, ok := it.(*Play); ok {
			n += len(p.Tasks)
		}
	}
	return n
}

func (c *checker) checkPlay(p *Play, idx int) {
	pb := c.pb
	static := where{roots: []string{RootVar, RootLocal}, taskIdx: -1, itemIdx: idx}
	c.refs(p.Hosts, static)
	if p.Serial != nil {
		c.refs(p.Serial, static)
	}
	if p.MaxFailPercentage != nil {
		c.refs(p.MaxFailPercentage, static)
	}
	first := c.firstTaskAfter(idx)
	for _, name := range p.VarsOrder {
		if v, ok := pb.Variables[name]; ok {
			c.errorf(p.Vars[name].Range(), "Play variable shadows a variable",
				"Play %q sets %q, which is also declared as a variable at %s. Rename one, or give the variable a default instead.", p.Name, name, v.DeclRange)
		}
		c.refs(p.Vars[name], where{roots: []string{RootVar, RootLocal, RootTask, RootInclude, RootHost}, play: p, taskIdx: first, itemIdx: idx})
	}
	handlers := map[string]bool{}
	var handlerNames []string
	for _, h := range p.Handlers {
		handlers[h.Name] = true
		handlerNames = append(handlerNames, h.Name)
	}
	lastTask := first + len(p.Tasks)
	for _, t := range append(append([]*Task{}, p.Tasks...), p.Handlers...) {
		limit := t.Index
		if t.Handler {
			limit = lastTask
		}
		roots := []string{RootVar, RootLocal, RootTask, RootInclude, RootHost}
		if t.ForEach != nil {
			c.refs(t.ForEach, where{roots: roots, play: p, taskIdx: limit, itemIdx: idx})
			roots = append(roots, RootEach)
		}
		w := where{roots: roots, play: p, taskIdx: limit, itemIdx: idx}
		for _, e := range []hcl.Expression{t.When, t.Retries, t.Delay, t.IgnoreErrors} {
			if e != nil {
				c.refs(e, w)
			}
		}
		if t.Until != nil {
			wu := w
			wu.roots = append(append([]string{}, roots...), RootSelf)
			c.refs(t.Until, wu)
		}
		for _, attr := range t.Body.Attributes {
			c.refs(attr.Expr, w)
		}
		for _, n := range t.Notify {
			if !handlers[n] {
				c.errorf(t.NotifyRange, "Unknown handler", "Task %q notifies %q, but play %q has no handler of that name.%s", t.Name, n, p.Name, suggest(n, handlerNames))
			}
		}
	}
}

// refs checks every reference in expr against what w allows.
func (c *checker) refs(expr hcl.Expression, w where) {
	pb := c.pb
	for _, tr := range expr.Variables() {
		root := tr.RootName()
		r := tr.SourceRange()
		if !w.allows(root) {
			if isKnownRoot(root) {
				c.errorf(r, "Reference not allowed here", "%q cannot be used here; this place may refer to %s.", root, strings.Join(w.roots, ", "))
			} else {
				c.errorf(r, "Unknown reference", "There is no value named %q.%s Values are reached through %s.", root, suggest(root, w.roots), strings.Join(w.roots, ", "))
			}
			continue
		}
		name, ok := attrName(tr)
		switch root {
		case RootEach, RootSelf:
			continue
		case RootHost:
			if ok && name != "name" && name != "groups" && name != "vars" && name != "facts" {
				c.errorf(r, "Unknown host attribute", "host has the attributes name, groups, vars and facts; %q is not one of them.", name)
			}
			continue
		}
		if !ok {
			c.errorf(r, "Incomplete reference", "A reference to %s must name one, e.g. %s.NAME.", root, root)
			continue
		}
		switch root {
		case RootVar:
			_, declared := pb.Variables[name]
			inPlay := w.play != nil && w.play.Vars[name] != nil
			if !declared && !inPlay {
				cands := append([]string{}, pb.VariableOrder...)
				if w.play != nil {
					cands = append(cands, w.play.VarsOrder...)
				}
				c.errorf(r, "Reference to undeclared variable", "No variable %q is declared in %s.%s Declare it with a variable block.", name, pb.Filename, suggest(name, cands))
			}
		case RootLocal:
			if _, ok := pb.Locals[name]; !ok {
				c.errorf(r, "Reference to undeclared local value", "No local value %q is declared in %s.%s", name, pb.Filename, suggest(name, pb.LocalOrder))
				continue
			}
			for _, tn := range c.localTaskRefs(name) {
				if t := pb.Tasks[tn]; t != nil && t.Index >= w.taskIdx {
					c.errorf(r, "Task result used too early", "local.%s uses the result of task %q, which has not run at this point.", name, tn)
				}
			}
			for _, in := range c.localIncludeRefs(name) {
				if i := pb.Includes[in]; i != nil && i.Index >= w.itemIdx {
					c.errorf(r, "Include output used too early", "local.%s uses include %q, which has not run at this point.", name, in)
				}
			}
			if c.localHost[name] && !w.allows(RootHost) {
				c.errorf(r, "Reference not allowed here", "local.%s depends on a host or task, which is not known here.", name)
			}
		case RootTask:
			t, ok := pb.Tasks[name]
			if !ok {
				names := make([]string, 0, len(pb.Tasks))
				for n := range pb.Tasks {
					names = append(names, n)
				}
				sort.Strings(names)
				c.errorf(r, "Reference to undeclared task", "No task %q is declared in %s.%s", name, pb.Filename, suggest(name, names))
			} else if t.Index >= w.taskIdx {
				c.errorf(r, "Task result used too early", "Task %q runs at or after this point, so its result is not available yet. Move the reference after it.", name)
			}
		case RootInclude:
			inc, ok := pb.Includes[name]
			if !ok {
				names := make([]string, 0, len(pb.Includes))
				for n := range pb.Includes {
					names = append(names, n)
				}
				c.errorf(r, "Reference to undeclared include", "No include %q is declared in %s.%s", name, pb.Filename, suggest(name, names))
			} else if inc.Index >= w.itemIdx {
				c.errorf(r, "Include output used too early", "Include %q runs after this point, so its outputs are not available yet.", name)
			} else if out, ok := attrNameAt(tr, 2); ok && inc.Playbook != nil {
				if _, has := inc.Playbook.Outputs[out]; !has {
					c.errorf(r, "Unknown include output", "%s has no output %q.%s", inc.Playbook.Filename, out, suggest(out, inc.Playbook.OutputOrder))
				}
			}
		}
	}
}

func isKnownRoot(root string) bool {
	switch root {
	case RootVar, RootLocal, RootTask, RootInclude, RootHost, RootEach, RootSelf:
		return true
	}
	return false
}

// attrName returns the name a traversal selects from its root (var.NAME or
// var["NAME"]).
func attrName(tr hcl.Traversal) (string, bool) { return attrNameAt(tr, 1) }

func attrNameAt(tr hcl.Traversal, i int) (string, bool) {
	if len(tr) <= i {
		return "", false
	}
	switch s := tr[i].(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
			return s.Key.AsString(), true
		}
	}
	return "", false
}

func suggest(name string, candidates []string) string {
	if s := modules.Nearest(name, candidates); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}

// localDeps returns the locals a local refers to directly.
func (c *checker) localDeps(name string) []string {
	var out []string
	for _, tr := range c.pb.Locals[name].Expr.Variables() {
		if tr.RootName() == RootLocal {
			if n, ok := attrName(tr); ok {
				if _, exists := c.pb.Locals[n]; exists {
					out = append(out, n)
				}
			}
		}
	}
	return out
}

func (c *checker) checkLocalCycles() {
	const (
		white = iota
		grey
		black
	)
	state := map[string]int{}
	var stack []string
	var visit func(n string) bool
	visit = func(n string) bool {
		switch state[n] {
		case grey:
			i := 0
			for stack[i] != n {
				i++
			}
			cycle := append(append([]string{}, stack[i:]...), n)
			c.errorf(c.pb.Locals[n].DeclRange, "Cycle in local values", "These local values refer to each other: %s.", "local."+strings.Join(cycle, " → local."))
			return false
		case black:
			return true
		}
		state[n] = grey
		stack = append(stack, n)
		for _, d := range c.localDeps(n) {
			if !visit(d) {
				state[n] = black
				stack = stack[:len(stack)-1]
				return false
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = black
		return true
	}
	for _, n := range c.pb.LocalOrder {
		visit(n)
	}
}

// localTaskRefs returns every task a local reaches, through other locals.
func (c *checker) localTaskRefs(name string) []string {
	c.localClosure(name)
	return c.localTasks[name]
}

func (c *checker) localIncludeRefs(name string) []string {
	c.localClosure(name)
	return c.localIncludes[name]
}

func (c *checker) localClosure(name string) {
	if _, done := c.localTasks[name]; done {
		return
	}
	c.localTasks[name] = []string{} // breaks cycles (reported elsewhere)
	var tasks, incs []string
	host := false
	for _, tr := range c.pb.Locals[name].Expr.Variables() {
		n, ok := attrName(tr)
		switch tr.RootName() {
		case RootTask:
			if ok {
				tasks = append(tasks, n)
			}
			host = true
		case RootInclude:
			if ok {
				incs = append(incs, n)
			}
			host = true
		case RootHost:
			host = true
		case RootLocal:
			if ok && c.pb.Locals[n] != nil {
				c.localClosure(n)
				tasks = append(tasks, c.localTasks[n]...)
				incs = append(incs, c.localIncludes[n]...)
				host = host || c.localHost[n]
			}
		}
	}
	c.localTasks[name], c.localIncludes[name], c.localHost[name] = tasks, incs, host
}

// checkTypes evaluates every module block and task control with all
// references unknown (but typed), which catches literals of the wrong type
// and attributes that a task result does not have.
func (c *checker) checkTypes() {
	pb := c.pb
	ctx := UnknownContext(pb)
	for _, p := range pb.Plays() {
		for _, t := range append(append([]*Task{}, p.Tasks...), p.Handlers...) {
			tctx := ctx.NewChild()
			vars := map[string]cty.Value{}
			if t.ForEach != nil {
				vars[RootEach] = cty.ObjectVal(map[string]cty.Value{"key": cty.UnknownVal(cty.String), "value": cty.DynamicVal})
			}
			if t.Until != nil {
				vars[RootSelf] = cty.UnknownVal(t.Schema.ResultType())
			}
			if len(p.Vars) > 0 {
				all := map[string]cty.Value{}
				for k, v := range ctx.Variables[RootVar].AsValueMap() {
					all[k] = v
				}
				for k := range p.Vars {
					all[k] = cty.DynamicVal
				}
				vars[RootVar] = cty.ObjectVal(all)
			}
			tctx.Variables = vars
			cfg, d := hcldec.Decode(t.Body, t.Spec, tctx)
			c.diags = append(c.diags, d...)
			// Modules check what they can before any host is touched
			// (relative paths, conflicting options); values from
			// variables and tasks are still unknown here.
			if mod, ok := c.reg.Lookup(t.Module); ok && !d.HasErrors() {
				if v, ok := mod.(modules.Validator); ok {
					cfg, _ = cfg.UnmarkDeep()
					ranges := map[string]hcl.Range{}
					for name, a := range t.Body.Attributes {
						ranges[name] = a.Expr.Range()
					}
					c.diags = append(c.diags, v.Validate(modules.ValidateRequest{Config: modules.Config{Value: cfg, Block: t.BodyRange, Ranges: ranges}})...)
				}
			}
			c.checkControl(t.When, cty.Bool, "when", tctx)
			c.checkControl(t.Until, cty.Bool, "until", tctx)
			c.checkControl(t.Retries, cty.Number, "retries", tctx)
			c.checkControl(t.Delay, cty.Number, "delay", tctx)
			c.checkControl(t.IgnoreErrors, cty.Bool, "ignore_errors", tctx)
			if t.ForEach != nil {
				v, d := t.ForEach.Value(tctx)
				c.diags = append(c.diags, d...)
				if !d.HasErrors() && v.IsKnown() && !ForEachType(v.Type()) {
					c.errorf(t.ForEach.Range(), "Invalid for_each argument", "for_each takes a map, an object or a set of strings, not %s.", v.Type().FriendlyName())
				}
			}
		}
	}
}

func (c *checker) checkControl(e hcl.Expression, ty cty.Type, name string, ctx *hcl.EvalContext) {
	if e == nil {
		return
	}
	v, d := e.Value(ctx)
	c.diags = append(c.diags, d...)
	if d.HasErrors() {
		return
	}
	if _, err := convert.Convert(v, ty); err != nil {
		c.errorf(e.Range(), "Incorrect value type", "%q must be a %s: %s.", name, ty.FriendlyName(), err)
	}
}

// ForEachType reports whether a for_each value of type ty is acceptable.
func ForEachType(ty cty.Type) bool {
	return ty.IsMapType() || ty.IsObjectType() || (ty.IsSetType() && ty.ElementType() == cty.String) || ty == cty.DynamicPseudoType
}

// UnknownContext is an evaluation context with every reference of pb known
// by type only: what static checks (and plans of unreachable code) see.
func UnknownContext(pb *Playbook) *hcl.EvalContext {
	vars := map[string]cty.Value{}
	for name, v := range pb.Variables {
		vars[name] = cty.UnknownVal(v.Type)
	}
	locals := map[string]cty.Value{}
	for name := range pb.Locals {
		locals[name] = cty.DynamicVal
	}
	tasks := map[string]cty.Value{}
	for name, t := range pb.Tasks {
		if t.ForEach != nil {
			tasks[name] = cty.DynamicVal
		} else {
			tasks[name] = cty.UnknownVal(t.Schema.ResultType())
		}
	}
	incs := map[string]cty.Value{}
	for name, inc := range pb.Includes {
		outs := map[string]cty.Value{}
		if inc.Playbook != nil {
			for o := range inc.Playbook.Outputs {
				outs[o] = cty.DynamicVal
			}
		}
		incs[name] = cty.ObjectVal(outs)
	}
	return &hcl.EvalContext{
		Variables: map[string]cty.Value{
			RootVar:     cty.ObjectVal(vars),
			RootLocal:   cty.ObjectVal(locals),
			RootTask:    cty.ObjectVal(tasks),
			RootInclude: cty.ObjectVal(incs),
			RootHost:    cty.UnknownVal(HostType),
		},
		Functions: Functions(pb),
	}
}

// HostType is the type of the `host` value.
var HostType = cty.Object(map[string]cty.Type{
	"name":   cty.String,
	"groups": cty.List(cty.String),
	"vars":   cty.DynamicPseudoType,
	"facts":  cty.DynamicPseudoType,
})

// Functions returns the function table for expressions in pb.
func Functions(pb *Playbook) map[string]function.Function {
	return funcs.TableFor(funcs.FileAccess{Dir: pb.Dir, FS: pb.FS, Roots: pb.Roots})
}

// Spec builds the hcldec spec that decodes a module block for schema s.
// The loader builds it once per task (Task.Spec), from the schema of the
// module the run's own registry holds: never from a cache keyed by module
// name, which two runs with different registries (a test's or a site's
// module of the same name) would share.
func Spec(s modules.Schema) hcldec.Spec {
	spec := hcldec.ObjectSpec{}
	for _, a := range s.Attributes {
		var as hcldec.Spec = &hcldec.AttrSpec{Name: a.Name, Type: a.Type, Required: a.Required}
		if a.Default != cty.NilVal {
			as = &hcldec.DefaultSpec{Primary: as, Default: &hcldec.LiteralSpec{Value: a.Default}}
		}
		spec[a.Name] = as
	}
	return spec
}
