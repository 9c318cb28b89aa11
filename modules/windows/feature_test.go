package windows

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
)

func TestOptionalFeatureValidate(t *testing.T) {
	runValidate(t, OptionalFeature{}, []validateCase{
		{"plain", map[string]cty.Value{"name": cty.StringVal("Containers")}, "", ""},
		{"unknown", map[string]cty.Value{"name": unknownStr}, "", ""},
		{"option smuggled", map[string]cty.Value{"name": cty.StringVal("Containers /Quiet")}, "Invalid feature name", "name"},
		{"empty", map[string]cty.Value{"name": cty.StringVal("")}, "Invalid feature name", "name"},
	})
}

func TestOptionalFeature(t *testing.T) {
	tests := []struct {
		name        string
		state       host.FeatureState // the host's before the task
		wantChange  bool
		wantPlanned cty.Value // reboot_required in the plan
		wantState   string    // after apply
		wantReboot  bool
	}{
		{"disabled: enabled, reboot needed", host.FeatureDisabled, true, cty.True, "enable-pending", true},
		{"payload removed: enabled", host.FeatureRemoved, true, cty.True, "enable-pending", true},
		{"enabled: nothing to do", host.FeatureEnabled, false, cty.False, "enabled", false},
		{"pending: nothing to do, reboot still needed", host.FeatureEnablePending, false, cty.True, "enable-pending", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			require.NoError(t, h.SetOptionalFeature(sim.ContainersFeature, tt.state))
			cfg := cfgFor(t, OptionalFeature{}, map[string]cty.Value{"name": cty.StringVal("containers")})
			pr := plan(t, OptionalFeature{}, h, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			assert.Equal(t, tt.wantChange, pr.Change != nil)
			assert.Equal(t, tt.wantPlanned, pr.Result.GetAttr("reboot_required"))
			if pr.Change != nil {
				assert.Equal(t, modules.Update, pr.Change.Action)
				assert.Equal(t, "optional feature Containers", pr.Change.Subject)
				f := field(t, pr.Change, "state")
				assert.Equal(t, cty.StringVal(string(tt.state)), f.Old)
				assert.Equal(t, cty.StringVal("enabled"), f.New)
				ar := apply(t, OptionalFeature{}, h, cfg, pr.Change)
				require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
				pr = modules.PlanResponse{Result: ar.Result}
			}
			assert.Equal(t, cty.StringVal(tt.wantState), pr.Result.GetAttr("state"))
			assert.Equal(t, cty.BoolVal(tt.wantReboot), pr.Result.GetAttr("reboot_required"))
			assert.Equal(t, cty.StringVal("Containers"), pr.Result.GetAttr("name"), "Windows' spelling")

			again := plan(t, OptionalFeature{}, h, cfg)
			require.False(t, again.Diagnostics.HasErrors(), "%v", again.Diagnostics)
			assert.Nil(t, again.Change, "idempotent")
		})
	}
}

func TestOptionalFeatureUnknownName(t *testing.T) {
	h := newHost(t)
	cfg := cfgFor(t, OptionalFeature{}, map[string]cty.Value{"name": cty.StringVal("No-Such-Feature")})
	pr := plan(t, OptionalFeature{}, h, cfg)
	d := requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Cannot read the optional feature", "name")
	assert.Contains(t, d.Detail, "unknown optional feature")
}

// A dry run on a host without Containers: HNS does not answer yet, and the
// HNS modules read it at apply when earlier changes are pending (enabling
// the feature and restarting); without pending changes it is an error.
func TestHNSPlanWithoutContainers(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.SetOptionalFeature(sim.ContainersFeature, host.FeatureDisabled))
	for _, m := range []modules.Module{HNSNetwork{}, HNSEndpoint{}} {
		attrs := map[string]cty.Value{"name": cty.StringVal("OVNKubernetesHybridOverlayNetwork")}
		if _, ok := m.(HNSEndpoint); ok {
			attrs = map[string]cty.Value{"name": cty.StringVal("VIPEndpoint"), "network": cty.StringVal("OVNKubernetesHybridOverlayNetwork")}
		}
		cfg := cfgFor(t, m, attrs)
		pr := moduletest.Plan(t, m, modules.PlanRequest{Config: cfg, Host: route(t, h), Pending: true})
		assert.False(t, pr.Diagnostics.HasErrors(), "%T pending: %v", m, pr.Diagnostics)
		assert.False(t, pr.Result.IsWhollyKnown(), "%T: read at apply", m)
		pr = moduletest.Plan(t, m, modules.PlanRequest{Config: cfg, Host: route(t, h)})
		require.True(t, pr.Diagnostics.HasErrors(), "%T without pending changes", m)
		assert.Contains(t, pr.Diagnostics[0].Detail, "Containers is not enabled")
	}
}
