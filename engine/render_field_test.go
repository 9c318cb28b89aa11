package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

// TestRenderFieldJSON: a field's JSON values beside its display text, and
// what is held back: unknown values say after_unknown, partly sensitive
// ones give no JSON and say sensitive.
func TestRenderFieldJSON(t *testing.T) {
	tests := []struct {
		name string
		f    modules.FieldChange
		want FieldView
	}{
		{"string", modules.FieldChange{Name: "mode", Old: cty.StringVal("0600"), New: cty.StringVal("0644")},
			FieldView{Name: "mode", Old: `"0600"`, New: `"0644"`, Before: []byte(`"0600"`), After: []byte(`"0644"`)}},
		{"created list", modules.FieldChange{Name: "argv", New: cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})},
			FieldView{Name: "argv", New: `["a", "b"]`, After: []byte(`["a","b"]`)}},
		{"removed", modules.FieldChange{Name: "size", Old: cty.NumberIntVal(12), New: cty.NullVal(cty.Number)},
			FieldView{Name: "size", Old: "12", Before: []byte(`12`)}},
		{"unknown", modules.FieldChange{Name: "sha256", Old: cty.StringVal("ab"), New: cty.UnknownVal(cty.String)},
			FieldView{Name: "sha256", Old: `"ab"`, New: "(known after apply)", Before: []byte(`"ab"`), AfterUnknown: true}},
		{"partly sensitive", modules.FieldChange{Name: "env", New: cty.MapVal(map[string]cty.Value{
			"USER": cty.StringVal("admin"), "PASS": cty.StringVal("hunter22").Mark(Sensitive)})},
			FieldView{Name: "env", New: `{ PASS = (sensitive), USER = "admin" }`, Sensitive: true}},
		{"sensitive", modules.FieldChange{Name: "password", Sensitive: true, Old: cty.StringVal("a"), New: cty.StringVal("b")},
			FieldView{Name: "password", Old: "(sensitive)", New: "(sensitive)", Sensitive: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := renderField(tt.f, tt.f.Sensitive)
			assert.Equal(t, tt.want.Name, got.Name)
			assert.Equal(t, tt.want.Old, got.Old)
			assert.Equal(t, tt.want.New, got.New)
			assert.Equal(t, string(tt.want.Before), string(got.Before))
			assert.Equal(t, string(tt.want.After), string(got.After))
			assert.Equal(t, tt.want.AfterUnknown, got.AfterUnknown)
			assert.Equal(t, tt.want.Sensitive, got.Sensitive)
		})
	}
}

// TestScrubJSON: a secret the scrubber knows is replaced inside the JSON
// values too, in strings, keys and digit-only numbers.
func TestScrubJSON(t *testing.T) {
	s := NewScrubber()
	s.Add("hunter22")
	s.Add("98765432")
	e := Event{Change: &ChangeView{Fields: []FieldView{{Name: "cmd",
		New:   `["login", "--password=hunter22"]`,
		After: []byte(`{"hunter22":["login","--password=hunter22"],"pin":98765432,"n":1.5}`)}}}}
	e.applyScrub(s.Scrub)
	f := e.Change.Fields[0]
	assert.Equal(t, `["login", "--password=(sensitive)"]`, f.New)
	assert.JSONEq(t, `{"(sensitive)":["login","--password=(sensitive)"],"pin":"(sensitive)","n":1.5}`, string(f.After))
	unchanged := []byte(`{"a":[1,"b"]}`)
	assert.Equal(t, string(unchanged), string(scrubJSON(unchanged, s.Scrub)), "nothing to scrub: the same text")
}
