package playbook

import (
	"fmt"
	"io/fs"
	"math/big"
	"path"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/engine/funcs"
	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/modules"
)

// EmbeddedPrefix marks a source in the loader's embedded file system, e.g.
// `source = "wsu:join.hcl"`: how a site playbook includes a stock playbook
// without a copy of it.
const EmbeddedPrefix = "wsu:"

// Loader reads playbooks. It remembers every file it read so that a saved
// plan can notice when one changes.
type Loader struct {
	Registry *modules.Registry
	// Embedded holds the stock playbooks (EmbeddedPrefix sources).
	Embedded fs.FS
	// Confine, when set, are the only directories on disk the run may
	// read: the playbook and its includes on disk must be inside them
	// (stock playbooks are always allowed), and every playbook loaded gets
	// them as its Roots. The controller confines a site playbook from a
	// ConfigMap to the directory it wrote it to and the payload.
	Confine []string
	// Files reads playbooks on disk, each once per run (a playbook may be
	// a pipe, which the CLI has already looked into for a saved plan);
	// nil: from disk, bounded, on every read.
	Files   *limits.Files
	sources map[string][]byte
	// ahead holds the stock playbooks being parsed ahead of their include
	// (prefetch), by display name.
	ahead map[string]*parsing
}

// NewLoader returns a loader resolving modules in reg.
func NewLoader(reg *modules.Registry, embedded fs.FS) *Loader {
	return &Loader{Registry: reg, Embedded: embedded, sources: map[string][]byte{}}
}

// Sources returns the content of every file loaded so far, by display name.
func (l *Loader) Sources() map[string][]byte { return l.sources }

// location is where a file lives: on disk (fsys nil) or in the embedded FS.
type location struct {
	fsys fs.FS
	name string // OS path, or slash path inside fsys
}

func (loc location) display() string {
	if loc.fsys != nil {
		return EmbeddedPrefix + loc.name
	}
	return loc.name
}

func (loc location) dir() string {
	if loc.fsys != nil {
		return path.Dir(loc.name)
	}
	return filepath.Dir(loc.name)
}

// read is loc's content: a file on disk through l.Files (once per run,
// bounded, whatever the file is).
func (l *Loader) read(loc location) ([]byte, error) {
	if loc.fsys != nil {
		return fs.ReadFile(loc.fsys, loc.name)
	}
	return l.Files.Read(loc.name)
}

// resolve interprets an include source relative to the including file.
func (l *Loader) resolve(from location, src string) location {
	if rest, ok := strings.CutPrefix(src, EmbeddedPrefix); ok {
		return location{fsys: l.Embedded, name: path.Clean(rest)}
	}
	if from.fsys != nil {
		return location{fsys: from.fsys, name: path.Join(from.dir(), src)}
	}
	if filepath.IsAbs(src) {
		return location{name: filepath.Clean(src)}
	}
	return location{name: filepath.Join(from.dir(), src)}
}

// confined refuses a playbook on disk outside l.Confine.
func (l *Loader) confined(loc location, at *hcl.Range) *hcl.Diagnostic {
	if len(l.Confine) == 0 || loc.fsys != nil {
		return nil
	}
	name := loc.name
	if real, err := filepath.EvalSymlinks(name); err == nil {
		name = real
	}
	if _, _, ok := funcs.Inside(l.Confine, name); ok {
		return nil
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Playbook outside the directories this run may read",
		Detail:  fmt.Sprintf("%s is outside %s: a playbook from a ConfigMap includes only the files of its own ConfigMap, or stock playbooks (%sNAME.hcl).", loc.name, strings.Join(l.Confine, ", "), EmbeddedPrefix),
		Subject: at}
}

