package hashcache

import (
	"context"

	"github.com/wsu-project/wsu/host"
)

var _ host.Firewall = (*cache)(nil)

// The firewall calls pass through to the wrapped backend (the agent wraps
// the simulation and the Windows platform in the cache); a backend without
// a firewall answers not supported.

func (c *cache) firewall() (host.Firewall, error) {
	if fw, ok := c.Host.(host.Firewall); ok {
		return fw, nil
	}
	return nil, host.NotSupported("firewall rules", host.PlatformOf(c.Host))
}

func (c *cache) FirewallRule(ctx context.Context, name string) (host.FirewallRule, error) {
	fw, err := c.firewall()
	if err != nil {
		return host.FirewallRule{}, err
	}
	return fw.FirewallRule(ctx, name)
}

func (c *cache) SetFirewallRule(ctx context.Context, rule host.FirewallRule) error {
	fw, err := c.firewall()
	if err != nil {
		return err
	}
	return fw.SetFirewallRule(ctx, rule)
}

func (c *cache) DeleteFirewallRule(ctx context.Context, name string) error {
	fw, err := c.firewall()
	if err != nil {
		return err
	}
	return fw.DeleteFirewallRule(ctx, name)
}
