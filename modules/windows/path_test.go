package windows

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

const systemPath = `%SystemRoot%\system32;%SystemRoot%`

func TestPath(t *testing.T) {
	tests := []struct {
		name       string
		initial    string
		attrs      map[string]cty.Value // entry C:\k is added
		wantAction modules.Action
		wantPath   string
	}{
		{name: "add", initial: systemPath, wantAction: modules.Create, wantPath: systemPath + `;C:\k`},
		{name: "present", initial: `C:\k;` + systemPath, wantPath: `C:\k;` + systemPath},
		{name: "present in another spelling", initial: systemPath + `;c:\K\`, wantPath: systemPath + `;c:\K\`},
		{name: "remove", initial: `C:\k;` + systemPath, attrs: map[string]cty.Value{"state": cty.StringVal("absent")}, wantAction: modules.Delete, wantPath: systemPath},
		{
			name: "remove every spelling", initial: `c:\K\;` + systemPath + `;C:/k`,
			attrs: map[string]cty.Value{"state": cty.StringVal("absent")}, wantAction: modules.Delete, wantPath: systemPath,
		},
		{name: "absent already", initial: systemPath, attrs: map[string]cty.Value{"state": cty.StringVal("absent")}, wantPath: systemPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			require.NoError(t, h.EnvSet(ctx, "Path", tt.initial))
			attrs := map[string]cty.Value{"entry": cty.StringVal(`C:\k`)}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, Path{}, attrs)
			pr, _ := converge(t, Path{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			if pr.Change != nil {
				assert.Equal(t, []string{"entry"}, fieldNames(pr.Change))
			}
			got, _, err := h.EnvGet(ctx, "Path")
			require.NoError(t, err)
			assert.Equal(t, tt.wantPath, got)
			assert.Equal(t, cty.StringVal(`C:\k`), pr.Result.GetAttr("entry"))
		})
	}
}

func TestPathUnknown(t *testing.T) {
	h := newHost(t)
	before, _, err := h.EnvGet(ctx, "Path")
	require.NoError(t, err)
	for name, attrs := range map[string]map[string]cty.Value{
		"entry": {"entry": unknownStr},
		"state": {"entry": cty.StringVal(`C:\k`), "state": unknownStr},
	} {
		t.Run(name, func(t *testing.T) {
			pr := plan(t, Path{}, h, cfgFor(t, Path{}, attrs))
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, modules.Update, pr.Change.Action)
		})
	}
	after, _, err := h.EnvGet(ctx, "Path")
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.False(t, strings.Contains(after, `C:\k`))
}

func TestPathValidate(t *testing.T) {
	runValidate(t, Path{}, []validateCase{
		{name: "ok", attrs: map[string]cty.Value{"entry": cty.StringVal(`C:\k`)}},
		{name: "relative", attrs: map[string]cty.Value{"entry": cty.StringVal(`k\bin`)}, wantSummary: "Invalid Windows path", wantAttr: "entry"},
		{name: "two entries", attrs: map[string]cty.Value{"entry": cty.StringVal(`C:\k;C:\k\cni`)}, wantSummary: "Invalid PATH entry", wantAttr: "entry"},
		{name: "bad state", attrs: map[string]cty.Value{"entry": cty.StringVal(`C:\k`), "state": cty.StringVal("on")}, wantSummary: "Invalid state", wantAttr: "state"},
	})
}
