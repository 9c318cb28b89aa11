// Package engine runs playbooks: per host it connects, evaluates each task,
// asks the module for a plan, shows the change, applies it (unless planning)
// and runs notified handlers. The CLI and the controller both call Run.
package engine

import (
	"context"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/wsu-project/wsu/engine/funcs"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules"
)

// Mode says whether a run changes hosts.
type Mode string

const (
	ModePlan  Mode = "plan"  // read state, show changes, change nothing
	ModeApply Mode = "apply" // plan and apply each task in turn
)

// DefaultForks bounds how many hosts run at once.
const DefaultForks = 10

// Connector opens a connection to a host. The engine calls it lazily, the
// first time a task on that host needs one, and closes what it returns.
type Connector interface {
	Connect(ctx context.Context, t Target) (host.Host, error)
}

// ConnectorFunc adapts a function to Connector.
type ConnectorFunc func(ctx context.Context, t Target) (host.Host, error)

// Connect implements Connector.
func (f ConnectorFunc) Connect(ctx context.Context, t Target) (host.Host, error) { return f(ctx, t) }

// Target is a host to connect to, with its inventory variables (connection,
// ansible_host, ansible_user...).
type Target struct {
	Name string
	Vars map[string]inventory.Var
}

// Request is everything a run needs.
type Request struct {
	Playbook  *playbook.Playbook
	Inventory *inventory.Inventory
	Inputs    Inputs
	Mode      Mode
	Registry  *modules.Registry
	Connector Connector
	Hooks     Hooks // may be nil

	Forks    int
	Limit    string
	Tags     []string
	SkipTags []string
	// StartAt is Ansible's --start-at-task: the run starts at the first
	// task so named (see startAt); "" starts at the beginning.
	StartAt string
	// Diff asks modules for content diffs in apply too (apply --diff); a
	// plan always shows them.
	Diff bool

	// Sources are the files the playbook was loaded from (Loader.Sources),
	// fingerprinted into the plan.
	Sources map[string][]byte
	// Expect, when set, is a saved plan: Run plans first and refuses to
	// apply if the fresh plan differs from it.
	Expect *planfile.Plan
	// ExpectHash, when set and Expect is not, holds an apply to the plan
	// an admin approved by its hash (Result.PlanHash): Run plans first,
	// under Salt, and applies nothing unless the fresh plan has this hash.
	ExpectHash string
	// Salt keys the plan's hashes (planfile.Plan.Salt); nil: a new
	// random one. Run gives the fresh plan it compares with Expect
	// Expect's salt.
	Salt []byte
	// Secrets is the run's scrubber, when the caller made it (setup does,
	// to scrub what it prints before the run); nil: Run makes one. Run
	// registers the inputs' secrets with it either way.
	Secrets *Scrubber
}

// Result is the outcome of a run.
type Result struct {
	Recap []HostRecap
	// Plan is filled in plan mode, ready for planfile.Save once the caller
	// adds the inputs it wants recorded.
	Plan *planfile.Plan
	// PlanHash identifies Plan by what it would do (planfile.Plan.Hash),
	// computed once as the run returns it: what a controller's approval names
	// and holds an apply to.
	PlanHash string
	Changes  int
	// Diagnostics are every error and warning of the run. Those raised
	// while running are also sent as events; SetupDiagnostics are the ones
	// found before any host was touched (inputs, a stale saved plan), which
	// only the caller can show.
	Diagnostics      hcl.Diagnostics
	SetupDiagnostics hcl.Diagnostics
	Cancelled        bool
	// NothingChecked, when the run touched no host and nothing failed,
	// says why (an empty inventory, plays whose hosts match nothing):
	// such a run checked nothing, which is not "no changes".
	NothingChecked string
}

// Failed reports whether any host failed or was unreachable, or the run
// could not start.
func (r *Result) Failed() bool {
	if r.Diagnostics.HasErrors() || r.Cancelled {
		return true
	}
	for _, h := range r.Recap {
		if h.Failed > 0 || h.Unreachable > 0 {
			return true
		}
	}
	return false
}

// Run executes req.
func Run(ctx context.Context, req Request) *Result {
	if req.Mode == ModeApply && (req.Expect != nil || req.ExpectHash != "") {
		if _, kept := req.Connector.(*keptConnector); !kept && req.Connector != nil {
			// The check's connections serve the apply.
			conns := NewConnections()
			defer conns.Close()
			req.Connector = conns.Connector(req.Connector)
		}
		if req.Expect == nil {
			if pr := checkHash(ctx, req); pr != nil {
				return pr
			}
			return run(ctx, req)
		}
		fresh := req
		fresh.Mode, fresh.Expect, fresh.Hooks = ModePlan, nil, nil
		fresh.Salt, _ = hex.DecodeString(req.Expect.Salt) // Load checked it
		pr := Run(ctx, fresh)
		if pr.Diagnostics.HasErrors() || pr.Failed() {
			d := hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Cannot check the saved plan",
				Detail:   "Planning again, to compare with the saved plan, failed; nothing was applied. Run `wsu plan` to see why.",
			}}
			pr.Diagnostics = append(pr.Diagnostics, d...)
			pr.SetupDiagnostics = append(pr.SetupDiagnostics, d...)
			return pr
		}
		if stale := planfile.Stale(req.Expect, pr.Plan); len(stale) > 0 {
			d := hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Saved plan is stale",
				Detail:   "Nothing was applied. Since the plan was made:\n  - " + strings.Join(stale, "\n  - ") + "\nRun `wsu plan` again and review the new plan.",
			}}
			return &Result{Diagnostics: d, SetupDiagnostics: d}
		}
	}
	return run(ctx, req)
}

