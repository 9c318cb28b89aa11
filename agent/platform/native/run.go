package native

import (
	"context"
	"time"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osexec"
	"github.com/wsu-project/wsu/host/osnet"
)

// Run runs the request here. The wait for the output pipes after the child
// exits is the host's waitDelay, else osexec's default.
func (h *localHost) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	wait := h.waitDelay
	if wait <= 0 {
		wait = osexec.DefaultWaitDelay
	}
	return osexec.Run(ctx, req, osexec.Options{WaitDelay: wait, Prepare: osexec.KillProcessGroup})
}

// DialTCP dials from this machine, which is the host.
func (h *localHost) DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	return osnet.DialTCP(ctx, address, timeout)
}

// DoHTTP makes the request from this machine, which is the host.
func (h *localHost) DoHTTP(ctx context.Context, req host.HTTPRequest) (host.HTTPResponse, error) {
	return osnet.DoHTTP(ctx, req)
}
