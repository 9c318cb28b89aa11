// Package playbook loads HCL playbooks into their static structure and checks
// everything that can be checked before any host is touched: block and
// argument names, module schemas, references, duplicate names, cycles.
// Expressions stay unevaluated; the engine evaluates them per host.
package playbook

import (
	"io/fs"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

// Playbook is one loaded file, with the files it includes loaded too.
type Playbook struct {
	Filename string
	// Dir is the directory relative file functions and include sources
	// resolve against; FS is the file system it lives in (nil: the OS).
	Dir string
	FS  fs.FS
	// Roots, when set, are the directories the run may read files in
	// (Loader.Confine): file functions, includes on disk and the local
	// paths modules read (modules.Attribute.Local) stay inside them.
	Roots []string

	Variables     map[string]*Variable
	VariableOrder []string
	Locals        map[string]*Local
	LocalOrder    []string
	// Items are the plays and includes in file order; they run in that order.
	Items   []Item
	Outputs map[string]*Output
	// OutputOrder keeps outputs in file order.
	OutputOrder []string

	// Tasks indexes every task of every play by name (names are unique
	// within a file so that task.NAME is unambiguous).
	Tasks map[string]*Task
	// Includes indexes include blocks by name.
	Includes map[string]*Include
}

// Item is a Play or an Include.
type Item interface{ item() }

// Variable is a `variable` block.
type Variable struct {
	Name        string
	Description string
	Type        cty.Type
	// Default is cty.NilVal when the variable has none (and so is required).
	Default     cty.Value
	Sensitive   bool
	Nullable    bool
	Validations []*Validation
	DeclRange   hcl.Range
}

// Required reports whether a value must come from outside.
func (v *Variable) Required() bool { return v.Default == cty.NilVal }

// Validation is a `validation` block in a variable.
type Validation struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

// Local is one attribute of a `locals` block.
type Local struct {
	Name      string
	Expr      hcl.Expression
	DeclRange hcl.Range
}

// Output is an `output` block: a value an include hands to its includer.
type Output struct {
	Name        string
	Description string
	Value       hcl.Expression
	Sensitive   bool
	DeclRange   hcl.Range
}

// Play is a `play` block.
type Play struct {
	Name              string
	Hosts             hcl.Expression
	Serial            hcl.Expression // nil: all hosts in one batch
	MaxFailPercentage hcl.Expression // nil: any failure fails only that host
	// Vars are play-scoped values readable as var.NAME within the play.
	Vars      map[string]hcl.Expression
	VarsOrder []string
	Tasks     []*Task
	Handlers  []*Task
	DeclRange hcl.Range
}

func (*Play) item() {}

// Task is a `task` or `handler` block: one module call with its controls.
type Task struct {
	Name      string
	Handler   bool
	Play      *Play
	Module    string
	Schema    modules.Schema
	Spec      hcldec.Spec     // decodes Body: Spec(Schema), built at load
	Body      *hclsyntax.Body // the module block's body
	BodyRange hcl.Range

	When         hcl.Expression
	ForEach      hcl.Expression
	Until        hcl.Expression
	Retries      hcl.Expression
	Delay        hcl.Expression
	IgnoreErrors hcl.Expression
	Notify       []string
	NotifyRange  hcl.Range
	Tags         []string
	// Parallelism is how many of the task's for_each instances may run at
	// once on one host in an apply (1: one after another, the default).
	// A plan runs them in order whatever it is, so plans read the same.
	Parallelism int
	// Index is the task's position among the file's tasks (handlers: -1).
	Index     int
	DeclRange hcl.Range
}

// Include is an `include` block: another playbook run at this point.
type Include struct {
	Name   string
	Source string
	// Hosts and Serial, when set, run the whole included playbook one
	// batch of hosts at a time (an upgrade, node by node), instead of play
	// by play across all hosts. MaxFailPercentage stops the batches.
	Hosts             hcl.Expression
	Serial            hcl.Expression
	MaxFailPercentage hcl.Expression
	// When, when set, switches the whole include on or off per host, as
	// a task's when does one task (Terraform's count = 0 on a module
	// call): false skips, and reports as skipped, every task of the
	// included playbook for that host, and its outputs read as null.
	When      hcl.Expression
	Vars      map[string]hcl.Expression
	VarsOrder []string
	Playbook  *Playbook
	Index     int // position among the file's items
	DeclRange hcl.Range
}

func (*Include) item() {}

// Plays returns the file's own plays in order.
func (p *Playbook) Plays() []*Play {
	var out []*Play
	for _, it := range p.Items {
		if pl, ok := it.(*Play); ok {
			out = append(out, pl)
		}
	}
	return out
}

// Walk calls fn for p and every playbook it includes, depth first.
func (p *Playbook) Walk(fn func(*Playbook)) {
	fn(p)
	for _, it := range p.Items {
		if inc, ok := it.(*Include); ok && inc.Playbook != nil {
			inc.Playbook.Walk(fn)
		}
	}
}