// checkHash plans req afresh and returns nil when that plan has
// req.ExpectHash; else the plan's result (its hosts' facts) with the
// error saying why nothing is applied. Of the check's events only a host
// found unreachable is reported (why a login failed matters to the
// caller); its plan is not the run's.
func checkHash(ctx context.Context, req Request) *Result {
	fresh := req
	fresh.Mode, fresh.ExpectHash, fresh.Hooks = ModePlan, "", nil
	if req.Hooks != nil {
		fresh.Hooks = HooksFunc(func(e Event) {
			if e.Type == EventUnreachable {
				req.Hooks.Event(e)
			}
		})
	}
	pr := run(ctx, fresh)
	var d hcl.Diagnostics
	switch {
	case pr.Failed():
		d = hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot check the approved plan",
			Detail: "Planning again, to compare with the approved plan, failed; nothing was applied."}}
	case pr.PlanHash != req.ExpectHash:
		d = hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Plan changed since it was approved",
			Detail: fmt.Sprintf("the plan changed since it was approved (now %s, approved %s): nothing was applied", pr.PlanHash, req.ExpectHash)}}
	default:
		return nil
	}
	pr.Diagnostics = append(pr.Diagnostics, d...)
	pr.SetupDiagnostics = append(pr.SetupDiagnostics, d...)
	return pr
}

// run plans or applies req, with no saved or approved plan to check.
func run(ctx context.Context, req Request) *Result {
	r, diags := newRunner(req)
	if diags.HasErrors() {
		return &Result{Diagnostics: diags, SetupDiagnostics: diags}
	}
	defer r.scrubResult()
	r.result.SetupDiagnostics = diags // warnings
	r.emit(Event{Type: EventRunStart, Hosts: r.hostOrder})
	r.result.Diagnostics = append(r.result.Diagnostics, diags...)
	r.runPlaybook(ctx, r.root)
	r.closeAll(ctx.Err() == nil)
	if ctx.Err() != nil {
		r.result.Cancelled = true
		r.emit(Event{Type: EventRunCancelled})
	}
	r.result.Recap = r.recap()
	if !r.result.Failed() && len(r.result.Recap) == 0 {
		r.result.NothingChecked = r.nothingChecked()
	}
	r.emit(Event{Type: EventRecap, Recap: r.result.Recap, Failed: r.result.Failed(), NothingChecked: r.result.NothingChecked})
	return r.result
}

// nothingChecked says why a run that failed nowhere touched no host.
func (r *runner) nothingChecked() string {
	if len(r.hostOrder) == 0 {
		return "the inventory has no hosts"
	}
	if r.req.Limit != "" {
		return fmt.Sprintf("no play's hosts matched a host of the inventory within --limit %q", r.req.Limit)
	}
	if len(r.unmatched) == 0 {
		return "no play ran"
	}
	return "no play's hosts matched a host of the inventory: " + strings.Join(r.unmatched, "; ")
}

type runner struct {
	req       Request
	inputs    *parsedInputs
	root      *instance
	hosts     map[string]*hostState
	hostOrder []string
	result    *Result
	forks     int
	aborted   bool
	// restrict, when set, is the batch of hosts a serial include is
	// running; plays inside it see only these.
	restrict map[string]bool
	mu       sync.Mutex // guards result.Changes, plan
	// secrets scrubs everything the run shows: events, the diagnostics it
	// returns, plan summaries.
	secrets *Scrubber
	// salt keys the plan's hashes (Request.Salt, or a new one).
	salt []byte
	// start is --start-at-task, resolved; nil without it.
	start *startAt
	// notRunSent are the plays already reported as not run (a serial
	// include's later batches meet them again).
	notRunSent map[string]bool
	// unmatched say which plays' hosts matched no host, for a run that
	// checked nothing.
	unmatched []string
	// shared holds the locals every host with the same variables shares.
	shared sharedLocals
}

// instance is one playbook file in the include tree.
type instance struct {
	pb     *playbook.Playbook
	path   string // address prefix: "" or `include.a.include.b.`
	parent *instance
	inc    *playbook.Include
	// children by include name
	children map[string]*instance
	// funcs is the function table of the playbook's expressions, built
	// once (runner.funcs) and shared, read-only, by every host's scopes:
	// building one per host and instance was a measurable part of a fleet
	// run (docs/performance.md).
	funcsOnce sync.Once
	funcs     map[string]function.Function
}

