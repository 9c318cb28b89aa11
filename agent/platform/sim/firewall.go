package sim

import (
	"context"
	"errors"
	"strings"

	"github.com/wsu-project/wsu/host"
)

var _ host.Firewall = (*Host)(nil)

// fwTable is the simulated Windows Firewall's rule list, in the order the
// rules were added. Windows allows several rules with one name; the Host
// API treats the name as the identity, and so does the sim.
type fwTable struct {
	Rules []host.FirewallRule `json:"rules"`
}

func (t *tx) firewall() (*fwTable, error) { return table[fwTable](t, tFirewall) }

// FirewallRule reads the first rule named name, as INetFwRules.Item does.
func (h *Host) FirewallRule(ctx context.Context, name string) (host.FirewallRule, error) {
	if err := ctx.Err(); err != nil {
		return host.FirewallRule{}, err
	}
	out := host.FirewallRule{Name: name}
	err := h.view(func(t *tx) error {
		tab, err := t.firewall()
		if err != nil {
			return err
		}
		for _, r := range tab.Rules {
			if r.Name == name {
				out = r
				out.Exists = true
				return nil
			}
		}
		return nil
	})
	return out, err
}

// SetFirewallRule replaces every rule named rule.Name with rule, stored in
// the normalized form the Windows backend reads back.
func (h *Host) SetFirewallRule(ctx context.Context, rule host.FirewallRule) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := rule.Validate(); err != nil {
		return err
	}
	rule = rule.Normalize()
	rule.Exists = false
	return h.update(func(t *tx) error {
		tab, err := t.firewall()
		if err != nil {
			return err
		}
		tab.Rules = append(without(tab.Rules, rule.Name), rule)
		t.mark(tFirewall)
		return nil
	})
}

// DeleteFirewallRule removes every rule named name.
func (h *Host) DeleteFirewallRule(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if strings.TrimSpace(name) == "" {
		return errors.New("a firewall rule needs a name")
	}
	return h.update(func(t *tx) error {
		tab, err := t.firewall()
		if err != nil {
			return err
		}
		kept := without(tab.Rules, name)
		if len(kept) != len(tab.Rules) {
			tab.Rules = kept
			t.mark(tFirewall)
		}
		return nil
	})
}

// without drops the rules named name; an emptied list is [], not null, so
// a host whose rules all went reads as one that never had any.
func without(rules []host.FirewallRule, name string) []host.FirewallRule {
	out := []host.FirewallRule{}
	for _, r := range rules {
		if r.Name != name {
			out = append(out, r)
		}
	}
	return out
}
