package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules/all"
)

// inputsRun is one engine run of a one-task playbook that prints msg.
type inputsRun struct {
	decls string   // variable blocks, at the top of main.hcl
	msg   string   // the print task's msg expression; "var.x" if empty
	ini   string   // inventory; "h1\n" if empty
	files []string // -var-file contents, written as vars1.hcl, vars2.hcl...
	vars  []string // -var options
	env   []string // environment
	// values are value files (Inputs.ValueFiles): each a map of x's
	// values, named values1.yaml, values2.yaml...
	values []map[string]string
}

// inputsOutcome is what a run printed and every diagnostic it reported.
type inputsOutcome struct {
	messages []string
	diags    []DiagnosticView
}

// run executes r in a temporary directory (var files are named relative to
// it, so diagnostics name them as given).
func (r inputsRun) run(t *testing.T) inputsOutcome {
	t.Helper()
	t.Chdir(t.TempDir())
	var varFiles []string
	for i, src := range r.files {
		name := fmt.Sprintf("vars%d.hcl", i+1)
		if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		varFiles = append(varFiles, name)
	}
	msg := r.msg
	if msg == "" {
		msg = "var.x"
	}
	src := r.decls + `
play "p" {
  hosts = "all"
  task "show" {
    print {
      msg = ` + msg + `
    }
  }
}
`
	reg := all.Schemas()
	pb, diags := playbook.NewLoader(reg, nil).LoadSource("main.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatalf("playbook: %s", diags.Error())
	}
	ini := r.ini
	if ini == "" {
		ini = "h1\n"
	}
	inv, diags := inventory.ParseINI("hosts.ini", []byte(ini))
	if diags.HasErrors() {
		t.Fatalf("inventory: %s", diags.Error())
	}
	var (
		mu  sync.Mutex
		out inputsOutcome
	)
	hooks := HooksFunc(func(e Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Type == EventTaskResult && e.Status != StatusFailed {
			out.messages = append(out.messages, e.Message)
		}
		out.diags = append(out.diags, e.Diagnostics...)
	})
	res := Run(context.Background(), Request{
		Playbook:  pb,
		Inventory: inv,
		Inputs:    Inputs{VarFiles: varFiles, Vars: r.vars, Environ: r.env, ValueFiles: valueFiles(r.values)},
		Mode:      ModeApply,
		Registry:  reg,
		Hooks:     hooks,
	})
	out.diags = append(DiagViews(res.Diagnostics), out.diags...)
	return out
}

// valueFiles are Inputs.ValueFiles holding each map's string values.
func valueFiles(maps []map[string]string) []ValueFile {
	var out []ValueFile
	for i, m := range maps {
		vf := ValueFile{Path: fmt.Sprintf("values%d.yaml", i+1), Flag: "--values", Src: []byte(fmt.Sprint(m))}
		for name, v := range m {
			vf.Values = append(vf.Values, FileValue{Name: name, Value: cty.StringVal(v), Range: hcl.Range{Filename: vf.Path, Start: hcl.InitialPos, End: hcl.InitialPos}})
		}
		out = append(out, vf)
	}
	return out
}

func (o inputsOutcome) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "messages %q\n", o.messages)
	for _, d := range o.diags {
		fmt.Fprintf(&b, "  %s %q %q", d.Severity, d.Summary, d.Detail)
		if d.Range != nil {
			fmt.Fprintf(&b, " at %s:%d,%d", d.Range.Filename, d.Range.Line, d.Range.Column)
		}
		b.WriteString("\n")
	}
	return b.String()
}

const (
	declX      = "variable \"x\" {\n  type    = string\n  default = \"default\"\n}\n"
	declNames  = "variable \"names\" {\n  type = list(string)\n}\n"
	declN      = "variable \"n\" {\n  type = number\n}\n"
	declRoot   = "variable \"root\" {\n  type = string\n  validation {\n    condition     = startswith(var.root, \"/\")\n    error_message = \"The root must be an absolute path.\"\n  }\n}\n"
	declStrict = "variable \"x\" {\n  type     = string\n  nullable = false\n}\n"
)

