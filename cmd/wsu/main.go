// Command wsu runs HCL playbooks that join Windows hosts to Kubernetes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/wsu-project/wsu/transport/local"
)

func main() {
	// connection = local runs this binary as `wsu agent`; a library user
	// of the engine keeps the in-process host.
	if exe, err := os.Executable(); err == nil {
		local.AgentExecutable = exe
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
