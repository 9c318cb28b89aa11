package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/limits"
)

// Inputs are the variable values given from outside the playbook. Precedence,
// lowest first: variable default, var files (later files win), value files
// (later files win), inventory group vars (less specific groups first),
// inventory host vars, WSU_VAR_name environment variables, -var options
// (later ones win). An include's vars win over all of them for the included
// playbook.
type Inputs struct {
	VarFiles []string // -var-file paths
	Vars     []string // -var "name=value" options, as given
	Environ  []string // the environment (os.Environ()); WSU_VAR_name=value
	// SecretVars name -var values that are secrets whatever their
	// variable declares (the controller's varsFrom Secret values): marked
	// sensitive, scrubbed from every output.
	SecretVars []string
	// ValueFiles are files a face read into values itself (wsu's
	// --join-config reads a kubeadm JoinConfiguration): their values rank
	// above the var files and below the inventory, and their content is
	// fingerprinted in a saved plan as a var file's is.
	ValueFiles []ValueFile
	// Files reads the var files, each once per run (a pipe such as
	// --var-file <(sops -d x) can be read only once); nil: from disk,
	// bounded, on every read.
	Files *limits.Files
}

// ValueFile is one file's values, read by the face that was given it.
type ValueFile struct {
	// Path names the file in messages and in a saved plan's sources.
	Path string
	// Flag is the option that gave it ("--join-config"), for messages.
	Flag string
	// Src is the content the values were read from, for fingerprints.
	Src    []byte
	Values []FileValue
}

// FileValue is one variable's value from a ValueFile.
type FileValue struct {
	Name  string
	Value cty.Value
	// Range is where the file says it.
	Range hcl.Range
	// Secret marks the value sensitive whatever its variable declares,
	// and scrubs it from every output.
	Secret bool
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
	secret bool // Inputs.SecretVars: sensitive whatever the declaration
}

// parsedInputs are Inputs read and parsed, once per run.
type parsedInputs struct {
	files []map[string]rawValue
	// valueFiles are Inputs.ValueFiles, in order.
	valueFiles []map[string]rawValue
	env        map[string]rawValue
	cli        map[string]rawValue
	// Sources are the var files' contents for plan fingerprints.
	Sources map[string][]byte
}

func parseInputs(in Inputs, declared map[string]bool) (*parsedInputs, hcl.Diagnostics) {
	p := &parsedInputs{env: map[string]rawValue{}, cli: map[string]rawValue{}, Sources: map[string][]byte{}}
	var diags hcl.Diagnostics
	for _, path := range in.VarFiles {
		src, err := in.Files.Read(path)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot read variables file", Detail: fmt.Sprintf("Reading -var-file %s: %s.", path, err)})
			continue
		}
		p.Sources[path] = src
		file, d := parseVarFile(path, src)
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
	for _, vf := range in.ValueFiles {
		vals, d := valueFile(vf, declared)
		diags = append(diags, d...)
		p.Sources[vf.Path] = vf.Src
		p.valueFiles = append(p.valueFiles, vals)
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
	for _, opt := range in.Vars {
		name, val, ok := strings.Cut(opt, "=")
		name = strings.TrimSpace(name)
		if !ok || !hclsyntax.ValidIdentifier(name) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail:   fmt.Sprintf("%s; write -var NAME=VALUE, e.g. -var 'cluster_dns=10.0.0.10'.", varOptionProblem(ok, name)),
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
			})
			continue
		}
		p.cli[name] = rawValue{text: val, source: "-var", secret: slices.Contains(in.SecretVars, name)}
	}
	return p, diags
}

// valueFile is a ValueFile's values as raw values. A value for a variable
// no playbook declares is an error naming them all, as -var's is: the file
// was given for these variables, and one dropped silently (the token)
// would be a join that cannot work.
func valueFile(vf ValueFile, declared map[string]bool) (map[string]rawValue, hcl.Diagnostics) {
	vals := map[string]rawValue{}
	var missing []string
	var first *hcl.Range
	for _, fv := range vf.Values {
		if !declared[fv.Name] {
			missing = append(missing, fv.Name)
			if first == nil {
				first = fv.Range.Ptr()
			}
			continue
		}
		vals[fv.Name] = rawValue{value: fv.Value, source: vf.Flag + " " + vf.Path, rng: fv.Range.Ptr(), secret: fv.Secret}
	}
	if len(missing) == 0 {
		return vals, nil
	}
	return vals, hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Values for undeclared variables",
		Detail:   fmt.Sprintf("%s %s sets %s, which no playbook in this run declares. Give it to a playbook that takes them (wsu:join).", vf.Flag, vf.Path, strings.Join(missing, ", ")),
		Subject:  first,
	}}
}