// Load reads a playbook file (or an EmbeddedPrefix name) and everything it
// includes, and checks it.
func (l *Loader) Load(name string) (*Playbook, hcl.Diagnostics) {
	loc := location{name: filepath.Clean(name)}
	if rest, ok := strings.CutPrefix(name, EmbeddedPrefix); ok {
		if l.Embedded == nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No embedded playbooks", Detail: "This build of wsu carries no stock playbooks."}}
		}
		loc = location{fsys: l.Embedded, name: path.Clean(rest)}
	}
	if len(l.Confine) > 0 && loc.fsys == nil {
		// Compared with the roots as it really is: a link leads nowhere else.
		if abs, err := filepath.Abs(loc.name); err == nil {
			loc.name = abs
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				loc.name = real
			}
		}
	}
	if d := l.confined(loc, nil); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	pb, diags := l.load(loc, nil, nil)
	if diags.HasErrors() {
		return pb, diags
	}
	diags = append(diags, check(pb, l.Registry)...)
	return pb, diags
}

// LoadSource parses a playbook held in memory (tests, fuzzing). Includes
// resolve relative to the directory of filename.
func (l *Loader) LoadSource(filename string, src []byte) (*Playbook, hcl.Diagnostics) {
	pb, diags := l.parse(location{name: filename}, src, nil)
	if diags.HasErrors() {
		return pb, diags
	}
	diags = append(diags, check(pb, l.Registry)...)
	return pb, diags
}

func (l *Loader) load(loc location, stack []string, at *hcl.Range) (*Playbook, hcl.Diagnostics) {
	if p, ok := l.ahead[loc.display()]; ok {
		delete(l.ahead, loc.display())
		<-p.done
		if p.err != nil {
			return nil, readError(loc, p.err, at)
		}
		return l.build(loc, p.src, p.file, p.diags, stack)
	}
	src, err := l.read(loc)
	if err != nil {
		return nil, readError(loc, err, at)
	}
	return l.parse(loc, src, stack)
}

func readError(loc location, err error, at *hcl.Range) hcl.Diagnostics {
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Cannot read playbook",
		Detail:   fmt.Sprintf("Reading %s: %s.", loc.display(), err),
		Subject:  at,
	}}
}

var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "play", LabelNames: []string{"name"}},
		{Type: "include", LabelNames: []string{"name"}},
		{Type: "output", LabelNames: []string{"name"}},
	},
}

func (l *Loader) parse(loc location, src []byte, stack []string) (*Playbook, hcl.Diagnostics) {
	file, diags := parseFile(loc, src)
	return l.build(loc, src, file, diags, stack)
}

// parseFile parses one playbook file. A file on disk is first held to the
// nesting and size limits (limits.CheckConfig), so that hostile input
// cannot exhaust the parser's stack; the stock playbooks are the binary's
// own and are held to them by a test instead (playbooks'
// TestStockPlaybooksWithinLimits): lexing a file twice was a third of a
// no-op re-run's load.
func parseFile(loc location, src []byte) (*hcl.File, hcl.Diagnostics) {
	display := loc.display()
	if loc.fsys == nil {
		if diags := limits.CheckConfig(src, display, hcl.InitialPos); diags.HasErrors() {
			return nil, diags
		}
	}
	return hclsyntax.ParseConfig(src, display, hcl.InitialPos)
}