// funcs is inst's function table.
func (r *runner) funcs(inst *instance) map[string]function.Function {
	inst.funcsOnce.Do(func() {
		inst.funcs = funcs.TableFor(funcs.FileAccess{Dir: inst.pb.Dir, FS: inst.pb.FS, Roots: inst.pb.Roots, OnRead: r.recordRead})
	})
	return inst.funcs
}

func newRunner(req Request) (*runner, hcl.Diagnostics) {
	if req.Forks <= 0 {
		req.Forks = DefaultForks
	}
	if req.Mode == "" {
		req.Mode = ModePlan
	}
	declared := map[string]bool{}
	req.Playbook.Walk(func(pb *playbook.Playbook) {
		for n := range pb.Variables {
			declared[n] = true
		}
	})
	secrets := req.Secrets
	if secrets == nil {
		secrets = NewScrubber()
	}
	in, diags := parseInputs(req.Inputs, declared)
	collectSecrets(secrets, req.Playbook, req.Inventory, in)
	diags = secrets.Diagnostics(diags)
	if diags.HasErrors() {
		return nil, diags
	}
	if d := checkSelection(req); d.HasErrors() {
		return nil, secrets.Diagnostics(d)
	}
	r := &runner{req: req, inputs: in, hosts: map[string]*hostState{}, forks: req.Forks, result: &Result{}, secrets: secrets, notRunSent: map[string]bool{}}
	r.root = newInstance(req.Playbook, "", nil, nil)
	var d hcl.Diagnostics
	if r.start, d = r.findStart(); d.HasErrors() {
		return nil, secrets.Diagnostics(d)
	}
	inv := req.Inventory
	if inv == nil {
		inv = inventory.FromList("")
	}
	r.req.Inventory = inv
	for _, name := range inv.Order {
		r.hosts[name] = newHostState(inv, name)
		r.hostOrder = append(r.hostOrder, name)
	}
	if d := r.checkInputs(); d.HasErrors() {
		return nil, append(diags, d...)
	}
	r.salt = req.Salt
	if len(r.salt) == 0 {
		r.salt = planfile.NewSalt()
	}
	r.result.Plan = &planfile.Plan{Salt: hex.EncodeToString(r.salt), Sources: map[string]string{}, Hosts: map[string]*planfile.Host{}}
	for name, src := range req.Sources {
		r.result.Plan.Sources[name] = r.hash(string(src))
	}
	for name, src := range in.Sources {
		r.result.Plan.Sources[name] = r.hash(string(src))
	}
	return r, diags
}

// checkSelection refuses, before any host is touched, a playbook with no
// play anywhere (nothing would be checked) and a --tags naming a tag no
// task carries (which would select nothing, silently).
func checkSelection(req Request) hcl.Diagnostics {
	plays := 0
	tags := map[string]bool{"always": true}
	req.Playbook.Walk(func(pb *playbook.Playbook) {
		for _, p := range pb.Plays() {
			plays++
			for _, t := range append(append([]*playbook.Task{}, p.Tasks...), p.Handlers...) {
				for _, tag := range t.Tags {
					tags[tag] = true
				}
			}
		}
	})
	if plays == 0 {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Nothing to run",
			Detail: fmt.Sprintf("%s has no play, and includes none: there is nothing to check or change.", req.Playbook.Filename)}}
	}
	known := make([]string, 0, len(tags))
	for t := range tags {
		known = append(known, t)
	}
	sort.Strings(known)
	var diags hcl.Diagnostics
	for _, want := range req.Tags {
		if !tags[want] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown tag",
				Detail: fmt.Sprintf("--tags %s: no task carries the tag %q, so nothing would be checked.%s Tags in this playbook: %s.", want, want, suggestName(want, known), strings.Join(known, ", "))})
		}
	}
	return diags
}

// checkInputs validates, before any host is touched, every value given
// from outside (-var, WSU_VAR_, -var-file, the inventory's host and group
// vars) against its variable's type, nullability and validation rules, in
// every playbook of the run whose include does not set the variable
// itself, and every value an include passes that no host can change
// (includeValue). A bad value is found before the first play changes
// anything, not when the include using it is reached.
func (r *runner) checkInputs() hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := map[string]bool{}
	check := func(v *playbook.Variable, rv rawValue) {
		_, d := r.inputs.resolve(v, nil, &rv)
		for _, diag := range d {
			key := diag.Summary + "\x00" + diag.Detail
			if diag.Subject != nil {
				key += "\x00" + diag.Subject.String()
			}
			if !seen[key] {
				seen[key] = true
				diags = append(diags, diag)
			}
		}
	}
	var walk func(inst *instance)
	walk = func(inst *instance) {
		for _, name := range inst.pb.VariableOrder {
			v := inst.pb.Variables[name]
			if inst.inc != nil {
				if expr, set := inst.inc.Vars[name]; set {
					if rv, ok := r.includeValue(inst, expr); ok {
						check(v, rv)
					}
					continue
				}
			}
			if rv, ok := r.inputs.cli[name]; ok {
				check(v, rv)
				continue // wins over every other source
			}
			if rv, ok := r.inputs.env[name]; ok {
				check(v, rv)
				continue
			}
			for _, f := range r.inputs.files {
				if rv, ok := f[name]; ok {
					check(v, rv)
				}
			}
			for _, h := range r.hostOrder {
				if iv, ok := r.hosts[h].vars[name]; ok {
					rng := iv.Range
					check(v, rawValue{value: iv.Value, source: "inventory " + iv.Range.Filename, rng: &rng})
				}
			}
		}
		for _, it := range inst.pb.Items {
			if inc, ok := it.(*playbook.Include); ok {
				walk(inst.children[inc.Name])
			}
		}
	}
	walk(r.root)
	return diags
}