// varOptionProblem says what is wrong with a -var option without quoting
// it: its value may be a secret, and without an '=' all of it may be.
func varOptionProblem(hasValue bool, name string) string {
	if !hasValue {
		return "The option has no '='"
	}
	return fmt.Sprintf("The option's name %q is not a valid variable name", name)
}

// parseVarFile parses a var file: HCL, or JSON for a name ending in .json
// (site.wsuvars.json, as Terraform's .tfvars.json): an object whose
// members are the variables.
func parseVarFile(path string, src []byte) (*hcl.File, hcl.Diagnostics) {
	if strings.HasSuffix(strings.ToLower(path), ".json") {
		if d := limits.CheckSize(len(src), limits.MaxFileSize, path, hcl.InitialPos); d.HasErrors() {
			return nil, d
		}
		f, d := hcljson.Parse(src, path)
		if d.HasErrors() {
			return nil, d
		}
		return f, d
	}
	if d := limits.CheckConfig(src, path, hcl.InitialPos); d.HasErrors() {
		return nil, d
	}
	f, d := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if d.HasErrors() {
		return nil, d
	}
	return f, d
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
		// A command-line value has no file to point into: the message
		// names the option and the value instead of a made-up location.
		expr, d := hclsyntax.ParseExpression([]byte(r.text), pseudo, hcl.InitialPos)
		if d.HasErrors() {
			return cty.NilVal, r.textError(v, fmt.Sprintf("%s is not a valid %s literal (%s)", r.shown(v), typeexpr.TypeString(v.Type), d[0].Summary))
		}
		var d2 hcl.Diagnostics
		val, d2 = expr.Value(nil)
		if d2.HasErrors() {
			return cty.NilVal, r.textError(v, fmt.Sprintf("%s is not a %s", r.shown(v), typeexpr.TypeString(v.Type)))
		}
		rng = nil
	}
	if d := limits.CheckValue(val, v.Type, fmt.Sprintf("The value for variable %q from %s", v.Name, r.source), rng); d.HasErrors() {
		return cty.NilVal, d
	}
	conv, err := convert.Convert(val, v.Type)
	if err != nil && r.text != "" {
		return cty.NilVal, r.textError(v, err.Error())
	}
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

// shown is the raw text quoted, or (sensitive).
func (r rawValue) shown(v *playbook.Variable) string {
	if v.Sensitive {
		return "(sensitive)"
	}
	return fmt.Sprintf("%q", r.text)
}

// textError says why a -var or WSU_VAR_ value does not fit its variable,
// quoting the value unless the variable is sensitive.
func (r rawValue) textError(v *playbook.Variable, why string) hcl.Diagnostics {
	shown := fmt.Sprintf("%s=%s", v.Name, r.text)
	if v.Sensitive {
		shown = v.Name + "=(sensitive)"
	}
	if r.source != "-var" {
		shown = r.source + "=" + r.text
		if v.Sensitive {
			shown = r.source + "=(sensitive)"
		}
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Invalid value for variable",
		Detail:   fmt.Sprintf("%s %s: variable %q is a %s, and %s.", sourceFlag(r.source), shown, v.Name, typeexpr.TypeString(v.Type), why),
		Subject:  v.DeclRange.Ptr(),
	}}
}

func sourceFlag(source string) string {
	if source == "-var" {
		return "-var"
	}
	return "environment variable"
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
		} else if rv, ok := lastWith(p.valueFiles, v.Name); ok {
			chosen = &rv
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
	if v.Sensitive || (chosen != nil && chosen.secret) {
		val = val.Mark(Sensitive)
	}
	return val, validate(v, val, subject)
}

// lastWith is name's value in the last of files that has one.
func lastWith(files []map[string]rawValue, name string) (rawValue, bool) {
	for i := len(files) - 1; i >= 0; i-- {
		if rv, ok := files[i][name]; ok {
			return rv, true
		}
	}
	return rawValue{}, false
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
