// Package moduletest holds the test helpers the module packages share:
// building a Config as the engine decodes one, and calling a module's Plan
// and Apply as the engine does (after modules.Validate, with a host for a
// host module), so tests see what a playbook would.
package moduletest

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// BlockRange is where test configs pretend their module block is.
var BlockRange = hcl.Range{Filename: "test.hcl", Start: hcl.Pos{Line: 1, Column: 1}, End: hcl.Pos{Line: 20, Column: 2}}

// Config builds a Config as the engine does: every schema attribute present,
// defaults applied, explicitly set ones with their own range.
func Config(t *testing.T, m modules.Module, attrs map[string]cty.Value) modules.Config {
	t.Helper()
	s := m.Schema()
	for name := range attrs {
		require.NotNil(t, s.Attribute(name), "unknown attribute %s", name)
	}
	vals := map[string]cty.Value{}
	ranges := map[string]hcl.Range{}
	for i, a := range s.Attributes {
		v, set := attrs[a.Name]
		switch {
		case !set && a.Default != cty.NilVal:
			v = a.Default
		case !set:
			v = cty.NullVal(a.Type)
		default:
			var err error
			v, err = convert.Convert(v, a.Type)
			require.NoError(t, err, "attribute %s", a.Name)
			line := i + 2
			ranges[a.Name] = hcl.Range{Filename: "test.hcl", Start: hcl.Pos{Line: line, Column: 3}, End: hcl.Pos{Line: line, Column: 30}}
		}
		vals[a.Name] = v
	}
	return modules.Config{Value: cty.ObjectVal(vals), Block: BlockRange, Ranges: ranges}
}

// Plan calls m.Plan as the engine does: only after modules.Validate passed
// (a failed validation is the response, as it fails the task), and with a
// host for a host module. It checks the result's type.
func Plan(t *testing.T, m modules.Module, req modules.PlanRequest) modules.PlanResponse {
	t.Helper()
	if d := ready(t, m, req.Config, req.Host); d.HasErrors() {
		return modules.PlanResponse{Result: modutil.UnknownResult(m.Schema().Results), Diagnostics: d}
	}
	resp := m.Plan(context.Background(), req)
	CheckResult(t, m, resp.Result)
	return resp
}

// Apply calls m.Apply as the engine does; see Plan.
func Apply(t *testing.T, m modules.Module, req modules.ApplyRequest) modules.ApplyResponse {
	t.Helper()
	if d := ready(t, m, req.Config, req.Host); d.HasErrors() {
		return modules.ApplyResponse{Result: modutil.UnknownResult(m.Schema().Results), Diagnostics: d}
	}
	resp := m.Apply(context.Background(), req)
	CheckResult(t, m, resp.Result)
	return resp
}

// ready keeps the engine's two promises to Plan and Apply: a configuration
// that passed Validate, and a host for a host module (a test without one
// is a broken test).
func ready(t *testing.T, m modules.Module, cfg modules.Config, h host.Host) hcl.Diagnostics {
	t.Helper()
	if d := modules.Validate(m, cfg); d.HasErrors() {
		return d
	}
	if m.Schema().Target == modules.TargetHost && h == nil {
		t.Fatalf("%s acts on a host: the test must give it one", m.Schema().Name)
	}
	return nil
}

// Converge plans, applies what was planned and plans again, which must
// show nothing left to do: the idempotence every module promises. h is
// nil for a controller module.
func Converge(t *testing.T, m modules.Module, h host.Host, cfg modules.Config) (modules.PlanResponse, modules.ApplyResponse) {
	t.Helper()
	pr := Plan(t, m, modules.PlanRequest{Config: cfg, Host: h})
	require.False(t, pr.Diagnostics.HasErrors(), "plan: %v", pr.Diagnostics)
	var ar modules.ApplyResponse
	if pr.Change != nil {
		ar = Apply(t, m, modules.ApplyRequest{Config: cfg, Host: h, Change: pr.Change})
		require.False(t, ar.Diagnostics.HasErrors(), "apply: %v", ar.Diagnostics)
	}
	again := Plan(t, m, modules.PlanRequest{Config: cfg, Host: h})
	require.False(t, again.Diagnostics.HasErrors(), "second plan: %v", again.Diagnostics)
	require.Nil(t, again.Change, "the second plan must have nothing to do, has %+v", again.Change)
	return pr, ar
}

