// Package doc documents the stock playbooks from the playbooks themselves:
// header comments, variables, includes, plays, tasks, handlers and outputs,
// as text (`wsu playbooks doc NAME`) and as Markdown (docs/playbooks.md), so
// the reference cannot drift from what wsu runs.
//
// The loader keeps the structure; comments are not part of it, so they are
// read from the HCL token stream of each file.
package doc

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules"
)

// Playbook is what the reference shows of one stock playbook.
type Playbook struct {
	Name string // "join"
	// Header is the file's leading comment block, "# " removed, lines kept.
	Header     string
	Variables  []Variable
	Items      []Item // plays and includes, in the order they run
	Outputs    []Output
	IncludedBy []IncludedBy
}

// Summary is the header's first sentence, without the "NAME: " lead-in.
func (p *Playbook) Summary() string {
	first, _, _ := strings.Cut(p.Header, "\n\n")
	first = strings.Join(strings.Fields(strings.TrimPrefix(first, p.Name+":")), " ")
	if i := strings.Index(first, ". "); i >= 0 {
		first = first[:i+1]
	}
	return capitalise(first)
}

// body is the header without the "NAME: " lead-in, capitalised.
func (p *Playbook) body() string {
	return capitalise(strings.TrimSpace(strings.TrimPrefix(p.Header, p.Name+":")))
}

// Variable is a `variable` block.
type Variable struct {
	Name        string
	Type        string
	Default     string // HCL text; "" when required
	Required    bool
	Sensitive   bool
	NotNullable bool
	Description string
	// Checks are the validation blocks' error messages (when literal).
	Checks []string
}

// Item is a play or an include.
type Item struct {
	Include bool
	Name    string
	Comment string // the comment written just above the block
	// Placement: hosts, serial, max_fail_percentage as written, and an
	// include's when.
	Hosts, Serial, MaxFail, When string
	// Play only.
	Vars     []Pair
	Tasks    []Task
	Handlers []Task
	// Include only: the source as written, the stock playbook it names
	// ("" when it is not one) and the variables it passes.
	Source string
	Target string
	Passes []Pair
	// Unpassed are the included playbook's variables the include does not
	// pass: they take outside values by name, else their defaults.
	Unpassed []string
}

// Pair is NAME = EXPRESSION, the expression as written.
type Pair struct{ Name, Expr string }

// Task is a task or handler.
type Task struct {
	Name   string
	Module string
	Target string // what it acts on: its path, name, key... argument
	// Effect is the state asked for when the task sets one ("absent",
	// "restarted", "cordoned = false").
	Effect  string
	Comment string
	// Controls are when, for_each, notify... as written.
	Controls []Pair
}

// Output is an `output` block.
type Output struct {
	Name, Description, Value string
	Sensitive                bool
}

// IncludedBy names a stock playbook that includes this one.
type IncludedBy struct{ Playbook, Include string }

