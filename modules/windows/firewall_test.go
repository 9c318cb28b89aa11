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

var kubeletFW = host.FirewallRule{Name: "wsu kubelet", Group: ManagedFirewallGroup, Direction: "in", Action: "allow",
	Protocol: "tcp", LocalPorts: "10250", Profiles: host.FirewallProfiles, Enabled: true}

func TestFirewallRule(t *testing.T) {
	foreign := kubeletFW
	foreign.Group = "Administrators' rules"
	disabled := kubeletFW
	disabled.Enabled = false
	tests := []struct {
		name       string
		existing   *host.FirewallRule
		attrs      map[string]cty.Value // name is added
		wantAction modules.Action
		wantFields []string
		want       host.FirewallRule // Exists false: no rule afterwards
	}{
		{
			name:       "create with defaults",
			attrs:      map[string]cty.Value{"localport": cty.StringVal("10250")},
			wantAction: modules.Create, wantFields: []string{"description", "group", "direction", "action", "protocol", "localport", "profiles", "enabled"},
			want: kubeletFW,
		},
		{
			name:     "in sync",
			existing: &kubeletFW,
			attrs:    map[string]cty.Value{"localport": cty.StringVal("10250")},
			want:     kubeletFW,
		},
		{
			name:       "port and enabled change",
			existing:   &disabled,
			attrs:      map[string]cty.Value{"localport": cty.StringVal("10250, 10255")},
			wantAction: modules.Update, wantFields: []string{"localport", "enabled"},
			want: func() host.FirewallRule { r := kubeletFW; r.LocalPorts = "10250,10255"; return r }(),
		},
		{
			name:     "outbound udp on two profiles",
			existing: &kubeletFW,
			attrs: map[string]cty.Value{"direction": cty.StringVal("out"), "protocol": cty.StringVal("udp"), "localport": cty.StringVal("4789"),
				"profiles": strs("private", "domain"), "action": cty.StringVal("block")},
			wantAction: modules.Update, wantFields: []string{"direction", "action", "protocol", "localport", "profiles"},
			want: host.FirewallRule{Name: "wsu kubelet", Group: ManagedFirewallGroup, Direction: "out", Action: "block", Protocol: "udp",
				LocalPorts: "4789", Profiles: []string{"domain", "private"}, Enabled: true},
		},
		{
			name:       "any port, any protocol",
			attrs:      map[string]cty.Value{"protocol": cty.StringVal("any"), "localport": cty.StringVal("any")},
			wantAction: modules.Create, wantFields: []string{"description", "group", "direction", "action", "protocol", "localport", "profiles", "enabled"},
			want: host.FirewallRule{Name: "wsu kubelet", Group: ManagedFirewallGroup, Direction: "in", Action: "allow", Protocol: "any",
				Profiles: host.FirewallProfiles, Enabled: true},
		},
		{
			name:       "absent deletes",
			existing:   &kubeletFW,
			attrs:      map[string]cty.Value{"state": cty.StringVal("absent")},
			wantAction: modules.Delete, wantFields: []string{"description", "group", "direction", "action", "protocol", "localport", "profiles", "enabled"},
		},
		{
			name:  "absent already",
			attrs: map[string]cty.Value{"state": cty.StringVal("absent")},
		},
		{
			name:       "only_if_managed deletes wsu's rule",
			existing:   &kubeletFW,
			attrs:      map[string]cty.Value{"state": cty.StringVal("absent"), "only_if_managed": cty.True},
			wantAction: modules.Delete, wantFields: []string{"description", "group", "direction", "action", "protocol", "localport", "profiles", "enabled"},
		},
		{
			name:     "only_if_managed spares an administrator's rule",
			existing: &foreign,
			attrs:    map[string]cty.Value{"state": cty.StringVal("absent"), "only_if_managed": cty.True},
			want:     foreign,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.existing != nil {
				require.NoError(t, h.SetFirewallRule(ctx, *tt.existing))
			}
			attrs := map[string]cty.Value{"name": cty.StringVal("wsu kubelet")}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, FirewallRule{}, attrs)
			pr, _ := converge(t, FirewallRule{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
			if pr.Change != nil {
				assert.Equal(t, "firewall rule wsu kubelet", pr.Change.Subject)
			}
			got, err := h.FirewallRule(ctx, "wsu kubelet")
			require.NoError(t, err)
			assert.Equal(t, tt.want.Name != "", got.Exists)
			if tt.want.Name != "" {
				assert.True(t, got.Equal(tt.want), "got %s %+v, want %s %+v", got, got, tt.want, tt.want)
			}
		})
	}
}

