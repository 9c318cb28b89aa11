package windows

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

// memStore is a STAND-IN for INetFwRules, holding comRules in memory with
// the documented behaviour the rule logic relies on: Add appends even when
// the name is taken (Windows allows several rules with one name), Item
// returns the first rule with the name or errNoRule, Remove removes one.
// Its limits: names compare exactly, and nothing is validated the way the
// firewall service validates (a port list with protocol any, say); the
// Host API refuses such rules before they reach a store.
type memStore struct {
	rules     []comRule
	removeErr error
	stuck     bool // Remove reports success but keeps the rule
}

func (m *memStore) Item(name string) (comRule, error) {
	for _, r := range m.rules {
		if r.Name == name {
			return r, nil
		}
	}
	return comRule{}, errNoRule
}

func (m *memStore) Add(r comRule) error { m.rules = append(m.rules, r); return nil }

func (m *memStore) Remove(name string) error {
	if m.removeErr != nil {
		return m.removeErr
	}
	for i, r := range m.rules {
		if r.Name == name && !m.stuck {
			m.rules = append(m.rules[:i], m.rules[i+1:]...)
			return nil
		}
	}
	return nil
}

var kubeletRule = host.FirewallRule{Name: "kubelet", Description: "kubelet API", Group: "wsu",
	Direction: "in", Action: "allow", Protocol: "tcp", LocalPorts: "10250", Enabled: true}

// TestFirewallConversion: a rule survives the trip to the API's values and
// back, and the values are the API's.
func TestFirewallConversion(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule host.FirewallRule
		want comRule
	}{
		{"inbound tcp port, every profile", kubeletRule, comRule{Name: "kubelet", Description: "kubelet API", Grouping: "wsu",
			Protocol: fwProtocolTCP, Direction: fwDirIn, Action: fwActionAllow, Profiles: fwProfileAll, LocalPorts: "10250", Enabled: true}},
		{"outbound udp block, two profiles, disabled", host.FirewallRule{Name: "x", Direction: "OUT", Action: "Block", Protocol: "udp",
			LocalPorts: "53, 5353-5355", Profiles: []string{"public", "Domain"}},
			comRule{Name: "x", Protocol: fwProtocolUDP, Direction: fwDirOut, Action: fwActionBlock,
				Profiles: fwProfileDomain | fwProfilePublic, LocalPorts: "53,5353-5355"}},
		{"any protocol has no ports", host.FirewallRule{Name: "y", Direction: "in", Action: "allow", Protocol: "any", Profiles: []string{"private"}},
			comRule{Name: "y", Protocol: fwProtocolAny, Direction: fwDirIn, Action: fwActionAllow, Profiles: fwProfilePrivate}},
		{"tcp on any port", host.FirewallRule{Name: "z", Direction: "in", Action: "allow", Protocol: "tcp"},
			comRule{Name: "z", Protocol: fwProtocolTCP, Direction: fwDirIn, Action: fwActionAllow, Profiles: fwProfileAll, LocalPorts: "*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.rule.Validate())
			c := toCOM(tc.rule)
			assert.Equal(t, tc.want, c)
			back := fromCOM(c)
			assert.True(t, back.Exists)
			assert.True(t, back.Equal(tc.rule), "got %s, want %s", back, tc.rule)
		})
	}
	other := fromCOM(comRule{Name: "gre", Protocol: 47, Direction: fwDirIn, Action: fwActionAllow, Profiles: fwProfileAll})
	assert.Equal(t, "protocol 47", other.Protocol, "an unnamed IP protocol never equals a wanted rule")
}

// TestFirewallStoreContract: the name-as-identity logic over a store.
func TestFirewallStoreContract(t *testing.T) {
	changed := kubeletRule
	changed.LocalPorts = "10250,10255"
	changed.Enabled = false

	t.Run("missing rule reads as absent", func(t *testing.T) {
		r, err := getRule(&memStore{}, "kubelet")
		require.NoError(t, err)
		assert.False(t, r.Exists)
		assert.Equal(t, "kubelet", r.Name)
	})
	t.Run("set then get", func(t *testing.T) {
		s := &memStore{}
		require.NoError(t, setRule(s, kubeletRule))
		r, err := getRule(s, "kubelet")
		require.NoError(t, err)
		assert.True(t, r.Exists)
		assert.True(t, r.Equal(kubeletRule), "got %s", r)
	})
	t.Run("set replaces, never duplicates", func(t *testing.T) {
		s := &memStore{}
		require.NoError(t, setRule(s, kubeletRule))
		require.NoError(t, setRule(s, changed))
		require.Len(t, s.rules, 1)
		r, _ := getRule(s, "kubelet")
		assert.True(t, r.Equal(changed), "got %s", r)
	})
	t.Run("set and delete clear rules sharing the name", func(t *testing.T) {
		s := &memStore{}
		require.NoError(t, s.Add(toCOM(changed)))
		require.NoError(t, s.Add(toCOM(changed)))
		require.NoError(t, s.Add(comRule{Name: "other"}))
		require.NoError(t, setRule(s, kubeletRule))
		assert.Len(t, s.rules, 2)
		require.NoError(t, deleteRule(s, "kubelet"))
		assert.Equal(t, []comRule{{Name: "other"}}, s.rules)
		require.NoError(t, deleteRule(s, "kubelet"), "deleting what is gone is no error")
	})
	t.Run("invalid rule never reaches the store", func(t *testing.T) {
		s := &memStore{}
		bad := kubeletRule
		bad.Protocol = "any"
		assert.ErrorContains(t, setRule(s, bad), "ports need protocol tcp or udp")
		assert.Empty(t, s.rules)
	})
	t.Run("store errors are reported with the call", func(t *testing.T) {
		s := &memStore{removeErr: errors.New("access denied")}
		require.NoError(t, s.Add(toCOM(kubeletRule)))
		assert.ErrorContains(t, setRule(s, changed), "remove firewall rule kubelet: access denied")
	})
	t.Run("a rule that will not go is not a loop", func(t *testing.T) {
		s := &memStore{stuck: true}
		require.NoError(t, s.Add(toCOM(kubeletRule)))
		assert.ErrorContains(t, deleteRule(s, "kubelet"), "still present after")
	})
}
