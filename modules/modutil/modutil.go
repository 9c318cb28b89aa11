// Package modutil holds the config and result value helpers that the module
// packages (generic, windows, kube) share.
package modutil

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

// Get reads a config attribute. Marks are dropped defensively: AsString and
// friends panic on marked values, and the engine re-marks what it shows.
func Get(cfg modules.Config, name string) cty.Value {
	v, _ := cfg.Get(name).UnmarkDeep()
	return v
}

// Str returns a string that is known and not null; ok is false otherwise.
func Str(v cty.Value) (s string, ok bool) {
	if !v.IsKnown() || v.IsNull() || !v.Type().Equals(cty.String) {
		return "", false
	}
	return v.AsString(), true
}

// IsNull is true only for a known null: an unknown value may yet be set.
func IsNull(v cty.Value) bool { return v.IsKnown() && v.IsNull() }

// Result builds a result object of exactly the schema's result type. Missing
// attributes are null; a bare cty.DynamicVal becomes unknown of the right type.
func Result(attrs []modules.Attribute, vals map[string]cty.Value) cty.Value {
	m := make(map[string]cty.Value, len(attrs))
	for _, a := range attrs {
		v, ok := vals[a.Name]
		switch {
		case !ok || v == cty.NilVal:
			v = cty.NullVal(a.Type)
		case !v.IsKnown() && !v.Type().Equals(a.Type):
			v = cty.UnknownVal(a.Type)
		case v.IsNull() && !v.Type().Equals(a.Type):
			v = cty.NullVal(a.Type)
		}
		m[a.Name] = v
	}
	return cty.ObjectVal(m)
}

// UnknownResult is a result none of whose attributes are known yet.
func UnknownResult(attrs []modules.Attribute) cty.Value {
	vals := make(map[string]cty.Value, len(attrs))
	for _, a := range attrs {
		vals[a.Name] = cty.UnknownVal(a.Type)
	}
	return Result(attrs, vals)
}

// RequireKnown reports attributes still unknown at apply time, which would
// be an engine bug; it keeps Apply from panicking on one.
func RequireKnown(cfg modules.Config, names ...string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, n := range names {
		if !Get(cfg, n).IsWhollyKnown() {
			diags = append(diags, cfg.Error(n, "Value unknown at apply",
				fmt.Sprintf("%s is still unknown when the task is applied.", n)))
		}
	}
	return diags
}

// Strings is the cty form of a string list; an empty one stays a typed
// list, so that plans render [] rather than null.
func Strings(ss []string) cty.Value {
	if len(ss) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(ss))
	for i, s := range ss {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}

// StringList is a known, non-null list or set of strings in its order;
// ok is false when the value is unknown or null, or holds an unknown
// element.
func StringList(v cty.Value) (out []string, ok bool) {
	if !v.IsWhollyKnown() || v.IsNull() {
		return nil, false
	}
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		s, _ := Str(e)
		out = append(out, s)
	}
	return out, true
}