// includeValue is the value an include passes to its playbook's variable,
// when no host can change it: the expression reads only the parent's
// variables (through functions), none of which an inventory sets, so it
// is the same for every host and can be checked before any is touched.
func (r *runner) includeValue(inst *instance, expr hcl.Expression) (rawValue, bool) {
	if !r.hostIndependent(inst.parent, expr) {
		return rawValue{}, false
	}
	sc, d := r.globalScope(inst.parent)
	if d.HasErrors() {
		return rawValue{}, false
	}
	val, d := sc.eval(expr, nil, nil)
	if d.HasErrors() || !val.IsWhollyKnown() {
		return rawValue{}, false
	}
	return rawValue{value: val, source: "include " + inst.inc.Name, rng: expr.Range().Ptr()}, true
}

// hostIndependent: expr, evaluated in inst, reads only var.NAME, and for
// each either -var or WSU_VAR_ sets it (they win over the inventory), or
// no host's inventory does and, where an include above sets it, that
// value is host-independent too.
func (r *runner) hostIndependent(inst *instance, expr hcl.Expression) bool {
	for _, tr := range expr.Variables() {
		if tr.RootName() != "var" || len(tr) < 2 {
			return false
		}
		attr, ok := tr[1].(hcl.TraverseAttr)
		if !ok {
			return false
		}
		name := attr.Name
		if inst.inc != nil {
			if e, set := inst.inc.Vars[name]; set {
				if !r.hostIndependent(inst.parent, e) {
					return false
				}
				continue
			}
		}
		if _, ok := r.inputs.cli[name]; ok {
			continue
		}
		if _, ok := r.inputs.env[name]; ok {
			continue
		}
		for _, h := range r.hostOrder {
			if _, ok := r.hosts[h].vars[name]; ok {
				return false
			}
		}
	}
	return true
}

func newInstance(pb *playbook.Playbook, path string, parent *instance, inc *playbook.Include) *instance {
	inst := &instance{pb: pb, path: path, parent: parent, inc: inc, children: map[string]*instance{}}
	for _, it := range pb.Items {
		if i, ok := it.(*playbook.Include); ok {
			inst.children[i.Name] = newInstance(i.Playbook, path+"include."+i.Name+".", inst, i)
		}
	}
	return inst
}

func (r *runner) emit(e Event) {
	if r.req.Hooks == nil {
		return
	}
	e.Schema = EventSchema
	e.Time = time.Now().UTC()
	e.Mode = r.req.Mode
	e.applyScrub(r.secrets.Scrub)
	if e.traffic != nil && e.Type == EventTaskResult {
		e.Traffic = e.traffic()
	}
	e.traffic = nil
	r.req.Hooks.Event(e)
}

// runPlaybook runs one playbook instance (the root or an include) item
// by item in file order: its plays, and its includes with their outputs.
func (r *runner) runPlaybook(ctx context.Context, inst *instance) {
	for i, it := range inst.pb.Items {
		if ctx.Err() != nil || r.aborted {
			r.notRun(ctx, inst.pb.Items[i:])
			return
		}
		switch it := it.(type) {
		case *playbook.Play:
			r.runPlay(ctx, inst, it)
		case *playbook.Include:
			if it.Hosts != nil {
				r.runSerialInclude(ctx, inst, it)
				continue
			}
			child := inst.children[it.Name]
			r.runPlaybook(ctx, child)
			if ctx.Err() != nil || r.aborted {
				r.notRun(ctx, inst.pb.Items[i+1:])
				return
			}
			r.collectOutputs(ctx, child)
		}
	}
}

// markNotRun reports a play as not run, once.
func (r *runner) markNotRun(play, why string) {
	if r.notRunSent[play] {
		return
	}
	r.notRunSent[play] = true
	r.emit(Event{Type: EventPlayNotRun, Play: play, Message: why})
}

// notRun reports the plays (also those inside includes) that an earlier
// error or an interruption kept from running, so none of them reads as
// a play that ran on no host.
func (r *runner) notRun(ctx context.Context, items []playbook.Item) {
	why := "an earlier error stopped the run"
	if ctx.Err() != nil {
		why = "the run was interrupted"
	}
	for _, it := range items {
		switch it := it.(type) {
		case *playbook.Play:
			r.markNotRun(it.Name, "not run: "+why)
		case *playbook.Include:
			r.notRun(ctx, it.Playbook.Items)
		}
	}
}

