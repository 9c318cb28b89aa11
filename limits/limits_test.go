package limits

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

// nestings builds, for each way HCL nests, an attribute value nested n
// deep.
var nestings = map[string]func(n int) string{
	"brackets":     func(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) },
	"objects":      func(n int) string { return strings.Repeat("{a=", n) + "1" + strings.Repeat("}", n) },
	"parentheses":  func(n int) string { return strings.Repeat("(", n) + "1" + strings.Repeat(")", n) },
	"calls":        func(n int) string { return strings.Repeat("f(", n) + "1" + strings.Repeat(")", n) },
	"templates":    func(n int) string { return strings.Repeat(`"${`, n/2) + "1" + strings.Repeat(`}"`, n/2) },
	"conditionals": func(n int) string { return strings.Repeat("true ? 1 : ", n) + "2" },
	"negations":    func(n int) string { return strings.Repeat("-", n) + "1" },
	"nots":         func(n int) string { return strings.Repeat("!", n) + "true" },
	"mixed":        func(n int) string { return strings.Repeat("-(", n/2) + "1" + strings.Repeat(")", n/2) },
	"directives": func(n int) string {
		return `"` + strings.Repeat("%{if true}", n-1) + "x" + strings.Repeat("%{endif}", n-1) + `"`
	},
	"heredocs": func(n int) string {
		// Each heredoc holds an interpolation holding the next.
		return strings.Repeat("<<EOT\n${", n/2) + "1" + strings.Repeat("}\nEOT\n", n/2)
	},
}

func TestNestingAtTheLimitParses(t *testing.T) {
	for name, mk := range nestings {
		t.Run(name, func(t *testing.T) {
			src := []byte("x = " + mk(MaxNesting-1) + "\n")
			require.Empty(t, CheckConfig(src, "ok.hcl", hcl.InitialPos), "%s at the limit is accepted", name)
			_, diags := hclsyntax.ParseConfig(src, "ok.hcl", hcl.InitialPos)
			assert.False(t, diags.HasErrors(), "the test input is valid HCL: %v", diags)
		})
	}
}

func TestNestingBeyondTheLimitIsRefusedWhereItCrossesIt(t *testing.T) {
	for name, mk := range nestings {
		t.Run(name, func(t *testing.T) {
			src := []byte("a = 1\nx = " + mk(MaxNesting+2) + "\n")
			diags := CheckConfig(src, "deep.hcl", hcl.InitialPos)
			require.Len(t, diags, 1)
			d := diags[0]
			assert.Equal(t, "Input nested too deeply", d.Summary)
			assert.Contains(t, d.Detail, fmt.Sprintf("more than %d deep", MaxNesting))
			require.NotNil(t, d.Subject)
			assert.Equal(t, "deep.hcl", d.Subject.Filename)
			assert.GreaterOrEqual(t, d.Subject.Start.Line, 2, "located on the deep line or after")
			assert.Less(t, d.Subject.Start.Byte, len(src))
		})
	}
}

func TestLocationIsWhereTheLimitIsCrossed(t *testing.T) {
	src := "x = " + strings.Repeat("[", MaxNesting+5)
	diags := CheckConfig([]byte(src), "f.hcl", hcl.InitialPos)
	require.Len(t, diags, 1)
	assert.Equal(t, hcl.Pos{Line: 1, Column: 5 + MaxNesting, Byte: 4 + MaxNesting}, diags[0].Subject.Start,
		"the bracket that opens level %d", MaxNesting+1)
}

func TestWhatDoesNotNest(t *testing.T) {
	deep := strings.Repeat("[", 5000)
	for name, src := range map[string]string{
		"string":      `x = "` + deep + `"`,
		"heredoc":     "x = <<EOT\n" + deep + "\nEOT\n",
		"comment":     "# " + deep + "\nx = 1\n",
		"block comm":  "/* " + deep + " */\nx = 1\n",
		"escaped":     `x = "$${` + deep + `"`,
		"many lists":  strings.Repeat("x = [[[[1]]]]\n", 5000),
		"many blocks": strings.Repeat("b {\n c {\n d = -1\n }\n}\n", 2000),
		"sequential conditionals": "x = [" + strings.Repeat("a ? 1 : 2, ", 500) + "]\n" +
			"y = {\n" + strings.Repeat("  k = a ? -1 : !b\n", 500) + "}\n",
		"blocks in a template": "x = \"" + strings.Repeat("%{if a}x%{endif}", 500) + "\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, CheckConfig([]byte(src), "ok.hcl", hcl.InitialPos))
		})
	}
}

func TestOperatorChains(t *testing.T) {
	ok := "x = 1" + strings.Repeat(" + 1", MaxOperators) + "\n"
	assert.Empty(t, CheckConfig([]byte(ok), "ok.hcl", hcl.InitialPos))
	// Each line's chain counts on its own.
	assert.Empty(t, CheckConfig([]byte(strings.Repeat(ok, 3)), "ok.hcl", hcl.InitialPos))
	for name, src := range map[string]string{
		"sum":      "1" + strings.Repeat("+1", MaxOperators+1),
		"and":      "a" + strings.Repeat(" && a", MaxOperators+1),
		"index":    "x" + strings.Repeat("[0]", MaxOperators+1),
		"attrs":    "x" + strings.Repeat(".a", MaxOperators+1),
		"newlines": "[1" + strings.Repeat("\n+1", MaxOperators+1) + "]",
	} {
		t.Run(name, func(t *testing.T) {
			diags := CheckConfig([]byte("x = "+src+"\n"), "long.hcl", hcl.InitialPos)
			require.Len(t, diags, 1)
			assert.Equal(t, "Expression too long", diags[0].Summary)
			assert.Contains(t, diags[0].Detail, fmt.Sprintf("more than %d operators", MaxOperators))
		})
	}
}

