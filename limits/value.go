package limits

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
)

// CheckValue refuses an outside value, before it is converted to ty,
// that nests deeper than MaxNesting, holds more than MaxValues values, or
// — when ty has `any` inside a collection, which makes cty unify the
// elements' types — costs more than MaxConversionCost to unify. what
// names the value in the error ("the value for variable \"x\" from -var").
func CheckValue(v cty.Value, ty cty.Type, what string, subject *hcl.Range) hcl.Diagnostics {
	var w walk
	w.visit(v, 1)
	detail := ""
	switch {
	case w.tooDeep:
		detail = fmt.Sprintf("%s nests more than %d deep", what, MaxNesting)
	case w.values > MaxValues:
		detail = fmt.Sprintf("%s holds more than %d values", what, MaxValues)
	case unifies(ty) && w.cost > MaxConversionCost:
		detail = fmt.Sprintf("%s is too large and deep to convert to %s (cost %d, at most %d: each value counts once per level it is nested at); give the variable a precise type or a smaller value",
			what, typeexpr.TypeString(ty), w.cost, MaxConversionCost)
	default:
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Value beyond limits",
		Detail:   detail + "; wsu refuses it before converting it. " + docRef,
		Subject:  subject,
	}}
}

// walk counts a value's values and unification cost, stopping once a
// bound is passed so that the walk itself stays bounded.
type walk struct {
	values, cost int
	tooDeep      bool
}

func (w *walk) visit(v cty.Value, depth int) {
	if w.tooDeep || w.values > MaxValues {
		return
	}
	if depth > MaxNesting {
		w.tooDeep = true
		return
	}
	w.values++
	w.cost += depth
	// A sensitive value (an include passing a secret) is sized like any
	// other; the marks matter to display, not to size.
	v, _ = v.Unmark()
	if !v.IsKnown() || v.IsNull() {
		return
	}
	ty := v.Type()
	if !(ty.IsListType() || ty.IsSetType() || ty.IsMapType() || ty.IsTupleType() || ty.IsObjectType()) {
		return
	}
	for it := v.ElementIterator(); it.Next(); {
		_, el := it.Element()
		w.visit(el, depth+1)
	}
}

// unifies says converting to ty unifies element types: ty has the
// dynamic pseudo-type inside a collection.
func unifies(ty cty.Type) bool {
	switch {
	case ty.IsListType() || ty.IsSetType() || ty.IsMapType():
		et := ty.ElementType()
		return et == cty.DynamicPseudoType || unifies(et)
	case ty.IsObjectType():
		for _, at := range ty.AttributeTypes() {
			if unifies(at) {
				return true
			}
		}
	case ty.IsTupleType():
		for _, et := range ty.TupleElementTypes() {
			if unifies(et) {
				return true
			}
		}
	}
	return false
}