func TestInputDiagnostics(t *testing.T) {
	cases := []struct {
		name string
		run  inputsRun

		severity  string // "error" unless set
		summary   string
		detail    string // substring of the detail, optional
		file      string // "" means no subject
		line, col int
	}{
		{
			name:    "-var without =",
			run:     inputsRun{decls: declX, vars: []string{"x"}},
			summary: "Invalid -var option", detail: `The option has no '='; write -var NAME=VALUE`,
			file: "", // a command-line option has no location
		},
		{
			name:    "second -var without =",
			run:     inputsRun{decls: declX, vars: []string{"x=a", " =b"}},
			summary: "Invalid -var option", detail: `The option's name "" is not a valid variable name`,
			file: "",
		},
		{
			name:    "-var for an undeclared variable",
			run:     inputsRun{decls: declRoot, msg: "var.root", vars: []string{"rot=/srv"}},
			summary: "Value for undeclared variable", detail: `Did you mean "root"?`,
			file: "",
		},
		{
			name:    "-var list that does not parse",
			run:     inputsRun{decls: declNames, msg: `join(",", var.names)`, vars: []string{`names=["a", "b"`}},
			summary: "Invalid value for variable", detail: `-var names=["a", "b": variable "names" is a list(string), and "[\"a\", \"b\"" is not a valid list(string) literal (Unterminated tuple constructor expression)`,
			file: "main.hcl", line: 1, col: 1, // the declaration, which has the type
		},
		{
			name:    "-var list of the wrong shape",
			run:     inputsRun{decls: declNames, msg: `join(",", var.names)`, vars: []string{`names={a = 1}`}},
			summary: "Invalid value for variable", detail: `-var names={a = 1}: variable "names" is a list(string)`,
			file: "main.hcl", line: 1, col: 1,
		},
		{
			name:    "-var bool for a number",
			run:     inputsRun{decls: declN, msg: "tostring(var.n)", vars: []string{"n=true"}},
			summary: "Invalid value for variable", detail: `-var n=true: variable "n" is a number`,
			file: "main.hcl", line: 1, col: 1,
		},
		{
			name:    "env string for a number",
			run:     inputsRun{decls: declN, msg: "tostring(var.n)", env: []string{`WSU_VAR_n="ten"`}},
			summary: "Invalid value for variable", detail: `environment variable WSU_VAR_n="ten": variable "n" is a number`,
			file: "main.hcl", line: 1, col: 1,
		},
		{
			name:    "inventory string for a number",
			run:     inputsRun{decls: declN, msg: "tostring(var.n)", ini: "[web]\nh1 n=ten\n"},
			summary: "Invalid value for variable", detail: "from inventory hosts.ini is not a number",
			file: "hosts.ini", line: 2, col: 6,
		},
		{
			name:    "var file syntax error",
			run:     inputsRun{decls: declX, files: []string{"x = \"a\"\ny = = 1\n"}},
			summary: "Invalid expression",
			file:    "vars1.hcl", line: 2, col: 5,
		},
		{
			name:    "var file with a block",
			run:     inputsRun{decls: declX, files: []string{"x = \"a\"\n\nvariable \"y\" {}\n"}},
			summary: "Unexpected \"variable\" block",
			file:    "vars1.hcl", line: 3, col: 1,
		},
		{
			name:    "var file reference",
			run:     inputsRun{decls: declX, files: []string{"x = \"a\"\n", "# second\nx = var.other\n"}},
			summary: "Variables not allowed",
			file:    "vars2.hcl", line: 2, col: 5,
		},
		{
			name:    "var file wrong type",
			run:     inputsRun{decls: declN, msg: "tostring(var.n)", files: []string{"# ports\nn   = \"ten\"\n"}},
			summary: "Invalid value for variable", detail: "from vars1.hcl is not a number",
			file: "vars1.hcl", line: 2, col: 7,
		},
		{
			name:    "validation from a var file",
			run:     inputsRun{decls: declRoot, msg: "var.root", files: []string{"\nroot = \"srv\"\n"}},
			summary: "Invalid value for variable", detail: "The root must be an absolute path.",
			file: "vars1.hcl", line: 2, col: 8,
		},
		{
			name:    "validation from the inventory",
			run:     inputsRun{decls: declRoot, msg: "var.root", ini: "[all:vars]\nroot=srv\n\n[web]\nh1\n"},
			summary: "Invalid value for variable", detail: "The root must be an absolute path.",
			file: "hosts.ini", line: 2, col: 6,
		},
		{
			// A -var has no source to point at: the declaration it is.
			name:    "validation from -var",
			run:     inputsRun{decls: declRoot, msg: "var.root", vars: []string{"root=srv"}},
			summary: "Invalid value for variable", detail: "The root must be an absolute path.",
			file: "main.hcl", line: 1, col: 1,
		},
		{
			name:    "required variable missing",
			run:     inputsRun{decls: "\n" + declRoot, msg: "var.root"},
			summary: "No value for required variable", detail: "WSU_VAR_root",
			file: "main.hcl", line: 2, col: 1,
		},
		{
			name:    "non-nullable variable given null",
			run:     inputsRun{decls: declStrict, files: []string{"x = null\n"}},
			summary: "Null value for non-nullable variable",
			file:    "vars1.hcl", line: 1, col: 5,
		},
		{
			name:    "non-nullable variable defaulting to null",
			run:     inputsRun{decls: "variable \"x\" {\n  default  = null\n  nullable = false\n}\n"},
			summary: "Null value for non-nullable variable",
			file:    "main.hcl", line: 1, col: 1,
		},
		{
			name:     "var file sets an undeclared variable",
			run:      inputsRun{decls: declX, files: []string{"x = \"a\"\nxx = \"b\"\n"}},
			severity: "warning", summary: "Value for undeclared variable",
			file: "vars1.hcl", line: 2, col: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.run.run(t)
			sev := tc.severity
			if sev == "" {
				sev = "error"
			}
			var found *DiagnosticView
			for i, d := range out.diags {
				if d.Severity == sev && strings.Contains(d.Summary, tc.summary) {
					found = &out.diags[i]
					break
				}
			}
			if found == nil {
				t.Fatalf("no %s %q in:\n%s", sev, tc.summary, out)
			}
			if !strings.Contains(found.Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", found.Detail, tc.detail)
			}
			r := found.Range
			switch {
			case tc.file == "":
				if r != nil {
					t.Errorf("%q at %s:%d,%d, want no location", found.Summary, r.Filename, r.Line, r.Column)
				}
			case r == nil:
				t.Errorf("%q has no range, want %s:%d,%d", found.Summary, tc.file, tc.line, tc.col)
			case r.Filename != tc.file || r.Line != tc.line || r.Column != tc.col:
				t.Errorf("%q at %s:%d,%d, want %s:%d,%d", found.Summary, r.Filename, r.Line, r.Column, tc.file, tc.line, tc.col)
			}
			if sev == "error" && len(out.messages) > 0 {
				t.Errorf("the task ran despite the error: %q", out.messages)
			}
		})
	}
}