// build turns a parsed file into its Playbook, loading its includes.
func (l *Loader) build(loc location, src []byte, file *hcl.File, diags hcl.Diagnostics, stack []string) (*Playbook, hcl.Diagnostics) {
	display := loc.display()
	l.sources[display] = src
	if diags.HasErrors() {
		return nil, diags
	}
	pb := &Playbook{
		Filename:  display,
		Dir:       loc.dir(),
		FS:        loc.fsys,
		Roots:     l.Confine,
		Variables: map[string]*Variable{},
		Locals:    map[string]*Local{},
		Outputs:   map[string]*Output{},
		Tasks:     map[string]*Task{},
		Includes:  map[string]*Include{},
	}
	content, moreDiags := file.Body.Content(fileSchema)
	diags = append(diags, moreDiags...)
	stack = append(stack, display)
	l.prefetch(content.Blocks, loc, stack)

	names := map[string]map[string]hcl.Range{}
	dup := func(kind, name string, r hcl.Range) bool {
		if names[kind] == nil {
			names[kind] = map[string]hcl.Range{}
		}
		if prev, ok := names[kind][name]; ok {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  fmt.Sprintf("Duplicate %s %q", kind, name),
				Detail:   fmt.Sprintf("A %s named %q was already declared at %s. Names must be unique within a file.", kind, name, prev),
				Subject:  r.Ptr(),
			})
			return true
		}
		names[kind][name] = r
		return false
	}

	taskIndex := 0
	for _, block := range content.Blocks {
		switch block.Type {
		case "variable":
			v, d := decodeVariable(block)
			diags = append(diags, d...)
			if v != nil && !dup("variable", v.Name, block.DefRange) {
				pb.Variables[v.Name] = v
				pb.VariableOrder = append(pb.VariableOrder, v.Name)
			}
		case "locals":
			attrs, d := block.Body.JustAttributes()
			diags = append(diags, d...)
			for _, a := range sortedAttrs(attrs) {
				if dup("local value", a.Name, a.NameRange) {
					continue
				}
				pb.Locals[a.Name] = &Local{Name: a.Name, Expr: a.Expr, DeclRange: a.Range}
				pb.LocalOrder = append(pb.LocalOrder, a.Name)
			}
		case "output":
			o, d := decodeOutput(block)
			diags = append(diags, d...)
			if o != nil && !dup("output", o.Name, block.DefRange) {
				pb.Outputs[o.Name] = o
				pb.OutputOrder = append(pb.OutputOrder, o.Name)
			}
		case "play":
			p, d := l.decodePlay(block, &taskIndex)
			diags = append(diags, d...)
			if p == nil {
				continue
			}
			for _, t := range p.Tasks {
				if !dup("task", t.Name, t.DeclRange) {
					pb.Tasks[t.Name] = t
				}
			}
			pb.Items = append(pb.Items, p)
		case "include":
			inc, d := l.decodeInclude(block, loc, stack)
			diags = append(diags, d...)
			if inc != nil && !dup("include", inc.Name, block.DefRange) {
				inc.Index = len(pb.Items)
				pb.Includes[inc.Name] = inc
				pb.Items = append(pb.Items, inc)
			}
		}
	}
	return pb, diags
}

func decodeVariable(block *hcl.Block) (*Variable, hcl.Diagnostics) {
	v := &Variable{Name: block.Labels[0], Type: cty.DynamicPseudoType, Default: cty.NilVal, Nullable: true, DeclRange: block.DefRange}
	diags := checkName("variable", v.Name, block.LabelRanges[0])
	content, d := block.Body.Content(&hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "type"}, {Name: "default"}, {Name: "description"}, {Name: "sensitive"}, {Name: "nullable"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "validation"}},
	})
	diags = append(diags, d...)
	if a, ok := content.Attributes["type"]; ok {
		ty, d := typeexpr.TypeConstraint(a.Expr)
		diags = append(diags, d...)
		if !d.HasErrors() {
			v.Type = ty
		}
	}
	if a, ok := content.Attributes["description"]; ok {
		diags = append(diags, decodeLiteral(a, cty.String, func(val cty.Value) { v.Description = val.AsString() })...)
	}
	if a, ok := content.Attributes["sensitive"]; ok {
		diags = append(diags, decodeLiteral(a, cty.Bool, func(val cty.Value) { v.Sensitive = val.True() })...)
	}
	if a, ok := content.Attributes["nullable"]; ok {
		diags = append(diags, decodeLiteral(a, cty.Bool, func(val cty.Value) { v.Nullable = val.True() })...)
	}
	if a, ok := content.Attributes["default"]; ok {
		val, d := a.Expr.Value(nil)
		if d.HasErrors() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Default must be a constant",
				Detail:   "A variable's default cannot refer to other values or call functions; use a local value for that.",
				Subject:  a.Expr.Range().Ptr(),
			})
		} else {
			conv, err := convert.Convert(val, v.Type)
			if err != nil {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid default value",
					Detail:   fmt.Sprintf("The default for variable %q does not match its type %s: %s.", v.Name, typeexpr.TypeString(v.Type), err),
					Subject:  a.Expr.Range().Ptr(),
				})
			} else {
				v.Default = conv
			}
		}
	}
	for _, vb := range content.Blocks {
		vc, d := vb.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
			{Name: "condition", Required: true}, {Name: "error_message", Required: true},
		}})
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		v.Validations = append(v.Validations, &Validation{
			Condition:    vc.Attributes["condition"].Expr,
			ErrorMessage: vc.Attributes["error_message"].Expr,
			DeclRange:    vb.DefRange,
		})
	}
	return v, diags
}

