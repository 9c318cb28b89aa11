package funcs

import (
	"strings"

	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// winPathFunc joins Windows path elements with backslashes. Forward slashes
// count as separators too, and runs of separators collapse into one, except
// for the leading double backslash of a UNC path (\\server\share).
var winPathFunc = function.New(&function.Spec{
	Description: "Joins Windows path elements with backslashes, collapsing duplicate separators.",
	VarParam:    &function.Parameter{Name: "parts", Type: cty.String},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		parts := make([]string, 0, len(args))
		for _, a := range args {
			parts = append(parts, a.AsString())
		}
		return cty.StringVal(winJoin(parts...)), nil
	},
})

func winJoin(parts ...string) string {
	nonEmpty := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			nonEmpty = append(nonEmpty, p)
		}
	}
	joined := strings.ReplaceAll(strings.Join(nonEmpty, `\`), "/", `\`)

	var b strings.Builder
	b.Grow(len(joined))
	if strings.HasPrefix(joined, `\\`) {
		b.WriteString(`\\`)
		joined = strings.TrimLeft(joined, `\`)
	}
	prevSep := false
	for _, r := range joined {
		if r == '\\' {
			if prevSep {
				continue
			}
			prevSep = true
		} else {
			prevSep = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// quoteArgFunc quotes one argument for a Windows command line so that
// CommandLineToArgvW (and the MSVC runtime) parse it back unchanged.
var quoteArgFunc = function.New(&function.Spec{
	Description: "Quotes one Windows command-line argument following the CommandLineToArgvW rules, when needed.",
	Params:      []function.Parameter{{Name: "arg", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		return cty.StringVal(quoteWindowsArg(args[0].AsString())), nil
	},
})

// quoteWindowsArg returns s unchanged unless it is empty or contains
// whitespace or a double quote. Otherwise it wraps s in double quotes,
// escapes embedded quotes with a backslash, and doubles the backslashes that
// precede a quote (embedded or the closing one), since only those are
// treated as escapes by the parser.
func quoteWindowsArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\v\"") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	backslashes := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			backslashes++
			continue
		case '"':
			b.WriteString(strings.Repeat(`\`, 2*backslashes+1))
		default:
			b.WriteString(strings.Repeat(`\`, backslashes))
		}
		backslashes = 0
		b.WriteByte(c)
	}
	b.WriteString(strings.Repeat(`\`, 2*backslashes))
	b.WriteByte('"')
	return b.String()
}