func TestMissingVarFile(t *testing.T) {
	pb, diags := playbook.NewLoader(all.Schemas(), nil).LoadSource("main.hcl", []byte(declX))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	res := Run(context.Background(), Request{
		Playbook: pb,
		Inputs:   Inputs{VarFiles: []string{"testdata/no-such-vars.hcl"}},
		Registry: all.Schemas(),
	})
	if len(res.Diagnostics) != 1 || res.Diagnostics[0].Summary != "Cannot read variables file" ||
		!strings.Contains(res.Diagnostics[0].Detail, "no-such-vars.hcl") {
		t.Fatalf("got %v", res.Diagnostics)
	}
}

// TestInputPrecedence checks, lowest first: default < var files (later win)
// < value files (later win) < group vars (parents before children) < host vars < WSU_VAR_ < -var
// (later win).
func TestInputPrecedence(t *testing.T) {
	const (
		allVars = "[all:vars]\nx=group-all\n"
		webVars = "[web:vars]\nx=group-web\n"
	)
	cases := []struct {
		name string
		run  inputsRun
		want string
	}{
		{"default", inputsRun{}, "default"},
		{"var file", inputsRun{files: []string{`x = "file1"`}}, "file1"},
		{"later var file wins", inputsRun{files: []string{`x = "file1"`, `x = "file2"`}}, "file2"},
		{"later var file without it", inputsRun{files: []string{`x = "file1"`, `y = "other"`}}, "file1"},
		{"all group beats var file", inputsRun{files: []string{`x = "file1"`}, ini: allVars + "[web]\nh1\n"}, "group-all"},
		{"child group beats all", inputsRun{files: []string{`x = "file1"`}, ini: allVars + webVars + "[web]\nh1\n"}, "group-web"},
		{"host beats groups", inputsRun{files: []string{`x = "file1"`}, ini: allVars + webVars + "[web]\nh1 x=host\n"}, "host"},
		{"env beats host", inputsRun{files: []string{`x = "file1"`}, ini: allVars + "[web]\nh1 x=host\n", env: []string{"WSU_VAR_x=env"}}, "env"},
		{"env beats var file", inputsRun{files: []string{`x = "file1"`}, env: []string{"WSU_VAR_x=env"}}, "env"},
		{"other env ignored", inputsRun{env: []string{"WSU_VAR_y=env", "X=env", "WSU_VARx=env"}}, "default"},
		{"-var beats env", inputsRun{ini: "h1 x=host\n", env: []string{"WSU_VAR_x=env"}, vars: []string{"x=cli"}}, "cli"},
		{"-var beats all", inputsRun{files: []string{`x = "file1"`}, ini: allVars + webVars + "[web]\nh1 x=host\n", env: []string{"WSU_VAR_x=env"}, vars: []string{"x=cli"}}, "cli"},
		{"later -var wins", inputsRun{vars: []string{"x=cli1", "x=cli2"}}, "cli2"},
		{"-var value keeps =", inputsRun{vars: []string{"x=a=b"}}, "a=b"},
		{"-var empty", inputsRun{vars: []string{"x="}}, ""},
		{"value file beats var file", inputsRun{files: []string{`x = "file1"`}, values: []map[string]string{{"x": "values1"}}}, "values1"},
		{"later value file wins", inputsRun{values: []map[string]string{{"x": "values1"}, {"x": "values2"}}}, "values2"},
		{"all group beats value file", inputsRun{values: []map[string]string{{"x": "values1"}}, ini: allVars + "[web]\nh1\n"}, "group-all"},
		{"env beats value file", inputsRun{values: []map[string]string{{"x": "values1"}}, env: []string{"WSU_VAR_x=env"}}, "env"},
		{"-var beats value file", inputsRun{values: []map[string]string{{"x": "values1"}}, vars: []string{"x=cli"}}, "cli"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run.decls = declX
			out := tc.run.run(t)
			if len(out.messages) != 1 || out.messages[0] != tc.want {
				t.Fatalf("want %q, got %s", tc.want, out)
			}
		})
	}
}