func decodeOutput(block *hcl.Block) (*Output, hcl.Diagnostics) {
	o := &Output{Name: block.Labels[0], DeclRange: block.DefRange}
	diags := checkName("output", o.Name, block.LabelRanges[0])
	content, d := block.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "value", Required: true}, {Name: "description"}, {Name: "sensitive"},
	}})
	diags = append(diags, d...)
	if a, ok := content.Attributes["value"]; ok {
		o.Value = a.Expr
	}
	if a, ok := content.Attributes["description"]; ok {
		diags = append(diags, decodeLiteral(a, cty.String, func(val cty.Value) { o.Description = val.AsString() })...)
	}
	if a, ok := content.Attributes["sensitive"]; ok {
		diags = append(diags, decodeLiteral(a, cty.Bool, func(val cty.Value) { o.Sensitive = val.True() })...)
	}
	return o, diags
}

var playSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "hosts", Required: true}, {Name: "serial"}, {Name: "max_fail_percentage"}, {Name: "vars"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "task", LabelNames: []string{"name"}},
		{Type: "handler", LabelNames: []string{"name"}},
	},
}

func (l *Loader) decodePlay(block *hcl.Block, taskIndex *int) (*Play, hcl.Diagnostics) {
	p := &Play{Name: block.Labels[0], Vars: map[string]hcl.Expression{}, DeclRange: block.DefRange}
	content, diags := block.Body.Content(playSchema)
	if a, ok := content.Attributes["hosts"]; ok {
		p.Hosts = a.Expr
	}
	if a, ok := content.Attributes["serial"]; ok {
		p.Serial = a.Expr
	}
	if a, ok := content.Attributes["max_fail_percentage"]; ok {
		p.MaxFailPercentage = a.Expr
	}
	if a, ok := content.Attributes["vars"]; ok {
		vars, d := objectItems(a.Expr, "vars")
		diags = append(diags, d...)
		for _, kv := range vars {
			p.Vars[kv.name] = kv.expr
			p.VarsOrder = append(p.VarsOrder, kv.name)
		}
	}
	handlerNames := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		t, d := l.decodeTask(b, b.Type == "handler")
		diags = append(diags, d...)
		if t == nil {
			continue
		}
		t.Play = p
		if t.Handler {
			if prev, ok := handlerNames[t.Name]; ok {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  fmt.Sprintf("Duplicate handler %q", t.Name),
					Detail:   fmt.Sprintf("A handler named %q was already declared in this play at %s.", t.Name, prev),
					Subject:  t.DeclRange.Ptr(),
				})
				continue
			}
			handlerNames[t.Name] = t.DeclRange
			t.Index = -1
			p.Handlers = append(p.Handlers, t)
			continue
		}
		t.Index = *taskIndex
		*taskIndex++
		p.Tasks = append(p.Tasks, t)
	}
	return p, diags
}

// taskControls are the task arguments that are not the module's.
var taskControls = []hcl.AttributeSchema{
	{Name: "when"}, {Name: "for_each"}, {Name: "notify"}, {Name: "retries"}, {Name: "delay"},
	{Name: "until"}, {Name: "ignore_errors"}, {Name: "tags"}, {Name: "parallelism"},
}

// MaxParallelism bounds a task's parallelism: more instances at once on one
// connection only queue behind each other in the transport.
const MaxParallelism = 16

