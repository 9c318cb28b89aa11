package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/limits"
)

// Inputs are the variable values given from outside the playbook. Precedence,
// lowest first: variable default, var files (later files win), inventory
// group vars (less specific groups first), inventory host vars, WSU_VAR_name
// environment variables, -var options (later ones win). An include's vars
// win over all of them for the included playbook.
type Inputs struct {
	VarFiles []string // -var-file paths
	Vars     []string // -var "name=value" options, as given
	Environ  []string // the environment (os.Environ()); WSU_VAR_name=value
}

// EnvPrefix starts environment variables that set playbook variables.
const EnvPrefix = "WSU_VAR_"

// rawValue is one outside value before it meets its variable's type.
type rawValue struct {
	// Either text (from -var or the environment: parsed by type) or expr
	// (from a var file) or value (from inventory).
	text   string
	expr   hcl.Expression
	value  cty.Value
	source string // for messages: "-var", "WSU_VAR_x", "vars.hcl"
	rng    *hcl.Range
}

// parsedInputs are Inputs read and parsed, once per run.
type parsedInputs struct {
	files []map[string]rawValue
	env   map[string]rawValue
	cli   map[string]rawValue
	// Sources are the var files' contents for plan fingerprints.
	Sources map[string][]byte
}

func parseInputs(in Inputs, declared map[string]bool) (*parsedInputs, hcl.Diagnostics) {
	p := &parsedInputs{env: map[string]rawValue{}, cli: map[string]rawValue{}, Sources: map[string][]byte{}}
	var diags hcl.Diagnostics
	for _, path := range in.VarFiles {
		src, err := limits.ReadFile(path)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read variables file", Detail: fmt.Sprintf("Reading -var-file %s: %s.", path, err)})
			continue
		}
		p.Sources[path] = src
		if d := limits.CheckConfig(src, path, hcl.InitialPos); d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		file, d := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		attrs, d := file.Body.JustAttributes()
		diags = append(diags, d...)
		vals := map[string]rawValue{}
		for name, a := range attrs {
			if !declared[name] {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagWarning,
					Summary:  "Value for undeclared variable",
					Detail:   fmt.Sprintf("%s sets %q, which no playbook in this run declares; it is ignored.", path, name),
					Subject:  a.NameRange.Ptr(),
				})
				continue
			}
			if len(a.Expr.Variables()) > 0 {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Variables not allowed",
					Detail:   "A variables file holds literal values only; it cannot refer to other values.",
					Subject:  a.Expr.Range().Ptr(),
				})
				continue
			}
			vals[name] = rawValue{expr: a.Expr, source: path, rng: a.Expr.Range().Ptr()}
		}
		p.files = append(p.files, vals)
	}
	for _, kv := range in.Environ {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		name = strings.TrimPrefix(name, EnvPrefix)
		if declared[name] { // environments are shared: others' values are not errors
			p.env[name] = rawValue{text: val, source: EnvPrefix + name}
		}
	}
	for i, opt := range in.Vars {
		pseudo := fmt.Sprintf("<-var #%d>", i+1)
		name, val, ok := strings.Cut(opt, "=")
		name = strings.TrimSpace(name)
		if !ok || !hclsyntax.ValidIdentifier(name) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail:   fmt.Sprintf("%s; give a variable name and a value joined by '=', e.g. -var 'cluster_dns=10.0.0.10'.", varOptionProblem(ok, name)),
				Subject:  &hcl.Range{Filename: pseudo, Start: hcl.InitialPos, End: hcl.Pos{Line: 1, Column: len(opt) + 1, Byte: len(opt)}},
			})
			continue
		}
		if !declared[name] {
			var names []string
			for n := range declared {
				names = append(names, n)
			}
			sort.Strings(names)
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("-var sets %q, which no playbook in this run declares.%s", name, suggestName(name, names)),
				Subject:  &hcl.Range{Filename: pseudo, Start: hcl.InitialPos, End: hcl.Pos{Line: 1, Column: len(name) + 1, Byte: len(name)}},
			})
			continue
		}
		p.cli[name] = rawValue{text: val, source: "-var"}
	}
	return p, diags
}

// varOptionProblem says what is wrong with a -var option without quoting
// it: its value may be a secret, and without an '=' all of it may be.
func varOptionProblem(hasValue bool, name string) string {
	if !hasValue {
		return "The option has no '='"
	}
	return fmt.Sprintf("The option's name %q is not a valid variable name", name)
}