// collectOutputs evaluates an include's outputs for every live host and
// hands them to the includer's scope.
func (r *runner) collectOutputs(ctx context.Context, child *instance) {
	for _, name := range r.hostOrder {
		hs := r.hosts[name]
		if hs.failed || hs.unreachable || (r.restrict != nil && !r.restrict[name]) {
			continue
		}
		if st := hs.includes[child]; st != includeOn {
			if parent, d := r.scope(hs, child.parent); !d.HasErrors() {
				parent.includes[child.inc.Name] = offOutputs(child.pb, st)
			}
			continue
		}
		if _, ran := hs.scopes[child]; !ran {
			continue // none of the include's plays targeted this host
		}
		sc, diags := r.scope(hs, child)
		if diags.HasErrors() {
			continue // reported when the scope was first needed
		}
		parent, diags := r.scope(hs, child.parent)
		if diags.HasErrors() {
			continue
		}
		if hs.conn == nil && outputsReadFacts(child.pb) {
			if _, err := r.connect(ctx, hs); err != nil {
				r.unreachable(ctx, hs, Event{Host: hs.name}, err)
				continue
			}
		}
		outs := map[string]cty.Value{}
		for _, on := range child.pb.OutputOrder {
			o := child.pb.Outputs[on]
			v, d := sc.eval(o.Value, nil, nil)
			if d.HasErrors() {
				r.failHost(hs, "", d)
				break
			}
			if o.Sensitive {
				v = v.Mark(Sensitive)
			}
			r.secrets.AddMarked(v)
			outs[on] = v
		}
		parent.includes[child.inc.Name] = cty.ObjectVal(outs)
	}
}

// evalGlobal evaluates a play's or an include's own expression (hosts,
// serial, max_fail_percentage): without a host, so only var and local.
func (r *runner) evalGlobal(inst *instance, expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	sc, diags := r.globalScope(inst)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	return sc.eval(expr, nil, nil)
}

// selectHosts evaluates a play's hosts pattern against the inventory and
// --limit, dropping hosts that already failed.
func (r *runner) selectHosts(inst *instance, hostsExpr hcl.Expression) ([]string, hcl.Diagnostics) {
	live, _, diags := r.matchHosts(inst, hostsExpr)
	return live, diags
}

// matchHosts is selectHosts, also counting the hosts the pattern matched
// that failed or were unreachable earlier (down).
func (r *runner) matchHosts(inst *instance, hostsExpr hcl.Expression) (live []string, down int, diags hcl.Diagnostics) {
	v, diags := r.evalGlobal(inst, hostsExpr)
	if diags.HasErrors() {
		return nil, 0, diags
	}
	pattern, err := asString(v)
	if err != nil {
		return nil, 0, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid hosts", Detail: "hosts must be a string: a group, a host or a pattern like \"windows:!win03\".", Subject: hostsExpr.Range().Ptr()}}
	}
	names, err := r.req.Inventory.Match(pattern)
	if err != nil {
		return nil, 0, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid hosts pattern", Detail: err.Error(), Subject: hostsExpr.Range().Ptr()}}
	}
	if r.req.Limit != "" {
		limited, err := r.req.Inventory.Match(r.req.Limit)
		if err != nil {
			return nil, 0, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid --limit", Detail: err.Error()}}
		}
		keep := map[string]bool{}
		for _, n := range limited {
			keep[n] = true
		}
		var out []string
		for _, n := range names {
			if keep[n] {
				out = append(out, n)
			}
		}
		names = out
	}
	if len(names) == 0 {
		why := fmt.Sprintf("hosts = %q", pattern)
		if g := r.req.Inventory.Groups[pattern]; g != nil {
			why += " is a group with no hosts"
			if len(g.Children) > 0 {
				why += " (its children: " + strings.Join(g.Children, ", ") + "; a :children line naming an undefined group makes an empty group)"
			}
		}
		r.unmatched = append(r.unmatched, why)
	}
	for _, n := range names {
		if r.restrict != nil && !r.restrict[n] {
			continue // outside the current batch of a serial include
		}
		switch hs := r.hosts[n]; {
		case hs == nil:
		case hs.failed || hs.unreachable:
			down++
		default:
			live = append(live, n)
		}
	}
	return live, down, nil
}

// batches splits hosts per a serial setting.
func (r *runner) batches(inst *instance, serial hcl.Expression, hosts []string) ([][]string, hcl.Diagnostics) {
	if serial == nil || len(hosts) == 0 {
		return [][]string{hosts}, nil
	}
	v, diags := r.evalGlobal(inst, serial)
	if diags.HasErrors() {
		return nil, diags
	}
	v, _ = v.Unmark()
	size := 0
	bad := hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid serial", Detail: "serial must be a positive number of hosts, or a percentage string like \"30%\".", Subject: serial.Range().Ptr()}}
	switch {
	case v.IsNull() || !v.IsKnown():
		return nil, bad
	case v.Type() == cty.Number:
		n, _ := v.AsBigFloat().Int64()
		size = int(n)
	case v.Type() == cty.String && strings.HasSuffix(v.AsString(), "%"):
		var pct float64
		if _, err := fmt.Sscanf(strings.TrimSuffix(v.AsString(), "%"), "%g", &pct); err != nil || pct <= 0 || pct > 100 {
			return nil, bad
		}
		size = int(float64(len(hosts)) * pct / 100)
		if size < 1 {
			size = 1
		}
	default:
		return nil, bad
	}
	if size <= 0 {
		return nil, bad
	}
	var out [][]string
	for i := 0; i < len(hosts); i += size {
		end := min(i+size, len(hosts))
		out = append(out, hosts[i:end])
	}
	return out, nil
}

