package funcs

import (
	"errors"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// hiddenMessage replaces the error of a function called with a sensitive
// argument.
const hiddenMessage = "the error message is hidden because an argument is sensitive"

// hideSensitiveErrors wraps fn so that when any argument carries a mark
// (the only mark playbook values carry is sensitive) its errors say which
// argument failed, but not how: function errors quote their argument
// ("cannot convert \"s3cret\" to number", "invalid CIDR expression ...",
// "no file exists at ..."), and an argument derived from a secret (an
// upper-cased or base64-encoded one) is a secret the run's scrubber does
// not know. Marks pass through unchanged: fn still unmarks what it cannot
// take and marks its result.
func hideSensitiveErrors(fn function.Function) function.Function {
	params := fn.Params()
	spec := &function.Spec{
		Description: fn.Description(),
		Params:      make([]function.Parameter, len(params)),
		Type: func(args []cty.Value) (cty.Type, error) {
			ty, err := fn.ReturnTypeForValues(args)
			return ty, hide(err, args)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v, err := fn.Call(args)
			return v, hide(err, args)
		},
	}
	for i, p := range params {
		p.AllowMarked = true
		spec.Params[i] = p
	}
	if vp := fn.VarParam(); vp != nil {
		p := *vp
		p.AllowMarked = true
		spec.VarParam = &p
	}
	return function.New(spec)
}

// hide replaces err when an argument is marked, keeping which argument it
// is about (the caller points the diagnostic at it).
func hide(err error, args []cty.Value) error {
	if err == nil {
		return nil
	}
	marked := false
	for _, a := range args {
		marked = marked || a.ContainsMarked()
	}
	if !marked {
		return err
	}
	var argErr function.ArgError
	if errors.As(err, &argErr) {
		return function.NewArgErrorf(argErr.Index, hiddenMessage)
	}
	return errors.New(hiddenMessage)
}

// hidingSensitiveErrors wraps every function of t but can and try, whose
// arguments are unevaluated expressions: what fails inside them is a call
// to a wrapped function.
func hidingSensitiveErrors(t map[string]function.Function) map[string]function.Function {
	for name, fn := range t {
		if name == "can" || name == "try" {
			continue
		}
		t[name] = hideSensitiveErrors(fn)
	}
	return t
}
