package generic

import (
	"github.com/stretchr/testify/assert"

	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

func bools(bs ...cty.Value) cty.Value { return cty.ListVal(bs) }

func TestAssert(t *testing.T) {
	tests := []struct {
		name       string
		attrs      map[string]cty.Value
		wantPassed cty.Value
		wantMsg    cty.Value
		wantDetail string // "" when no error
	}{
		{name: "all true", attrs: map[string]cty.Value{"that": bools(cty.True, cty.True)}, wantPassed: cty.True, wantMsg: cty.StringVal("All assertions passed")},
		{name: "success message", attrs: map[string]cty.Value{"that": bools(cty.True), "success_message": cty.StringVal("ok!")}, wantPassed: cty.True, wantMsg: cty.StringVal("ok!")},
		{name: "one false", attrs: map[string]cty.Value{"that": bools(cty.True, cty.False, cty.True)}, wantPassed: cty.False, wantDetail: "condition 2 of 3 is false"},
		{name: "several false", attrs: map[string]cty.Value{"that": bools(cty.False, cty.True, cty.False)}, wantPassed: cty.False, wantDetail: "conditions 1, 3 of 3 are false"},
		{name: "null is false", attrs: map[string]cty.Value{"that": bools(cty.NullVal(cty.Bool))}, wantPassed: cty.False, wantDetail: "condition 1 of 1 is false"},
		{name: "fail message", attrs: map[string]cty.Value{"that": bools(cty.False), "fail_message": cty.StringVal("need Windows")}, wantPassed: cty.False, wantDetail: "need Windows"},
		{name: "unknown condition", attrs: map[string]cty.Value{"that": bools(cty.False, cty.UnknownVal(cty.Bool))}, wantPassed: cty.UnknownVal(cty.Bool), wantMsg: cty.UnknownVal(cty.String)},
		{name: "unknown list", attrs: map[string]cty.Value{"that": cty.UnknownVal(cty.List(cty.Bool))}, wantPassed: cty.UnknownVal(cty.Bool), wantMsg: cty.UnknownVal(cty.String)},
		{name: "unknown fail message", attrs: map[string]cty.Value{"that": bools(cty.False), "fail_message": cty.UnknownVal(cty.String)}, wantPassed: cty.False, wantDetail: "condition 1 of 1 is false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Assert{}, tt.attrs)
			resp := plan(t, Assert{}, cfg)
			assert.Nil(t, resp.Change, "assert never changes anything")
			assert.Equal(t, tt.wantPassed, resp.Result.GetAttr("passed"))
			if tt.wantDetail == "" {
				assert.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
				assert.Equal(t, tt.wantMsg, resp.Result.GetAttr("msg"))
			} else {
				d := requireDiag(t, resp.Diagnostics, cfg, "Assertion failed", "that")
				assert.Equal(t, tt.wantDetail, d.Detail)
			}
			if !tt.wantPassed.IsKnown() {
				// Apply never sees unknowns from the engine; if it did, say so.
				ar := apply(t, Assert{}, cfg, nil)
				requireDiag(t, ar.Diagnostics, cfg, "Value unknown at apply", "that")
				return
			}
			ar := apply(t, Assert{}, cfg, nil)
			assert.Equal(t, resp.Result, ar.Result)
			assert.Equal(t, resp.Diagnostics, ar.Diagnostics)
		})
	}
}

func TestAssertValidate(t *testing.T) {
	for _, that := range []cty.Value{cty.ListValEmpty(cty.Bool), cty.NullVal(cty.List(cty.Bool))} {
		cfg := cfgFor(t, Assert{}, map[string]cty.Value{"that": that})
		requireDiag(t, Assert{}.Validate(modules.ValidateRequest{Config: cfg}), cfg, "No conditions", "that")
	}
	cfg := cfgFor(t, Assert{}, map[string]cty.Value{"that": cty.UnknownVal(cty.List(cty.Bool))})
	assert.Empty(t, Assert{}.Validate(modules.ValidateRequest{Config: cfg}))
}
