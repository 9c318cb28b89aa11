package windows

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/transport/local"
)

func TestEnv(t *testing.T) {
	tests := []struct {
		name       string
		existing   *string
		attrs      map[string]cty.Value // name is added
		wantAction modules.Action
		wantOld    cty.Value
		want       *string // afterwards; nil: unset
	}{
		{name: "create", attrs: map[string]cty.Value{"value": cty.StringVal(`C:\k\kubeconfig`)}, wantAction: modules.Create, wantOld: cty.NullVal(cty.String), want: ptr(`C:\k\kubeconfig`)},
		{name: "in sync", existing: ptr(`C:\k\kubeconfig`), attrs: map[string]cty.Value{"value": cty.StringVal(`C:\k\kubeconfig`)}, want: ptr(`C:\k\kubeconfig`)},
		{name: "value differs", existing: ptr("old"), attrs: map[string]cty.Value{"value": cty.StringVal(`C:\k\kubeconfig`)}, wantAction: modules.Update, wantOld: cty.StringVal("old"), want: ptr(`C:\k\kubeconfig`)},
		{name: "values compare exactly", existing: ptr(`c:\k\kubeconfig`), attrs: map[string]cty.Value{"value": cty.StringVal(`C:\k\kubeconfig`)}, wantAction: modules.Update, wantOld: cty.StringVal(`c:\k\kubeconfig`), want: ptr(`C:\k\kubeconfig`)},
		{name: "empty value", existing: ptr("old"), attrs: map[string]cty.Value{"value": cty.StringVal("")}, wantAction: modules.Update, wantOld: cty.StringVal("old"), want: ptr("")},
		{name: "absent removes", existing: ptr("old"), attrs: map[string]cty.Value{"state": cty.StringVal("absent")}, wantAction: modules.Delete, wantOld: cty.StringVal("old")},
		{name: "absent already", attrs: map[string]cty.Value{"state": cty.StringVal("absent")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.existing != nil {
				require.NoError(t, h.EnvSet(ctx, "KUBECONFIG", *tt.existing))
			}
			attrs := map[string]cty.Value{"name": cty.StringVal("KUBECONFIG")}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, Env{}, attrs)
			pr, _ := converge(t, Env{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			if pr.Change != nil {
				assert.Equal(t, []string{"value"}, fieldNames(pr.Change))
				assert.Equal(t, tt.wantOld, field(t, pr.Change, "value").Old)
				assert.Equal(t, "KUBECONFIG", pr.Change.Subject)
			}
			got, exists, err := h.EnvGet(ctx, "kubeconfig") // names are case-insensitive
			require.NoError(t, err)
			if tt.want == nil {
				assert.False(t, exists)
				assert.Equal(t, cty.NullVal(cty.String), pr.Result.GetAttr("value"))
				return
			}
			assert.True(t, exists)
			assert.Equal(t, *tt.want, got)
			assert.Equal(t, cty.StringVal(*tt.want), pr.Result.GetAttr("value"))
		})
	}
}

func TestEnvUnknown(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.EnvSet(ctx, "KUBECONFIG", "old"))
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantAction  modules.Action
		wantSubject string
		wantOld     cty.Value
	}{
		{"value of a set variable", map[string]cty.Value{"name": cty.StringVal("KUBECONFIG"), "value": unknownStr}, modules.Update, "KUBECONFIG", cty.StringVal("old")},
		{"value of a new variable", map[string]cty.Value{"name": cty.StringVal("NEW"), "value": unknownStr}, modules.Create, "NEW", cty.NullVal(cty.String)},
		{"name", map[string]cty.Value{"name": unknownStr, "value": cty.StringVal("x")}, modules.Update, knownAfterApply, unknownStr},
		{"state", map[string]cty.Value{"name": cty.StringVal("KUBECONFIG"), "value": cty.StringVal("x"), "state": unknownStr}, modules.Update, "KUBECONFIG", unknownStr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Env{}, tt.attrs)
			pr := plan(t, Env{}, h, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.wantAction, pr.Change.Action)
			assert.Equal(t, tt.wantSubject, pr.Change.Subject)
			assert.Equal(t, tt.wantOld, field(t, pr.Change, "value").Old)
			assert.False(t, field(t, pr.Change, "value").New.IsKnown() && tt.name != "name")
		})
	}
}

func TestEnvNotSupported(t *testing.T) {
	cfg := cfgFor(t, Env{}, map[string]cty.Value{"name": cty.StringVal("X"), "value": cty.StringVal("y")})
	// The plain local transport has no machine environment to manage.
	pr := plan(t, Env{}, local.New(), cfg)
	d := requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Not supported on this platform", "name")
	assert.Contains(t, d.Detail, "not supported")
}

func TestEnvValidate(t *testing.T) {
	runValidate(t, Env{}, []validateCase{
		{name: "ok", attrs: map[string]cty.Value{"name": cty.StringVal("KUBECONFIG"), "value": cty.StringVal("x")}},
		{name: "absent needs no value", attrs: map[string]cty.Value{"name": cty.StringVal("KUBECONFIG"), "state": cty.StringVal("absent")}},
		{name: "Path", attrs: map[string]cty.Value{"name": cty.StringVal("PATH"), "value": cty.StringVal(`C:\k`)}, wantSummary: "Use win_path for PATH", wantAttr: "name"},
		{name: "equals sign", attrs: map[string]cty.Value{"name": cty.StringVal("A=B"), "value": cty.StringVal("x")}, wantSummary: "Invalid variable name", wantAttr: "name"},
		{name: "empty name", attrs: map[string]cty.Value{"name": cty.StringVal(""), "value": cty.StringVal("x")}, wantSummary: "Invalid variable name", wantAttr: "name"},
		{name: "missing value", attrs: map[string]cty.Value{"name": cty.StringVal("X")}, wantSummary: "Missing value", wantAttr: "value"},
		{name: "NUL in value", attrs: map[string]cty.Value{"name": cty.StringVal("X"), "value": cty.StringVal("a\x00b")}, wantSummary: "Invalid value", wantAttr: "value"},
		{name: "bad state", attrs: map[string]cty.Value{"name": cty.StringVal("X"), "value": cty.StringVal("x"), "state": cty.StringVal("set")}, wantSummary: "Invalid state", wantAttr: "state"},
	})
}
