package windows

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// win_service_info reports what is there, at plan time, and never plans a
// change.
func TestServiceInfo(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "WinDefend", BinaryPath: `C:\ProgramData\Microsoft\Windows Defender\platform\MsMpEng.exe`,
		Description: "Helps protect users from malware", StartType: host.StartAutomatic}))
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\kubelet.exe`,
		Description: ManagedDescription, StartType: host.StartAutomatic}))
	m := ServiceInfo{}
	for _, tc := range []struct {
		name            string
		exists, managed bool
		state, path     cty.Value
	}{
		{"WinDefend", true, false, cty.StringVal("stopped"), cty.StringVal(`C:\ProgramData\Microsoft\Windows Defender\platform\MsMpEng.exe`)},
		{"windefend", true, false, cty.StringVal("stopped"), cty.StringVal(`C:\ProgramData\Microsoft\Windows Defender\platform\MsMpEng.exe`)},
		{"kubelet", true, true, cty.StringVal("stopped"), cty.StringVal(`C:\k\kubelet.exe`)},
		{"Sense", false, false, cty.NullVal(cty.String), cty.NullVal(cty.String)},
	} {
		resp := plan(t, m, h, cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal(tc.name)}))
		require.False(t, resp.Diagnostics.HasErrors(), "%s: %v", tc.name, resp.Diagnostics)
		assert.Nil(t, resp.Change, "%s: a read never plans a change", tc.name)
		require.True(t, resp.Result.IsWhollyKnown(), "%s: known at plan time", tc.name)
		assert.Equal(t, cty.BoolVal(tc.exists), resp.Result.GetAttr("exists"), tc.name)
		assert.Equal(t, cty.BoolVal(tc.managed), resp.Result.GetAttr("managed"), tc.name)
		assert.Equal(t, tc.state, resp.Result.GetAttr("state"), tc.name)
		assert.Equal(t, tc.path, resp.Result.GetAttr("path"), tc.name)
	}
	// An unknown name (an earlier task's result) defers the read to apply.
	resp := plan(t, m, h, cfgFor(t, m, map[string]cty.Value{"name": cty.UnknownVal(cty.String)}))
	assert.False(t, resp.Result.GetAttr("exists").IsKnown())
	require.NotNil(t, resp.Change)
	ar := apply(t, m, h, cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("WinDefend")}), resp.Change)
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.Equal(t, cty.True, ar.Result.GetAttr("exists"))
}

func TestServiceInfoValidate(t *testing.T) {
	m := ServiceInfo{}
	cfg := cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("kube/proxy")})
	requireDiag(t, m.Validate(modules.ValidateRequest{Config: cfg}), cfg, hcl.DiagError, "Invalid service name", "name")
	assert.Empty(t, m.Validate(modules.ValidateRequest{Config: cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("WinDefend")})}))
}