// TestTypedInputs checks that text values are parsed by the variable's type.
func TestTypedInputs(t *testing.T) {
	cases := []struct {
		name string
		run  inputsRun
		want string
	}{
		{"-var list", inputsRun{decls: declNames, msg: `join(",", var.names)`, vars: []string{`names=["a", "b"]`}}, "a,b"},
		{"env number", inputsRun{decls: declN, msg: "tostring(var.n + 1)", env: []string{"WSU_VAR_n=41"}}, "42"},
		{"inventory number", inputsRun{decls: declN, msg: "tostring(var.n * 2)", ini: "h1 n=21\n"}, "42"},
		{"var file list", inputsRun{decls: declNames, msg: `join(",", var.names)`, files: []string{`names = ["x", "y"]`}}, "x,y"},
		{"var file number as string", inputsRun{decls: declN, msg: "tostring(var.n)", files: []string{`n = "7"`}}, "7"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.run.run(t)
			if len(out.messages) != 1 || out.messages[0] != tc.want {
				t.Fatalf("want %q, got %s", tc.want, out)
			}
		})
	}
}

// TestValueFiles: a value file's secret is sensitive whatever its variable
// declares, and a value for an undeclared variable is an error naming it
// at the file.
func TestValueFiles(t *testing.T) {
	const secret = "q8w2e7r4t1y9u3i6"
	vf := ValueFile{Path: "join.yaml", Flag: "--join-config", Src: []byte("token: " + secret), Values: []FileValue{
		{Name: "x", Value: cty.StringVal(secret), Range: hcl.Range{Filename: "join.yaml", Start: hcl.Pos{Line: 1, Column: 8, Byte: 7}}, Secret: true},
	}}
	p, diags := parseInputs(Inputs{ValueFiles: []ValueFile{vf}}, map[string]bool{"x": true})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	v, diags := p.resolve(&playbook.Variable{Name: "x", Type: cty.String, Nullable: true}, nil, nil)
	if diags.HasErrors() || !v.HasMark(Sensitive) {
		t.Fatalf("want a sensitive value, got %#v %v", v, diags)
	}
	if string(p.Sources["join.yaml"]) != "token: "+secret {
		t.Fatalf("the file's content is a source for fingerprints: %q", p.Sources)
	}
	s := NewScrubber()
	collectSecrets(s, nil, nil, p)
	if got := s.Scrub("say " + secret); strings.Contains(got, secret) {
		t.Fatalf("the scrubber does not know the secret: %q", got)
	}

	vf.Values = append(vf.Values, FileValue{Name: "node_name", Value: cty.StringVal("n1"), Range: hcl.Range{Filename: "join.yaml", Start: hcl.Pos{Line: 3, Column: 9}}})
	_, diags = parseInputs(Inputs{ValueFiles: []ValueFile{vf}}, map[string]bool{})
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, "--join-config join.yaml sets x, node_name, which no playbook in this run declares") ||
		diags[0].Subject == nil || diags[0].Subject.Start.Line != 1 {
		t.Fatalf("want one located error naming x and node_name, got %v", diags)
	}
	if strings.Contains(diags[0].Detail, secret) {
		t.Fatal("the error quotes the secret")
	}
}
