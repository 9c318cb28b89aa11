package ssh

import (
	"context"
	"time"
)

// DialTCP is dialled by the agent, from the host: the probe is about the
// host's view of the network, not the controller's.
func (h *Host) DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	return h.call(ctx, "net.dial", timeout, func(ctx context.Context) error {
		return h.agent.client.DialTCP(ctx, address, timeout)
	})
}
