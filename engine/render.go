package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/wsu-project/wsu/modules"
)

// Sensitive is the mark carried by values that must never be shown.
const Sensitive = "sensitive"

const (
	shownSensitive = "(sensitive)"
	shownUnknown   = "(known after apply)"
)

// Render shows a value as HCL would write it, hiding sensitive values and
// naming unknown ones.
func Render(v cty.Value) string {
	if v == cty.NilVal {
		return ""
	}
	if v.HasMark(Sensitive) {
		return shownSensitive
	}
	if v.ContainsMarked() {
		// Partly sensitive: show the shape, hide the marked parts.
		if v.CanIterateElements() && v.IsKnown() && !v.IsNull() {
			return renderCollection(v)
		}
		return shownSensitive
	}
	if !v.IsKnown() {
		return shownUnknown
	}
	if !v.IsWhollyKnown() && v.CanIterateElements() && !v.IsNull() {
		return renderCollection(v)
	}
	return strings.TrimSpace(string(hclwrite.TokensForValue(v).Bytes()))
}

func renderCollection(v cty.Value) string {
	ty := v.Type()
	var parts []string
	for it := v.ElementIterator(); it.Next(); {
		k, e := it.Element()
		if ty.IsObjectType() || ty.IsMapType() {
			parts = append(parts, fmt.Sprintf("%s = %s", k.AsString(), Render(e)))
		} else {
			parts = append(parts, Render(e))
		}
	}
	if ty.IsObjectType() || ty.IsMapType() {
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// secretFields decides which change fields and result attributes to hide.
// With any sensitive argument, everything not plainly a non-sensitive
// argument is hidden: a file's sha256 or size derives from its (secret)
// content, and a hash of a short secret is as good as the secret.
type secretFields struct {
	args      map[string]bool // argument names
	sensitive map[string]bool // sensitive arguments
	// credentials are arguments that only authenticate to a system
	// (modules.Attribute.Credential): hidden themselves, but nothing
	// derives from them.
	credentials map[string]bool
}

func (s secretFields) hide(name string) bool {
	if s.sensitive[name] {
		return true
	}
	return s.anySecretInput() && !s.args[name]
}

// anySecretInput: a sensitive argument that changes and results may
// derive from.
func (s secretFields) anySecretInput() bool {
	for name := range s.sensitive {
		if !s.credentials[name] {
			return true
		}
	}
	return false
}

// hideResult is hide for a result attribute, which may say what it
// derives from (modules.Attribute.DerivesFrom): then it is hidden only
// when one of those arguments is sensitive.
func (s secretFields) hideResult(a modules.Attribute) bool {
	if a.DerivesFrom == nil {
		return s.hide(a.Name)
	}
	for _, arg := range a.DerivesFrom {
		if s.sensitive[arg] {
			return true
		}
	}
	return false
}

// renderChange turns a module's Change into its display form.
func renderChange(c *modules.Change, secret secretFields) *ChangeView {
	if c == nil {
		return nil
	}
	cv := &ChangeView{Action: string(c.Action), Symbol: c.Action.Symbol(), Subject: c.Subject, Restarts: c.Restarts}
	for _, f := range c.Fields {
		cv.Fields = append(cv.Fields, renderField(f, f.Sensitive || secret.hide(f.Name)))
	}
	if c.Content != nil && len(secret.sensitive) == 0 && !anySensitive(c.Fields) {
		cv.Diff = contentDiff(c.Subject, c.Content)
	}
	return cv
}

// renderField is one field's display text and, where the value may be
// shown, its JSON.
func renderField(f modules.FieldChange, hidden bool) FieldView {
	fv := FieldView{Name: f.Name}
	if hidden {
		if f.Old != cty.NilVal && !f.Old.IsNull() {
			fv.Old = shownSensitive
		}
		fv.New, fv.Sensitive = shownSensitive, true
		return fv
	}
	if f.Old != cty.NilVal && !(f.Old.IsKnown() && f.Old.IsNull()) {
		fv.Old = Render(f.Old)
		fv.Before, _ = valueJSON(f.Old)
	}
	if f.New != cty.NilVal && !(f.New.IsKnown() && f.New.IsNull()) {
		fv.New = Render(f.New)
		fv.After, fv.AfterUnknown = valueJSON(f.New)
	}
	fv.Sensitive = marked(f.Old) || marked(f.New)
	return fv
}

func marked(v cty.Value) bool { return v != cty.NilVal && v.ContainsMarked() }

// valueJSON is v as JSON, or nil when any part of it is sensitive or
// unknown (unknown then says which).
func valueJSON(v cty.Value) (raw json.RawMessage, unknown bool) {
	if v.ContainsMarked() {
		return nil, false
	}
	if !v.IsWhollyKnown() {
		return nil, true
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, false
	}
	return b, false
}

func anySensitive(fields []modules.FieldChange) bool {
	for _, f := range fields {
		if f.Sensitive {
			return true
		}
	}
	return false
}

// canon is a stable text form of a value for fingerprints: unlike Render it
// includes sensitive values (only their hash is ever stored).
func canon(v cty.Value) string {
	if v == cty.NilVal {
		return "nil"
	}
	v, _ = v.UnmarkDeep()
	if !v.IsKnown() {
		return "?" + v.Type().FriendlyName()
	}
	if v.IsNull() {
		return "null"
	}
	ty := v.Type()
	switch {
	case ty == cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case ty == cty.Number:
		return v.AsBigFloat().Text('g', -1)
	case ty == cty.Bool:
		return fmt.Sprint(v.True())
	case ty.IsObjectType() || ty.IsMapType():
		m := v.AsValueMap()
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		b.WriteString("{")
		for _, k := range keys {
			fmt.Fprintf(&b, "%q:%s,", k, canon(m[k]))
		}
		return b.String() + "}"
	case v.CanIterateElements():
		var b strings.Builder
		b.WriteString("[")
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			b.WriteString(canon(e) + ",")
		}
		return b.String() + "]"
	}
	return "?"
}

// fingerprint identifies a planned task outcome: same config, same observed
// state, same change. It is the text the plan hashes (runner.hash).
func fingerprint(module string, cfg cty.Value, status Status, c *modules.Change) []string {
	parts := []string{module, canon(cfg), string(status)}
	if c != nil {
		parts = append(parts, string(c.Action), c.Subject, strings.Join(c.Restarts, ","))
		for _, f := range c.Fields {
			parts = append(parts, f.Name, canon(f.Old), canon(f.New))
		}
		keys := make([]string, 0, len(c.Private))
		for k := range c.Private {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			parts = append(parts, k, c.Private[k])
		}
	}
	return parts
}
