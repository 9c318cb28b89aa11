package local

import (
	"context"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osexec"
)

// waitDelay is osexec's wait for the output pipes after the child exits; a
// variable so tests can shorten it.
var waitDelay = osexec.DefaultWaitDelay

func (h *localHost) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	return osexec.Run(ctx, req, osexec.Options{WaitDelay: waitDelay, Prepare: killTree})
}
