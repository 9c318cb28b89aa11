// Command wsu runs HCL playbooks that join Windows hosts to Kubernetes.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wsu-project/wsu/transport/agentbin"
)

func main() {
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, agentOptions(), started)
	stop()
	os.Exit(code)
}

// agentOptions say where this program finds the agents it deploys and,
// for connection=local, runs: the builds make build embeds, else
// bin/wsu-agent-* beside it, else (for its own platform) itself, as
// `wsu agent`. Each run makes its own agentbin.Source from them. Execute
// (wsu used in-process, the tests) runs without: the local host is served
// in-process and only wsu_agent_binary files are deployed.
func agentOptions() *agentbin.Options {
	o := &agentbin.Options{Embedded: embeddedAgents()}
	if exe, err := os.Executable(); err == nil {
		o.Dir, o.Self = filepath.Dir(exe), exe
	}
	if dir, err := os.UserCacheDir(); err == nil {
		o.CacheDir = filepath.Join(dir, "wsu", "agents")
	}
	return o
}