func (l *Loader) decodeTask(block *hcl.Block, handler bool) (*Task, hcl.Diagnostics) {
	kind := "task"
	if handler {
		kind = "handler"
	}
	t := &Task{Name: block.Labels[0], Handler: handler, DeclRange: block.DefRange}
	body, ok := block.Body.(*hclsyntax.Body)
	if !ok {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unsupported syntax", Detail: "Playbooks must be written in HCL native syntax.", Subject: block.DefRange.Ptr()}}
	}
	var diags hcl.Diagnostics
	for name, attr := range body.Attributes {
		if !isControl(name) || (handler && name == "notify") {
			detail := fmt.Sprintf("A %s takes one module block and the arguments %s.", kind, controlList(handler))
			if s := modules.Nearest(name, controlNames(handler)); s != "" {
				detail = fmt.Sprintf("Did you mean %q?", s)
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unsupported argument",
				Detail:   fmt.Sprintf("An argument named %q is not expected in a %s. %s", name, kind, detail),
				Subject:  attr.NameRange.Ptr(),
			})
		}
	}
	a := body.Attributes
	setExpr := func(name string, dst *hcl.Expression) {
		if attr, ok := a[name]; ok {
			*dst = attr.Expr
		}
	}
	setExpr("when", &t.When)
	setExpr("for_each", &t.ForEach)
	setExpr("until", &t.Until)
	setExpr("retries", &t.Retries)
	setExpr("delay", &t.Delay)
	setExpr("ignore_errors", &t.IgnoreErrors)
	if attr, ok := a["notify"]; ok && !handler {
		names, d := stringList(attr.Expr, "notify")
		diags = append(diags, d...)
		t.Notify = names
		t.NotifyRange = attr.Expr.Range()
	}
	if attr, ok := a["tags"]; ok {
		tags, d := stringList(attr.Expr, "tags")
		diags = append(diags, d...)
		t.Tags = tags
	}
	if attr, ok := a["parallelism"]; ok {
		n, d := parallelism(attr.AsHCLAttribute(), t.ForEach != nil)
		diags = append(diags, d...)
		t.Parallelism = n
	}
	switch len(body.Blocks) {
	case 0:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing module block",
			Detail:   fmt.Sprintf("A %s needs exactly one module block, e.g. `file { path = \"...\" content = \"...\" }`. `wsu modules` lists them.", kind),
			Subject:  block.DefRange.Ptr(),
		})
		return nil, diags
	case 1:
	default:
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "More than one module block",
			Detail:   fmt.Sprintf("A %s calls exactly one module; split %q into one %s per module.", kind, t.Name, kind),
			Subject:  body.Blocks[1].DefRange().Ptr(),
		})
		return nil, diags
	}
	mb := body.Blocks[0]
	if len(mb.Labels) > 0 {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unexpected label on module block",
			Detail:   fmt.Sprintf("Module blocks take no labels; the %s's own label names it.", kind),
			Subject:  mb.LabelRanges[0].Ptr(),
		})
	}
	mod, ok := l.Registry.Lookup(mb.Type)
	if !ok {
		detail := "`wsu modules` lists the available modules."
		if s := l.Registry.Suggest(mb.Type); s != "" {
			detail = fmt.Sprintf("Did you mean %q? %s", s, detail)
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unknown module",
			Detail:   fmt.Sprintf("There is no module named %q. %s", mb.Type, detail),
			Subject:  mb.TypeRange.Ptr(),
		})
		return nil, diags
	}
	t.Module = mb.Type
	t.Schema = mod.Schema()
	t.Spec = Spec(t.Schema)
	t.Body = mb.Body
	t.BodyRange = mb.DefRange()
	diags = append(diags, checkModuleBody(t)...)
	return t, diags
}

// checkModuleBody reports unknown and missing arguments with suggestions;
// types are checked later, when expressions can be evaluated.
func checkModuleBody(t *Task) hcl.Diagnostics {
	var diags hcl.Diagnostics
	names := make([]string, 0, len(t.Schema.Attributes))
	for _, a := range t.Schema.Attributes {
		names = append(names, a.Name)
	}
	for _, b := range t.Body.Blocks {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unsupported block",
			Detail:   fmt.Sprintf("Module %q takes arguments only; write `%s = ...` instead of a block.", t.Module, b.Type),
			Subject:  b.TypeRange.Ptr(),
		})
	}
	for name, attr := range t.Body.Attributes {
		if t.Schema.Attribute(name) != nil {
			continue
		}
		detail := fmt.Sprintf("Module %q has no argument named %q.", t.Module, name)
		if s := modules.Nearest(name, names); s != "" {
			detail += fmt.Sprintf(" Did you mean %q?", s)
		} else {
			detail += fmt.Sprintf(" `wsu modules %s` lists its arguments.", t.Module)
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported argument", Detail: detail, Subject: attr.NameRange.Ptr()})
	}
	for _, a := range t.Schema.Attributes {
		if _, set := t.Body.Attributes[a.Name]; a.Required && !set {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Missing required argument",
				Detail:   fmt.Sprintf("Module %q requires the argument %q: %s", t.Module, a.Name, a.Description),
				Subject:  t.BodyRange.Ptr(),
			})
		}
	}
	return diags
}

