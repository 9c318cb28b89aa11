// Command wsu-agent is the node agent: what the SSH and WinRM transports
// deploy to a host (at a versioned path, checked by sha256) and start, and
// what connection=local and the simulated hosts run. It links the agent,
// its platforms, the protocol and the Host API only: no HCL, cty,
// Kubernetes client or cobra (make lint checks `go list -deps`), so a new
// node receives megabytes, not the whole CLI. The CLI carries builds of it
// (make build embeds them) and deploys the one for the host's platform.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/wsu-project/wsu/agent/agentcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := agentcmd.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
