package funcs

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// replaceFunc replaces every occurrence of substr in str. When substr is
// wrapped in forward slashes ("/pattern/") it is a regular expression and the
// replacement may refer to capture groups as $1 or ${name}.
var replaceFunc = function.New(&function.Spec{
	Description: "Replaces every occurrence of substr in str with replace; a substr wrapped in slashes is a regular expression.",
	Params: []function.Parameter{
		{Name: "str", Type: cty.String},
		{Name: "substr", Type: cty.String},
		{Name: "replace", Type: cty.String},
	},
	Type: function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		str := args[0].AsString()
		substr := args[1].AsString()
		repl := args[2].AsString()

		if pattern, ok := regexLiteral(substr); ok {
			re, err := regexp.Compile(pattern)
			if err != nil {
				return cty.UnknownVal(cty.String), function.NewArgErrorf(1, "invalid regular expression %q: %s", pattern, err)
			}
			return cty.StringVal(re.ReplaceAllString(str, repl)), nil
		}
		return cty.StringVal(strings.ReplaceAll(str, substr, repl)), nil
	},
})

// regexLiteral reports whether s has the /pattern/ form and returns the
// pattern between the slashes. "//" is an ordinary string rather than an
// empty pattern, which would match between every character.
func regexLiteral(s string) (string, bool) {
	if len(s) < 3 || s[0] != '/' || s[len(s)-1] != '/' {
		return "", false
	}
	return s[1 : len(s)-1], true
}

func makeStringPredicate(desc, second string, pred func(s, t string) bool) function.Function {
	return function.New(&function.Spec{
		Description: desc,
		Params: []function.Parameter{
			{Name: "str", Type: cty.String},
			{Name: second, Type: cty.String},
		},
		Type: function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			return cty.BoolVal(pred(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

var startsWithFunc = makeStringPredicate("Reports whether str begins with prefix.", "prefix", strings.HasPrefix)

var endsWithFunc = makeStringPredicate("Reports whether str ends with suffix.", "suffix", strings.HasSuffix)

var strContainsFunc = makeStringPredicate("Reports whether str contains substr.", "substr", strings.Contains)

// lengthFunc counts the characters of a string (grapheme clusters, like
// Terraform), the elements of a collection or tuple, or the attributes of an
// object.
var lengthFunc = function.New(&function.Spec{
	Description: "Returns the length of a string, collection or structural value.",
	Params: []function.Parameter{
		{
			Name:             "value",
			Type:             cty.DynamicPseudoType,
			AllowDynamicType: true,
			AllowUnknown:     true,
		},
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty == cty.String, ty == cty.DynamicPseudoType,
			ty.IsCollectionType(), ty.IsTupleType(), ty.IsObjectType():
			return cty.Number, nil
		default:
			return cty.NilType, function.NewArgErrorf(0, "argument must be a string, a collection type, or a structural type")
		}
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v := args[0]
		ty := v.Type()
		switch {
		case ty == cty.DynamicPseudoType:
			return cty.UnknownVal(cty.Number), nil
		case ty.IsObjectType():
			// The attribute count is fixed by the type alone.
			return cty.NumberIntVal(int64(len(ty.AttributeTypes()))), nil
		case ty.IsTupleType():
			return cty.NumberIntVal(int64(len(ty.TupleElementTypes()))), nil
		case !v.IsKnown():
			return cty.UnknownVal(cty.Number), nil
		case ty == cty.String:
			return stdlib.Strlen(v)
		default:
			return v.Length(), nil
		}
	},
})

// indexFunc returns the position of the first element of list equal to value.
var indexFunc = function.New(&function.Spec{
	Description: "Returns the index of the first element of list that equals value.",
	Params: []function.Parameter{
		{Name: "list", Type: cty.DynamicPseudoType},
		{Name: "value", Type: cty.DynamicPseudoType},
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		if !(ty.IsListType() || ty.IsTupleType()) {
			return cty.NilType, function.NewArgErrorf(0, "argument must be a list or tuple")
		}
		return cty.Number, nil
	},
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		list, want := args[0], args[1]
		if !list.IsKnown() {
			return cty.UnknownVal(cty.Number), nil
		}
		if list.LengthInt() == 0 {
			return cty.NilVal, errors.New("cannot search an empty list")
		}
		for it := list.ElementIterator(); it.Next(); {
			i, elem := it.Element()
			eq := elem.Equals(want)
			if !eq.IsKnown() {
				return cty.UnknownVal(cty.Number), nil
			}
			if eq.True() {
				return i, nil
			}
		}
		return cty.NilVal, fmt.Errorf("item not found")
	},
})

// coalesceFunc returns the first argument that is neither null nor an empty
// string, after converting all arguments to a common type.
var coalesceFunc = function.New(&function.Spec{
	Description: "Returns the first argument that is not null and not an empty string.",
	VarParam: &function.Parameter{
		Name:             "vals",
		Type:             cty.DynamicPseudoType,
		AllowUnknown:     true,
		AllowDynamicType: true,
		AllowNull:        true,
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		if len(args) == 0 {
			return cty.NilType, errors.New("at least one argument is required")
		}
		types := make([]cty.Type, len(args))
		for i, a := range args {
			types[i] = a.Type()
		}
		ty, _ := convert.UnifyUnsafe(types)
		if ty == cty.NilType {
			return cty.NilType, errors.New("all arguments must have the same type")
		}
		return ty, nil
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		for _, a := range args {
			v, err := convert.Convert(a, retType)
			if err != nil {
				return cty.UnknownVal(retType), errors.New("all arguments must have the same type")
			}
			if !v.IsKnown() {
				return cty.UnknownVal(retType), nil
			}
			if v.IsNull() || (retType == cty.String && v.RawEquals(cty.StringVal(""))) {
				continue
			}
			return v, nil
		}
		return cty.NilVal, errors.New("no non-null, non-empty-string arguments")
	},
})