// value converts a raw value to the variable's type.
func (r rawValue) convert(v *playbook.Variable) (cty.Value, hcl.Diagnostics) {
	var val cty.Value
	rng := r.rng
	switch {
	case r.expr != nil:
		var d hcl.Diagnostics
		val, d = r.expr.Value(nil)
		if d.HasErrors() {
			return cty.NilVal, d
		}
	case r.value != cty.NilVal:
		val = r.value
		// Inventory INI values are strings; one that is meant as a list,
		// map, number or bool is parsed as an HCL literal.
		if val.Type() == cty.String && !val.IsNull() && v.Type != cty.String && v.Type != cty.DynamicPseudoType {
			if d := checkLiteral(val.AsString(), rng); d.HasErrors() {
				return cty.NilVal, d
			}
			if pv, ok := parseLiteral(val.AsString(), rng); ok {
				val = pv
			}
		}
	default:
		pseudo := fmt.Sprintf("<value for var.%s>", v.Name)
		if v.Type == cty.String || v.Type == cty.DynamicPseudoType {
			val = cty.StringVal(r.text)
			break
		}
		if d := limits.CheckExpression([]byte(r.text), pseudo, hcl.InitialPos, limits.MaxValueSize); d.HasErrors() {
			return cty.NilVal, d
		}
		expr, d := hclsyntax.ParseExpression([]byte(r.text), pseudo, hcl.InitialPos)
		if d.HasErrors() {
			return cty.NilVal, d
		}
		var d2 hcl.Diagnostics
		val, d2 = expr.Value(nil)
		if d2.HasErrors() {
			return cty.NilVal, d2
		}
		rng = &hcl.Range{Filename: pseudo, Start: hcl.InitialPos, End: hcl.Pos{Line: 1, Column: len(r.text) + 1, Byte: len(r.text)}}
	}
	if d := limits.CheckValue(val, v.Type, fmt.Sprintf("The value for variable %q from %s", v.Name, r.source), rng); d.HasErrors() {
		return cty.NilVal, d
	}
	conv, err := convert.Convert(val, v.Type)
	if err != nil {
		return cty.NilVal, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("The value for variable %q from %s is not a %s: %s.", v.Name, r.source, typeexpr.TypeString(v.Type), err),
			Subject:  rng,
		}}
	}
	return conv, nil
}

// checkLiteral bounds an inventory value parsed as a literal.
func checkLiteral(s string, rng *hcl.Range) hcl.Diagnostics {
	name := "<inventory value>"
	if rng != nil {
		name = rng.Filename
	}
	d := limits.CheckExpression([]byte(s), name, hcl.InitialPos, limits.MaxValueSize)
	for _, diag := range d {
		if rng != nil {
			diag.Subject = rng // the value's place in the inventory
		}
	}
	return d
}

func parseLiteral(s string, rng *hcl.Range) (cty.Value, bool) {
	name := "<inventory value>"
	if rng != nil {
		name = rng.Filename
	}
	expr, d := hclsyntax.ParseExpression([]byte(s), name, hcl.InitialPos)
	if d.HasErrors() {
		return cty.NilVal, false
	}
	v, d := expr.Value(nil)
	if d.HasErrors() {
		return cty.NilVal, false
	}
	return v, true
}

// resolveVariable finds the value of v from the outside sources and the
// host's inventory vars, then checks type, nullability and validations.
// inc, when non-nil, is the includer's value and wins.
func (p *parsedInputs) resolve(v *playbook.Variable, hostVars map[string]inventory.Var, inc *rawValue) (cty.Value, hcl.Diagnostics) {
	var chosen *rawValue
	switch {
	case inc != nil:
		chosen = inc
	default:
		if rv, ok := p.cli[v.Name]; ok {
			chosen = &rv
		} else if rv, ok := p.env[v.Name]; ok {
			chosen = &rv
		} else if iv, ok := hostVars[v.Name]; ok {
			r := iv.Range
			chosen = &rawValue{value: iv.Value, source: "inventory " + iv.Range.Filename, rng: &r}
		} else {
			for i := len(p.files) - 1; i >= 0; i-- {
				if rv, ok := p.files[i][v.Name]; ok {
					chosen = &rv
					break
				}
			}
		}
	}
	var val cty.Value
	var subject = v.DeclRange.Ptr()
	if chosen == nil {
		if v.Required() {
			return cty.NilVal, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "No value for required variable",
				Detail:   fmt.Sprintf("Variable %q has no default; set it with -var, -var-file, %s%s or the inventory.", v.Name, EnvPrefix, v.Name),
				Subject:  subject,
			}}
		}
		val = v.Default
	} else {
		var d hcl.Diagnostics
		val, d = chosen.convert(v)
		if d.HasErrors() {
			return cty.NilVal, d
		}
		if chosen.rng != nil {
			subject = chosen.rng
		}
	}
	if val.IsNull() && !v.Nullable {
		return cty.NilVal, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Null value for non-nullable variable",
			Detail:   fmt.Sprintf("Variable %q is declared nullable = false.", v.Name),
			Subject:  subject,
		}}
	}
	if v.Sensitive {
		val = val.Mark(Sensitive)
	}
	return val, validate(v, val, subject)
}

func validate(v *playbook.Variable, val cty.Value, subject *hcl.Range) hcl.Diagnostics {
	var diags hcl.Diagnostics
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{v.Name: val})},
		Functions: validationFuncs,
	}
	for _, rule := range v.Validations {
		ok, d := rule.Condition.Value(ctx)
		if d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		ok, _ = ok.Unmark()
		ok, err := convert.Convert(ok, cty.Bool)
		if err != nil || ok.IsNull() {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid validation condition", Detail: "The condition must be true or false.", Subject: rule.Condition.Range().Ptr()})
			continue
		}
		if !ok.IsKnown() || ok.True() {
			continue
		}
		msg, d := rule.ErrorMessage.Value(ctx)
		text := "The value failed validation."
		if !d.HasErrors() {
			if m, err := convert.Convert(msg, cty.String); err == nil && m.IsKnown() && !m.IsNull() {
				if m.HasMark(Sensitive) {
					text = "The value failed validation (the message is hidden: it uses a sensitive value)."
				} else {
					text = m.AsString()
				}
			}
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("%s\n\nThis was checked by the validation rule at %s.", text, rule.DeclRange),
			Subject:  subject,
		})
	}
	return diags
}