func TestFirewallRuleFieldValues(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.SetFirewallRule(ctx, kubeletFW))
	cfg := cfgFor(t, FirewallRule{}, map[string]cty.Value{"name": cty.StringVal("wsu kubelet"), "localport": cty.StringVal("any")})
	pr := plan(t, FirewallRule{}, h, cfg)
	require.NotNil(t, pr.Change)
	assert.Equal(t, []string{"localport"}, fieldNames(pr.Change))
	assert.Equal(t, cty.StringVal("10250"), field(t, pr.Change, "localport").Old)
	assert.Equal(t, cty.StringVal("any"), field(t, pr.Change, "localport").New)
	assert.Equal(t, cty.True, pr.Result.GetAttr("exists"))
}

// TestFirewallRuleNoFirewall: a host whose connection offers no firewall
// fails the task, saying so.
func TestFirewallRuleNoFirewall(t *testing.T) {
	h := struct{ host.Host }{newHost(t)}
	cfg := cfgFor(t, FirewallRule{}, map[string]cty.Value{"name": cty.StringVal("x"), "localport": cty.StringVal("1")})
	pr := plan(t, FirewallRule{}, h, cfg)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Not supported on this platform", "name")
}

func TestFirewallRuleUnknown(t *testing.T) {
	h := newHost(t)
	pr := plan(t, FirewallRule{}, h, cfgFor(t, FirewallRule{}, map[string]cty.Value{"name": cty.StringVal("x"), "localport": unknownStr}))
	require.NotNil(t, pr.Change)
	assert.Equal(t, modules.Update, pr.Change.Action)
	assert.Equal(t, "firewall rule x", pr.Change.Subject)
	pr = plan(t, FirewallRule{}, h, cfgFor(t, FirewallRule{}, map[string]cty.Value{"name": unknownStr}))
	require.NotNil(t, pr.Change)
	assert.Equal(t, knownAfterApply, pr.Change.Subject)
}

func TestFirewallRuleValidate(t *testing.T) {
	row := func(name string, attrs map[string]cty.Value, summary, attr string) validateCase {
		if _, ok := attrs["name"]; !ok {
			attrs["name"] = cty.StringVal("r")
		}
		return validateCase{name: name, attrs: attrs, wantSummary: summary, wantAttr: attr}
	}
	runValidate(t, FirewallRule{}, []validateCase{
		row("valid", map[string]cty.Value{"localport": cty.StringVal("80,443,9000-9010")}, "", ""),
		row("bad direction", map[string]cty.Value{"direction": cty.StringVal("inbound")}, "Invalid direction", "direction"),
		row("bad action", map[string]cty.Value{"action": cty.StringVal("deny")}, "Invalid action", "action"),
		row("bad protocol", map[string]cty.Value{"protocol": cty.StringVal("icmp")}, "Invalid protocol", "protocol"),
		row("bad state", map[string]cty.Value{"state": cty.StringVal("gone")}, "Invalid state", "state"),
		row("bad profile", map[string]cty.Value{"profiles": strs("home")}, "Invalid profile", "profiles"),
		row("no profile", map[string]cty.Value{"profiles": cty.ListValEmpty(cty.String)}, "No profile", "profiles"),
		row("port out of range", map[string]cty.Value{"localport": cty.StringVal("70000")}, "Invalid firewall rule", "localport"),
		row("backwards range", map[string]cty.Value{"localport": cty.StringVal("90-80")}, "Invalid firewall rule", "localport"),
		row("ports with protocol any", map[string]cty.Value{"protocol": cty.StringVal("any"), "localport": cty.StringVal("80")}, "Invalid firewall rule", "localport"),
		row("reserved name", map[string]cty.Value{"name": cty.StringVal("all")}, "Invalid firewall rule", "name"),
		row("name with a bar", map[string]cty.Value{"name": cty.StringVal("a|b")}, "Invalid firewall rule", "name"),
	})
}