func (r *runner) maxFail(inst *instance, expr hcl.Expression) (float64, bool, hcl.Diagnostics) {
	if expr == nil {
		return 0, false, nil
	}
	v, diags := r.evalGlobal(inst, expr)
	if diags.HasErrors() {
		return 0, false, diags
	}
	v, _ = v.Unmark()
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.Number {
		return 0, false, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid max_fail_percentage", Detail: "max_fail_percentage must be a number from 0 to 100.", Subject: expr.Range().Ptr()}}
	}
	f, _ := v.AsBigFloat().Float64()
	return f, true, nil
}

// rollout is how a play or a serial include reaches its hosts: which
// hosts, in which batches, and the failure share that stops the run.
type rollout struct {
	hosts   []string
	down    int // hosts matched that failed or were unreachable earlier
	batches [][]string
	maxFail float64 // a percentage, when hasMax
	hasMax  bool
}

// rollout reads a play's or a serial include's hosts, serial and
// max_fail_percentage. An error in any of them stops the run: it is
// reported (as a diagnostic of play, which may be "") and ok is false.
func (r *runner) rollout(inst *instance, play string, hostsExpr, serial, maxFail hcl.Expression) (ro rollout, ok bool) {
	fail := func(d hcl.Diagnostics) (rollout, bool) {
		r.result.Diagnostics = append(r.result.Diagnostics, d...)
		if play != "" {
			r.markNotRun(play, "not run: its hosts, serial or max_fail_percentage is invalid")
		}
		r.emit(Event{Type: EventDiagnostic, Play: play, Diagnostics: DiagViews(d)})
		r.aborted = true
		return rollout{}, false
	}
	var diags hcl.Diagnostics
	if ro.hosts, ro.down, diags = r.matchHosts(inst, hostsExpr); diags.HasErrors() {
		return fail(diags)
	}
	if ro.batches, diags = r.batches(inst, serial, ro.hosts); diags.HasErrors() {
		return fail(diags)
	}
	if ro.maxFail, ro.hasMax, diags = r.maxFail(inst, maxFail); diags.HasErrors() {
		return fail(diags)
	}
	return ro, true
}

func (r *runner) runPlay(ctx context.Context, inst *instance, p *playbook.Play) {
	if r.start.skipsPlay(inst, p) {
		r.markNotRun(p.Name, fmt.Sprintf("skipped: before --start-at-task %q", r.start.name))
		return
	}
	ro, ok := r.rollout(inst, p.Name, p.Hosts, p.Serial, p.MaxFailPercentage)
	if !ok {
		return
	}
	if len(ro.hosts) == 0 && ro.down > 0 {
		// Not "PLAY (0 hosts)" after every host failed: say why.
		r.markNotRun(p.Name, "not run: every host of the play failed or was unreachable earlier")
		return
	}
	r.emit(Event{Type: EventPlayStart, Play: p.Name, Hosts: ro.hosts, Batches: ro.batches, Count: len(p.Tasks), Message: r.start.playNote(inst, p)})
	for _, batch := range ro.batches {
		if ctx.Err() != nil {
			return
		}
		r.playBatch(ctx, inst, p, batch)
		if r.tooManyFailed(batch, ro, p.MaxFailPercentage, p.Name) {
			return
		}
	}
}

// playBatch runs a play on a batch of hosts, at most forks at once.
func (r *runner) playBatch(ctx context.Context, inst *instance, p *playbook.Play, batch []string) {
	sem := make(chan struct{}, r.forks)
	var wg sync.WaitGroup
	for _, name := range batch {
		hs := r.hosts[name]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r.playOnHost(ctx, inst, p, hs)
		}()
	}
	wg.Wait()
}

// tooManyFailed stops the run when a batch's failures exceed
// max_fail_percentage.
func (r *runner) tooManyFailed(batch []string, ro rollout, expr hcl.Expression, play string) bool {
	if !ro.hasMax || len(batch) == 0 {
		return false
	}
	failed := 0
	for _, name := range batch {
		if hs := r.hosts[name]; hs.failed || hs.unreachable {
			failed++
		}
	}
	if float64(failed)*100/float64(len(batch)) <= ro.maxFail {
		return false
	}
	d := hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Maximum failure percentage exceeded",
		Detail:   fmt.Sprintf("%d of %d hosts in this batch failed, more than max_fail_percentage = %g; the run stops here.", failed, len(batch), ro.maxFail),
		Subject:  expr.Range().Ptr(),
	}}
	r.result.Diagnostics = append(r.result.Diagnostics, d...)
	r.emit(Event{Type: EventPlayAborted, Play: play, Diagnostics: DiagViews(d)})
	r.aborted = true
	return true
}

