//go:build !windows

package windows_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsu-project/wsu/host"
)

// TestWineFirewall: how far Wine's hnetcfg.dll carries the firewall
// backend. Wine 8 creates NetFwPolicy2 and hands out its rule collection,
// and creates NetFwRule objects whose property setters accept values, but
// INetFwRules.Item/Add/Remove and INetFwRule's getters are E_NOTIMPL
// stubs. So this checks that the agent gets that far through the vtables
// and reports the rest as not supported, naming the call and the HRESULT,
// never as success; the rule logic itself is covered by the contract
// tests on the stand-in store (fwrule_test.go).
func TestWineFirewall(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	rule := host.FirewallRule{Name: "wsu kubelet", Direction: "in", Action: "allow", Protocol: "tcp", LocalPorts: "10250", Enabled: true}
	rs := pr.run(
		step{"fw-get", a{"name": rule.Name}},
		step{"fw-set", a{"rule": rule}},
		step{"fw-delete", a{"name": rule.Name}},
		step{"fw-roundtrip", a{"rule": rule}},
		step{"fw-set", a{"rule": host.FirewallRule{Name: "bad", Direction: "sideways", Action: "allow", Protocol: "tcp"}}},
	)
	for i, call := range []string{"fw-get", "fw-set", "fw-delete"} {
		assert.True(t, rs[i].NotSupported, "%s: %s", call, rs[i].Error)
		// Policy and Rules were reached: the stub that answers is Item.
		assert.Contains(t, rs[i].Error, "INetFwRules.Item: HRESULT 0x80004001", call)
	}
	// NetFwRule was created and every setter took its value (a failing
	// one is named "INetFwRule.<property>"); reading back is the stub.
	assert.True(t, rs[3].NotSupported, rs[3].Error)
	assert.Contains(t, rs[3].Error, "read INetFwRule: HRESULT 0x80004001")
	assert.NotRegexp(t, `INetFwRule\.[A-Z]`, rs[3].Error)

	assert.False(t, rs[4].NotSupported, "an invalid rule is refused before any COM call")
	assert.Contains(t, rs[4].Error, "direction must be in or out")
}
