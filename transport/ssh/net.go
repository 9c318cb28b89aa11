package ssh

import (
	"context"
	"time"

	"github.com/wsu-project/wsu/host"
)

// DialTCP is dialled by the agent, from the host: the probe is about the
// host's view of the network, not the controller's.
func (h *Host) DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	return h.call(ctx, "net.dial", timeout, func(ctx context.Context) error {
		return h.agent.client.DialTCP(ctx, address, timeout)
	})
}

// DoHTTP is made by the agent, from the host (a metadata service only the
// node reaches), bounded by op_timeout plus the request's own timeout.
func (h *Host) DoHTTP(ctx context.Context, req host.HTTPRequest) (host.HTTPResponse, error) {
	own := req.Timeout
	if own == 0 {
		own = host.DefaultHTTPTimeout
	}
	return do1(ctx, h, "net.http", own, func(ctx context.Context) (host.HTTPResponse, error) {
		return h.agent.client.DoHTTP(ctx, req)
	})
}

func (h *Host) SystemTime(ctx context.Context) (time.Time, error) {
	return do1(ctx, h, "sys.time", 0, h.agent.client.SystemTime)
}

func (h *Host) DiskFree(ctx context.Context, path string) (host.DiskSpace, error) {
	return do1(ctx, h, "fs.free", 0, func(ctx context.Context) (host.DiskSpace, error) {
		return h.agent.client.DiskFree(ctx, path)
	})
}