// runSerialInclude runs an included playbook whole, one batch of its hosts
// at a time.
func (r *runner) runSerialInclude(ctx context.Context, inst *instance, inc *playbook.Include) {
	ro, ok := r.rollout(inst, "", inc.Hosts, inc.Serial, inc.MaxFailPercentage)
	if !ok {
		return
	}
	outer := r.restrict
	defer func() { r.restrict = outer }()
	child := inst.children[inc.Name]
	for _, batch := range ro.batches {
		if ctx.Err() != nil || r.aborted {
			return
		}
		r.restrict = map[string]bool{}
		for _, h := range batch {
			r.restrict[h] = true
		}
		r.runPlaybook(ctx, child)
		if ctx.Err() != nil || r.aborted {
			return
		}
		r.collectOutputs(ctx, child)
		if r.tooManyFailed(batch, ro, inc.MaxFailPercentage, "include "+inc.Name) {
			return
		}
	}
}

func (r *runner) recap() []HostRecap {
	out := make([]HostRecap, 0, len(r.hosts))
	for _, name := range r.hostOrder {
		hs := r.hosts[name]
		if !hs.touched {
			continue
		}
		rc := hs.recap
		rc.Host = name
		rc.Facts = hs.reported
		if c, ok := hs.counters(); ok {
			rc.Traffic = trafficOf(c)
		}
		out = append(out, rc)
	}
	return out
}

// scrubResult scrubs the diagnostics the run returns: a caller (the
// controller's status) shows them without events' scrubbing.
// A plan's summaries are scrubbed again: a secret may have been learnt
// (a later task's sensitive result) after a summary was recorded. The
// plan's hash is then taken of the plan as the run returns it.
func (r *runner) scrubResult() {
	r.result.Diagnostics = r.secrets.Diagnostics(r.result.Diagnostics)
	r.result.SetupDiagnostics = r.secrets.Diagnostics(r.result.SetupDiagnostics)
	for _, h := range r.result.Plan.Hosts {
		for i := range h.Tasks {
			h.Tasks[i].Summary = r.secrets.Scrub(h.Tasks[i].Summary)
			if c := h.Tasks[i].Change; c != nil {
				e := Event{Change: c}
				e.applyScrub(r.secrets.Scrub)
				h.Tasks[i].Change = e.Change
			}
		}
	}
	r.result.PlanHash = r.result.Plan.Hash() // of the plan as the run returns it
}

// closeAll ends the run's connections: each given back to the
// request's Connections when the run finished (not cancelled) and the host
// came through it well, closed otherwise.
func (r *runner) closeAll(finished bool) {
	var keeper *Connections
	if kc, ok := r.req.Connector.(*keptConnector); ok {
		keeper = kc.conns
	}
	for _, hs := range r.hosts {
		h := hs.detachConn()
		if h == nil {
			continue
		}
		healthy := finished && !hs.failed && !hs.unreachable && !lost(h)
		if keeper == nil || !healthy || !keeper.keep(Target{Name: hs.name, Vars: hs.vars}, h) {
			h.Close()
		}
	}
}

func (r *runner) failHost(hs *hostState, play string, d hcl.Diagnostics) {
	hs.failed = true
	hs.recap.Failed++
	r.emit(Event{Type: EventHostFailed, Host: hs.name, Play: play, Diagnostics: DiagViews(d)})
}

// hash is the plan's keyed hash of parts.
func (r *runner) hash(parts ...string) string { return planfile.Hash(r.salt, parts...) }

// recordPlan adds a planned task outcome to the saved-plan fingerprints.
func (r *runner) recordPlan(hs *hostState, addr string, status Status, summary string, fingerprint func() []string) {
	r.recordPlanChange(hs, planfile.Task{Address: addr, Status: string(status), Summary: summary}, fingerprint)
}