// CheckResult insists on a result of the schema's result type (conformance:
// win_registry's value is dynamic).
func CheckResult(t *testing.T, m modules.Module, v cty.Value) {
	t.Helper()
	require.True(t, v != cty.NilVal, "result missing")
	want := m.Schema().ResultType()
	errs := v.Type().TestConformance(want)
	require.Empty(t, errs, "result type %s, want %s", v.Type().FriendlyName(), want.FriendlyName())
}

// FieldNames lists a change's field names; nil for no change.
func FieldNames(c *modules.Change) []string {
	if c == nil {
		return nil
	}
	var names []string
	for _, f := range c.Fields {
		names = append(names, f.Name)
	}
	return names
}

// Field returns the change's field name, failing the test without one.
func Field(t *testing.T, c *modules.Change, name string) modules.FieldChange {
	t.Helper()
	require.NotNil(t, c, "no change")
	for _, f := range c.Fields {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("change has no field %s (has %v)", name, FieldNames(c))
	return modules.FieldChange{}
}

// Action is "" for a nil change, so tables can say "no change" simply.
func Action(c *modules.Change) modules.Action {
	if c == nil {
		return ""
	}
	return c.Action
}

// RequireDiag finds a diagnostic of severity with summary, located at attr
// (at the block when attr was not set explicitly).
func RequireDiag(t *testing.T, diags hcl.Diagnostics, cfg modules.Config, severity hcl.DiagnosticSeverity, summary, attr string) *hcl.Diagnostic {
	t.Helper()
	for _, d := range diags {
		if d.Severity == severity && d.Summary == summary {
			require.NotNil(t, d.Subject)
			assert.Equal(t, *cfg.Range(attr), *d.Subject, "diagnostic location")
			return d
		}
	}
	t.Fatalf("no %q diagnostic in %v", summary, diags)
	return nil
}

// RequireError is RequireDiag for an error.
func RequireError(t *testing.T, diags hcl.Diagnostics, cfg modules.Config, summary, attr string) *hcl.Diagnostic {
	t.Helper()
	return RequireDiag(t, diags, cfg, hcl.DiagError, summary, attr)
}

// Strs is a list of strings (an empty list of strings for none).
func Strs(ss ...string) cty.Value { return modutil.Strings(ss) }

// RequireRegistered fails for every type in the package directory dir
// (its non-test Go files) with a Schema method that is not among mods, the
// package's Modules(): a module written but never registered, named with
// the file to add it to.
func RequireRegistered(t *testing.T, dir, modulesFile string, mods []modules.Module) {
	t.Helper()
	registered := map[string]bool{}
	for _, m := range mods {
		ty := reflect.TypeOf(m)
		if ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		registered[ty.Name()] = true
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range file.Decls {
			if name, ok := schemaReceiver(d); ok {
				assert.Truef(t, registered[name], "%s (%s) has a Schema method but is not in Modules(): add it to the list in %s",
					name, filepath.Base(f), modulesFile)
			}
		}
	}
}

// schemaReceiver is the receiver type of a `Schema() modules.Schema`
// method declaration.
func schemaReceiver(d ast.Decl) (string, bool) {
	fn, ok := d.(*ast.FuncDecl)
	if !ok || fn.Recv == nil || fn.Name.Name != "Schema" || len(fn.Recv.List) != 1 {
		return "", false
	}
	if fn.Type.Results == nil || len(fn.Type.Results.List) != 1 {
		return "", false
	}
	sel, ok := fn.Type.Results.List[0].Type.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Schema" {
		return "", false
	}
	rt := fn.Recv.List[0].Type
	if star, ok := rt.(*ast.StarExpr); ok {
		rt = star.X
	}
	id, ok := rt.(*ast.Ident)
	if !ok {
		return "", false
	}
	return id.Name, true
}