// Load documents every *.hcl file at the top of fsys, sorted by name. Each
// is loaded and checked as `wsu validate wsu:NAME.hcl` would; an invalid
// playbook is an error.
func Load(fsys fs.FS, reg *modules.Registry) ([]*Playbook, error) {
	names, err := fs.Glob(fsys, "*.hcl")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*Playbook
	for _, file := range names {
		loader := playbook.NewLoader(reg, fsys)
		pb, diags := loader.Load(playbook.EmbeddedPrefix + file)
		if diags.HasErrors() {
			return nil, fmt.Errorf("%s: %s", file, diags.Error())
		}
		src := loader.Sources()[pb.Filename]
		d, err := build(pb, src)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	byName := map[string]*Playbook{}
	for _, d := range out {
		byName[d.Name] = d
	}
	for _, d := range out {
		for _, it := range d.Items {
			if t := byName[it.Target]; it.Include && t != nil {
				t.IncludedBy = append(t.IncludedBy, IncludedBy{Playbook: d.Name, Include: it.Name})
			}
		}
	}
	return out, nil
}

// stockName is the stock playbook a loaded file is, or "".
func stockName(filename string) string {
	rest, ok := strings.CutPrefix(filename, playbook.EmbeddedPrefix)
	if !ok || strings.Contains(rest, "/") {
		return ""
	}
	return strings.TrimSuffix(rest, ".hcl")
}

func build(pb *playbook.Playbook, src []byte) (*Playbook, error) {
	c, err := readComments(src, pb.Filename)
	if err != nil {
		return nil, err
	}
	x := exprText{src: src}
	d := &Playbook{Name: strings.TrimSuffix(path.Base(strings.TrimPrefix(pb.Filename, playbook.EmbeddedPrefix)), ".hcl"), Header: c.header}

	for _, name := range pb.VariableOrder {
		v := pb.Variables[name]
		dv := Variable{
			Name:        v.Name,
			Type:        typeexpr.TypeString(v.Type),
			Required:    v.Required(),
			Sensitive:   v.Sensitive,
			NotNullable: !v.Nullable,
			Description: v.Description,
		}
		if !dv.Required {
			dv.Default = valueText(v.Default)
		}
		for _, val := range v.Validations {
			if msg, ok := literalString(val.ErrorMessage); ok {
				dv.Checks = append(dv.Checks, msg)
			}
		}
		d.Variables = append(d.Variables, dv)
	}

	for _, it := range pb.Items {
		switch it := it.(type) {
		case *playbook.Play:
			item := Item{
				Name:    it.Name,
				Comment: c.above(it.DeclRange),
				Hosts:   x.of(it.Hosts),
				Serial:  x.of(it.Serial),
				MaxFail: x.of(it.MaxFailPercentage),
			}
			for _, name := range it.VarsOrder {
				item.Vars = append(item.Vars, Pair{name, x.of(it.Vars[name])})
			}
			for _, t := range it.Tasks {
				item.Tasks = append(item.Tasks, task(t, c, x))
			}
			for _, t := range it.Handlers {
				item.Handlers = append(item.Handlers, task(t, c, x))
			}
			d.Items = append(d.Items, item)
		case *playbook.Include:
			item := Item{
				Include: true,
				Name:    it.Name,
				Comment: c.above(it.DeclRange),
				Hosts:   x.of(it.Hosts),
				Serial:  x.of(it.Serial),
				MaxFail: x.of(it.MaxFailPercentage),
				When:    x.of(it.When),
				Source:  it.Source,
			}
			for _, name := range it.VarsOrder {
				item.Passes = append(item.Passes, Pair{name, x.of(it.Vars[name])})
			}
			if it.Playbook != nil {
				item.Target = stockName(it.Playbook.Filename)
				for _, name := range it.Playbook.VariableOrder {
					if _, passed := it.Vars[name]; !passed {
						item.Unpassed = append(item.Unpassed, name)
					}
				}
			}
			d.Items = append(d.Items, item)
		}
	}

	for _, name := range pb.OutputOrder {
		o := pb.Outputs[name]
		d.Outputs = append(d.Outputs, Output{Name: o.Name, Description: o.Description, Value: x.of(o.Value), Sensitive: o.Sensitive})
	}
	return d, nil
}

// targetArgs are the module arguments that say what a task acts on, most
// telling first.
var targetArgs = []string{"key", "name", "path", "dest", "entry", "image", "annotation", "hns_network", "service", "argv"}

func task(t *playbook.Task, c *comments, x exprText) Task {
	out := Task{Name: t.Name, Module: t.Module, Comment: c.above(t.DeclRange)}
	for _, a := range targetArgs {
		if attr, ok := t.Body.Attributes[a]; ok {
			out.Target = x.value(attr.Expr)
			if a == "key" {
				if n, ok := t.Body.Attributes["name"]; ok {
					out.Target += `\` + x.value(n.Expr)
				}
			}
			break
		}
	}
	if attr, ok := t.Body.Attributes["state"]; ok {
		out.Effect = x.value(attr.Expr)
	} else if attr, ok := t.Body.Attributes["cordoned"]; ok {
		out.Effect = "cordoned = " + x.of(attr.Expr)
	}
	add := func(name string, e hcl.Expression) {
		if e != nil {
			out.Controls = append(out.Controls, Pair{name, x.of(e)})
		}
	}
	add("when", t.When)
	add("for_each", t.ForEach)
	add("until", t.Until)
	add("retries", t.Retries)
	add("delay", t.Delay)
	add("ignore_errors", t.IgnoreErrors)
	if len(t.Notify) > 0 {
		out.Controls = append(out.Controls, Pair{"notify", strings.Join(t.Notify, ", ")})
	}
	if len(t.Tags) > 0 {
		out.Controls = append(out.Controls, Pair{"tags", strings.Join(t.Tags, ", ")})
	}
	if t.Parallelism > 1 {
		out.Controls = append(out.Controls, Pair{"parallelism", strconv.Itoa(t.Parallelism)})
	}
	return out
}

// maxExpr bounds an expression shown in the reference: the reader gets the
// gist; `wsu playbooks export` has the whole text.
const maxExpr = 72

// exprText renders expressions of one file as written.
type exprText struct{ src []byte }

// of is the expression's source, on one line and shortened; "" for nil.
func (x exprText) of(e hcl.Expression) string {
	if e == nil {
		return ""
	}
	r := e.Range()
	if r.End.Byte > len(x.src) || r.Start.Byte > r.End.Byte {
		return ""
	}
	return shorten(strings.Join(strings.Fields(string(x.src[r.Start.Byte:r.End.Byte])), " "))
}

// value is a constant string's value (C:\k rather than "C:\\k"), or the
// expression as written.
func (x exprText) value(e hcl.Expression) string {
	if s, ok := literalString(e); ok {
		return shorten(s)
	}
	return x.of(e)
}

func shorten(s string) string {
	if r := []rune(s); len(r) > maxExpr {
		return string(r[:maxExpr-1]) + "…"
	}
	return s
}

func literalString(e hcl.Expression) (string, bool) {
	v, diags := e.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

func valueText(v cty.Value) string {
	if v.IsNull() {
		return "null"
	}
	// hclwrite spreads collections over lines; string values never hold a
	// raw newline, so joining the lines changes nothing else.
	return shorten(multiline.ReplaceAllString(strings.TrimSpace(string(hclwrite.TokensForValue(v).Bytes())), " "))
}

var multiline = regexp.MustCompile(`\n\s*`)

// comments are a file's comments: the leading block, and each run of
// whole-line comments by the line it ends on.
type comments struct {
	header string
	// byLine maps a line to the text of the whole-line comment on it.
	byLine map[int]string
}

func readComments(src []byte, filename string) (*comments, error) {
	toks, diags := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: %s", filename, diags.Error())
	}
	c := &comments{byLine: map[int]string{}}
	lineStart := true
	var header []string
	inHeader := true
	for _, t := range toks {
		switch t.Type {
		case hclsyntax.TokenComment:
			text, ok := commentText(t.Bytes)
			if lineStart && ok {
				c.byLine[t.Range.Start.Line] = text
				if inHeader {
					header = append(header, text)
				}
			} else {
				inHeader = false
			}
			// A line comment ends with its newline.
			lineStart = strings.HasSuffix(string(t.Bytes), "\n")
		case hclsyntax.TokenNewline:
			inHeader = inHeader && !lineStart // a blank line ends the header
			lineStart = true
		default:
			inHeader = false
			lineStart = false
		}
	}
	c.header = paragraphs(header)
	return c, nil
}

// commentText strips the marker of a # or // line comment.
func commentText(b []byte) (string, bool) {
	s := strings.TrimRight(string(b), "\r\n")
	for _, p := range []string{"#", "//"} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return strings.TrimPrefix(rest, " "), true
		}
	}
	return "", false
}

// above is the comment written on the lines just above a block.
func (c *comments) above(r hcl.Range) string {
	var lines []string
	for l := r.Start.Line - 1; l > 0; l-- {
		text, ok := c.byLine[l]
		if !ok {
			break
		}
		lines = append([]string{text}, lines...)
	}
	return paragraphs(lines)
}

// paragraphs joins comment lines, trimming empty lines at either end.
func paragraphs(lines []string) string {
	return strings.Trim(strings.Join(lines, "\n"), "\n")
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