func (l *Loader) decodeInclude(block *hcl.Block, from location, stack []string) (*Include, hcl.Diagnostics) {
	inc := &Include{Name: block.Labels[0], Vars: map[string]hcl.Expression{}, DeclRange: block.DefRange}
	diags := checkName("include", inc.Name, block.LabelRanges[0])
	content, d := block.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true}, {Name: "vars"}, {Name: "hosts"}, {Name: "serial"}, {Name: "max_fail_percentage"}, {Name: "when"},
	}})
	diags = append(diags, d...)
	if d.HasErrors() {
		return nil, diags
	}
	for name, dst := range map[string]*hcl.Expression{"hosts": &inc.Hosts, "serial": &inc.Serial, "max_fail_percentage": &inc.MaxFailPercentage, "when": &inc.When} {
		if a, ok := content.Attributes[name]; ok {
			*dst = a.Expr
		}
	}
	if (inc.Serial != nil || inc.MaxFailPercentage != nil) && inc.Hosts == nil {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing hosts for serial include",
			Detail:   "An include with serial or max_fail_percentage runs its playbook batch by batch; hosts says which hosts to batch, e.g. hosts = \"windows\".",
			Subject:  block.DefRange.Ptr(),
		})
	}
	srcAttr := content.Attributes["source"]
	ok := true
	diags = append(diags, decodeLiteral(srcAttr, cty.String, func(v cty.Value) { inc.Source = v.AsString() })...)
	if inc.Source == "" {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid include source", Detail: "The source must be a non-empty path to a playbook file.", Subject: srcAttr.Expr.Range().Ptr()})
		return nil, diags
	}
	if a, ok := content.Attributes["vars"]; ok {
		items, d := objectItems(a.Expr, "vars")
		diags = append(diags, d...)
		for _, kv := range items {
			inc.Vars[kv.name] = kv.expr
			inc.VarsOrder = append(inc.VarsOrder, kv.name)
		}
	}
	target := l.resolve(from, inc.Source)
	if d := l.confined(target, srcAttr.Expr.Range().Ptr()); d != nil {
		return nil, append(diags, d)
	}
	if strings.HasPrefix(inc.Source, EmbeddedPrefix) && l.Embedded == nil {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid include source", Detail: "This build of wsu carries no stock playbooks.", Subject: srcAttr.Expr.Range().Ptr()})
		return nil, diags
	}
	for _, s := range stack {
		if s == target.display() {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Include cycle",
				Detail:   fmt.Sprintf("%s includes itself through %s.", target.display(), strings.Join(append(stack, target.display()), " → ")),
				Subject:  srcAttr.Expr.Range().Ptr(),
			})
			ok = false
		}
	}
	if !ok {
		return nil, diags
	}
	child, d := l.load(target, stack, srcAttr.Expr.Range().Ptr())
	diags = append(diags, d...)
	if child == nil {
		return nil, diags
	}
	inc.Playbook = child
	return inc, diags
}

// --- small decoding helpers ---

func decodeLiteral(a *hcl.Attribute, ty cty.Type, set func(cty.Value)) hcl.Diagnostics {
	val, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Constant value required",
			Detail:   fmt.Sprintf("The argument %q must be a literal %s.", a.Name, ty.FriendlyName()),
			Subject:  a.Expr.Range().Ptr(),
		}}
	}
	conv, err := convert.Convert(val, ty)
	if err != nil || conv.IsNull() {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Incorrect value type",
			Detail:   fmt.Sprintf("The argument %q must be a %s.", a.Name, ty.FriendlyName()),
			Subject:  a.Expr.Range().Ptr(),
		}}
	}
	set(conv)
	return nil
}

type kvExpr struct {
	name string
	expr hcl.Expression
}