// recordPlanChange records a planned outcome with its module and shown
// change, for `wsu show`.
func (r *runner) recordPlanChange(hs *hostState, task planfile.Task, fingerprint func() []string) {
	if r.req.Mode != ModePlan {
		return
	}
	fp := ""
	if fingerprint != nil {
		fp = r.hash(fingerprint()...)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ph := r.result.Plan.Hosts[hs.name]
	if ph == nil {
		ph = &planfile.Host{Vars: map[string]string{}}
		r.result.Plan.Hosts[hs.name] = ph
	}
	task.Fingerprint = fp
	ph.Tasks = append(ph.Tasks, task)
}

// recordRead puts a file that file(), templatefile() and friends read
// into the plan's sources, so a saved plan goes stale, naming the file,
// when a template changes.
func (r *runner) recordRead(name string, data []byte) {
	if r.req.Mode != ModePlan {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.result.Plan.Sources[name] = r.hash(string(data))
}

func (r *runner) recordVars(hs *hostState, inst *instance, vals map[string]cty.Value) {
	if r.req.Mode != ModePlan {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	ph := r.result.Plan.Hosts[hs.name]
	if ph == nil {
		ph = &planfile.Host{Vars: map[string]string{}}
		r.result.Plan.Hosts[hs.name] = ph
	}
	for name, v := range vals {
		ph.Vars[inst.pb.Filename+":"+name] = r.hash(canon(v))
	}
}

func (r *runner) countChange() {
	r.mu.Lock()
	r.result.Changes++
	r.mu.Unlock()
}

func asString(v cty.Value) (string, error) {
	v, _ = v.Unmark()
	if v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", fmt.Errorf("not a string")
	}
	return v.AsString(), nil
}

func suggestName(name string, candidates []string) string {
	if s := modules.Nearest(name, candidates); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}

var validationFuncs = funcs.Table(".", nil)

// Check finds, without touching any host, what Run would refuse before
// its first play (inputs that do not fit their variables, an unknown tag, a
// playbook without plays) and the errors in each play's and serial
// include's own hosts, serial and max_fail_percentage that can be known
// without a host: literals, and expressions of var and local. A hosts
// pattern is matched only when req.Inventory is set. wsu validate runs it.
func Check(req Request) hcl.Diagnostics {
	r, diags := newRunner(req)
	if diags.HasErrors() {
		return diags
	}
	var walk func(inst *instance)
	walk = func(inst *instance) {
		for _, it := range inst.pb.Items {
			switch it := it.(type) {
			case *playbook.Play:
				diags = append(diags, r.checkRollout(inst, req.Inventory != nil, it.Hosts, it.Serial, it.MaxFailPercentage)...)
			case *playbook.Include:
				if it.Hosts != nil {
					diags = append(diags, r.checkRollout(inst, req.Inventory != nil, it.Hosts, it.Serial, it.MaxFailPercentage)...)
				}
				walk(inst.children[it.Name])
			}
		}
	}
	walk(r.root)
	return diags
}

// checkRollout is rollout's checks on what is known without a host.
func (r *runner) checkRollout(inst *instance, match bool, hostsExpr, serial, maxFail hcl.Expression) hcl.Diagnostics {
	known := func(e hcl.Expression) bool {
		if e == nil {
			return false
		}
		v, d := r.evalGlobal(inst, e)
		return !d.HasErrors() && v.IsWhollyKnown()
	}
	var diags hcl.Diagnostics
	hosts := []string{"a"} // serial is checked against one host
	if known(hostsExpr) {
		if match {
			names, d := r.selectHosts(inst, hostsExpr)
			diags = append(diags, d...)
			if len(names) > 0 {
				hosts = names
			}
		} else if v, _ := r.evalGlobal(inst, hostsExpr); v.Type() != cty.String {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid hosts", Detail: "hosts must be a string: a group, a host or a pattern like \"windows:!win03\".", Subject: hostsExpr.Range().Ptr()})
		}
	}
	if known(serial) {
		_, d := r.batches(inst, serial, hosts)
		diags = append(diags, d...)
	}
	if known(maxFail) {
		_, _, d := r.maxFail(inst, maxFail)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if f, _, _ := r.maxFail(inst, maxFail); f < 0 || f > 100 {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid max_fail_percentage", Detail: "max_fail_percentage must be a number from 0 to 100.", Subject: maxFail.Range().Ptr()})
			}
		}
	}
	return diags
}

// PlayOutline is a play as --list-hosts and --list-tasks show it.
type PlayOutline struct {
	Play  string
	Hosts []string // nil with HostsErr set when they depend on a host
	// HostsErr says why the hosts are not listed.
	HostsErr string
	Tasks    []TaskOutline
}

// TaskOutline is a task selected by --tags and --skip-tags.
type TaskOutline struct {
	Address string   `json:"address"`
	Module  string   `json:"module"`
	Tags    []string `json:"tags,omitempty"`
}

// Outline lists each play in run order with the hosts it targets and the
// tasks --tags and --skip-tags select, without touching any host (Ansible's
// --list-hosts and --list-tasks).
func Outline(req Request) ([]PlayOutline, hcl.Diagnostics) {
	r, diags := newRunner(req)
	if diags.HasErrors() {
		return nil, diags
	}
	var out []PlayOutline
	var walk func(inst *instance)
	walk = func(inst *instance) {
		for _, it := range inst.pb.Items {
			switch it := it.(type) {
			case *playbook.Play:
				po := PlayOutline{Play: it.Name}
				hosts, d := r.selectHosts(inst, it.Hosts)
				if d.HasErrors() {
					po.HostsErr = d[0].Summary + ": " + d[0].Detail
					diags = append(diags, d...)
				} else {
					po.Hosts = hosts
				}
				for i, t := range it.Tasks {
					if r.selected(t) && !r.start.skipsTask(inst, it, i) {
						po.Tasks = append(po.Tasks, TaskOutline{Address: inst.path + fmt.Sprintf("task[%q]", t.Name), Module: t.Module, Tags: t.Tags})
					}
				}
				out = append(out, po)
			case *playbook.Include:
				walk(inst.children[it.Name])
			}
		}
	}
	walk(r.root)
	return out, diags
}
