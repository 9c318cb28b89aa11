package funcs

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

// TestErrorsHideSensitiveArguments calls functions whose errors quote
// their argument, with the argument marked and not: marked, the message
// is replaced (and still names the parameter); plain, it is kept.
func TestErrorsHideSensitiveArguments(t *testing.T) {
	const secret = "S3NT1N3L-fn"
	derived := map[string]string{ // what the plain error quotes, when not the secret
		`file(upper(pw))`:            "S3NT1N3L-FN",
		`tonumber(base64encode(pw))`: "UzNOVDFOM0wtZm4=",
	}
	for _, expr := range []string{
		`tonumber(pw)`, `tobool(pw)`, `parseint(pw, 10)`,
		`cidrhost(pw, 1)`, `cidrnetmask(pw)`, `cidrsubnet(pw, 8, 1)`,
		`timeadd(pw, "1h")`, `formatdate("YYYY", pw)`,
		`file(pw)`, `filebase64(pw)`, `filesha256(pw)`, `templatefile(pw, {})`,
		`templatefile("sensitive.tpl", { v = pw })`,
		`file(upper(pw))`, `tonumber(base64encode(pw))`, `try(tonumber(pw))`,
	} {
		quoted := secret
		if q, ok := derived[expr]; ok {
			quoted = q
		}
		t.Run(expr, func(t *testing.T) {
			e, d := hclsyntax.ParseExpression([]byte(expr), "t.hcl", hcl.InitialPos)
			require.False(t, d.HasErrors(), d.Error())
			eval := func(pw cty.Value) hcl.Diagnostics {
				_, diags := e.Value(&hcl.EvalContext{Variables: map[string]cty.Value{"pw": pw}, Functions: Table("testdata", nil)})
				require.True(t, diags.HasErrors(), "the call fails")
				return diags
			}
			plain := eval(cty.StringVal(secret))
			hidden := eval(cty.StringVal(secret).Mark("sensitive"))
			assert.NotContains(t, hidden.Error(), quoted)
			if assert.Contains(t, plain.Error(), quoted, "the plain error quotes it (so the test can fail)") {
				assert.Contains(t, hidden.Error(), hiddenMessage)
			}
		})
	}
}