// objectItems splits an object constructor into its items without
// evaluating them, so each item can be evaluated in its own scope.
func objectItems(expr hcl.Expression, what string) ([]kvExpr, hcl.Diagnostics) {
	pairs, diags := hcl.ExprMap(expr)
	if diags.HasErrors() {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid " + what,
			Detail:   fmt.Sprintf("%q must be an object written out as { name = value, ... }.", what),
			Subject:  expr.Range().Ptr(),
		}}
	}
	var out []kvExpr
	seen := map[string]bool{}
	for _, p := range pairs {
		name := hcl.ExprAsKeyword(p.Key)
		if name == "" {
			v, d := p.Key.Value(nil)
			if d.HasErrors() || v.Type() != cty.String || v.IsNull() {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + what + " key", Detail: "Keys must be names or literal strings.", Subject: p.Key.Range().Ptr()})
				continue
			}
			name = v.AsString()
		}
		if seen[name] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate " + what + " key", Detail: fmt.Sprintf("%q is set twice.", name), Subject: p.Key.Range().Ptr()})
			continue
		}
		seen[name] = true
		out = append(out, kvExpr{name: name, expr: p.Value})
	}
	return out, diags
}

func stringList(expr hcl.Expression, what string) ([]string, hcl.Diagnostics) {
	val, diags := expr.Value(nil)
	bad := hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + what,
		Detail:   fmt.Sprintf("%q must be a literal list of strings, e.g. [\"a\", \"b\"].", what),
		Subject:  expr.Range().Ptr(),
	}}
	if diags.HasErrors() || val.IsNull() || !(val.Type().IsTupleType() || val.Type().IsListType()) {
		return nil, bad
	}
	var out []string
	for it := val.ElementIterator(); it.Next(); {
		_, ev := it.Element()
		s, err := convert.Convert(ev, cty.String)
		if err != nil || s.IsNull() {
			return nil, bad
		}
		out = append(out, s.AsString())
	}
	return out, nil
}

func checkName(kind, name string, r hcl.Range) hcl.Diagnostics {
	if hclsyntax.ValidIdentifier(name) {
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid " + kind + " name",
		Detail:   fmt.Sprintf("%q is not a valid name: use letters, digits, underscores and dashes, starting with a letter.", name),
		Subject:  r.Ptr(),
	}}
}

func isControl(name string) bool {
	for _, c := range taskControls {
		if c.Name == name {
			return true
		}
	}
	return false
}

func controlNames(handler bool) []string {
	var out []string
	for _, c := range taskControls {
		if handler && c.Name == "notify" {
			continue
		}
		out = append(out, c.Name)
	}
	return out
}

func controlList(handler bool) string { return strings.Join(controlNames(handler), ", ") }

func sortedAttrs(attrs hcl.Attributes) []*hcl.Attribute {
	out := make([]*hcl.Attribute, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, a)
	}
	// Source order, so diagnostics and evaluation follow the file.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Range.Start.Byte < out[j-1].Range.Start.Byte; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// parallelism decodes a task's parallelism: a whole number from 1 to
// MaxParallelism, written as a constant (it shapes the run, so it is known
// before any host is touched), on a task with for_each.
func parallelism(attr *hcl.Attribute, forEach bool) (int, hcl.Diagnostics) {
	bad := func(detail string) (int, hcl.Diagnostics) {
		return 1, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid parallelism", Detail: detail, Subject: attr.Expr.Range().Ptr()}}
	}
	if !forEach {
		return bad("parallelism sets how many for_each instances of the task run at once on each host; this task has no for_each.")
	}
	v, d := attr.Expr.Value(nil)
	if d.HasErrors() {
		return bad(fmt.Sprintf("parallelism must be a constant whole number from 1 to %d, not an expression.", MaxParallelism))
	}
	n, err := convert.Convert(v, cty.Number)
	if err != nil || n.IsNull() || !n.IsKnown() {
		return bad(fmt.Sprintf("parallelism must be a whole number from 1 to %d.", MaxParallelism))
	}
	bf := n.AsBigFloat()
	i, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact || i < 1 || i > MaxParallelism {
		return bad(fmt.Sprintf("parallelism must be a whole number from 1 to %d, not %s.", MaxParallelism, bf.Text('g', -1)))
	}
	return int(i), nil
}