// The inputs of the review: tens of thousands of brackets, ~200 KB, which
// overflowed the stack when parsed.
func TestHugeNestingIsRefusedBeforeParsing(t *testing.T) {
	for name, mk := range nestings {
		src := []byte("x = " + mk(50000) + "\n")
		diags := CheckConfig(src, "huge.hcl", hcl.InitialPos)
		require.True(t, diags.HasErrors(), name)
		assert.Equal(t, "Input nested too deeply", diags[0].Summary, name)
	}
	expr := []byte(strings.Repeat("[", 100000))
	diags := CheckExpression(expr, "<-var>", hcl.InitialPos, MaxValueSize)
	require.True(t, diags.HasErrors())
	assert.Equal(t, "Input nested too deeply", diags[0].Summary)
	tmpl := []byte(strings.Repeat("${", 100000))
	require.True(t, CheckTemplate(tmpl, "t.tmpl", hcl.InitialPos).HasErrors())
}

func TestSize(t *testing.T) {
	big := []byte("x = \"" + strings.Repeat("a", MaxFileSize) + "\"\n")
	diags := CheckConfig(big, "big.hcl", hcl.InitialPos)
	require.Len(t, diags, 1)
	assert.Equal(t, "Input too large", diags[0].Summary)
	assert.Contains(t, diags[0].Detail, fmt.Sprintf("at most %d", MaxFileSize))
	assert.Equal(t, "big.hcl", diags[0].Subject.Filename)
	require.True(t, CheckExpression([]byte(strings.Repeat("1", MaxValueSize+1)), "<-var>", hcl.InitialPos, MaxValueSize).HasErrors())
	assert.Empty(t, CheckExpression([]byte(strings.Repeat("1", MaxValueSize)), "<-var>", hcl.InitialPos, MaxValueSize))

	dir := t.TempDir()
	path := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(path, big, 0o600))
	_, err := ReadFile(path)
	var tl *TooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, path, tl.Path)
	require.NoError(t, os.WriteFile(path, big[:MaxFileSize], 0o600))
	b, err := ReadFile(path)
	require.NoError(t, err)
	assert.Len(t, b, MaxFileSize)
}

func nested(n int) cty.Value {
	v := cty.NumberIntVal(1)
	for range n {
		v = cty.ObjectVal(map[string]cty.Value{"a": v})
	}
	return v
}

func TestCheckValue(t *testing.T) {
	anyMap := cty.Map(cty.DynamicPseudoType)
	rng := &hcl.Range{Filename: "vars.hcl", Start: hcl.Pos{Line: 3, Column: 5, Byte: 20}}
	wide := func(n, depth int) cty.Value {
		m := map[string]cty.Value{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = nested(depth)
		}
		return cty.ObjectVal(m)
	}
	tests := []struct {
		name string
		v    cty.Value
		ty   cty.Type
		want string
	}{
		{"shallow", wide(10, 3), anyMap, ""},
		{"at the depth limit", nested(MaxNesting - 1), cty.DynamicPseudoType, ""},
		{"too deep", nested(MaxNesting), cty.DynamicPseudoType, fmt.Sprintf("nests more than %d deep", MaxNesting)},
		{"too many values", cty.ListVal(slices.Repeat([]cty.Value{cty.True}, MaxValues+1)), cty.List(cty.Number), fmt.Sprintf("more than %d values", MaxValues)},
		// Quadratic unification: the review's map(any) case.
		{"deep and wide into map(any)", wide(100, 90), anyMap, "too large and deep to convert to map(any)"},
		{"the same into a precise type", wide(100, 90), cty.DynamicPseudoType, ""},
		{"any nested in an object", wide(100, 90), cty.Object(map[string]cty.Type{"x": cty.List(cty.DynamicPseudoType)}), "too large and deep"},
		// An include passing a sensitive list: sized, not refused for its mark.
		{"a sensitive list", cty.ListVal([]cty.Value{cty.StringVal("a")}).Mark("sensitive"), cty.List(cty.String), ""},
		{"too many sensitive values", cty.ListVal(slices.Repeat([]cty.Value{cty.True}, MaxValues+1)).Mark("sensitive"), cty.List(cty.Bool), fmt.Sprintf("more than %d values", MaxValues)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diags := CheckValue(tt.v, tt.ty, `the value for variable "x" from vars.hcl`, rng)
			if tt.want == "" {
				assert.Empty(t, diags)
				return
			}
			require.Len(t, diags, 1)
			assert.Equal(t, "Value beyond limits", diags[0].Summary)
			assert.Contains(t, diags[0].Detail, tt.want)
			assert.Contains(t, diags[0].Detail, `variable "x"`)
			assert.Equal(t, rng, diags[0].Subject)
		})
	}
}
