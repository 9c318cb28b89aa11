// Command wsu runs HCL playbooks that join Windows hosts to Kubernetes.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/wsu-project/wsu/cmd/internal/agents"
)

func main() {
	started := time.Now()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, agents.Options(selfName()), processReplacer(), started)
	stop()
	os.Exit(code)
}

// selfName is this program's file name: wsu serves as its own platform's
// agent (`wsu agent`) when no build is embedded or beside it. Execute (wsu
// used in-process, the tests) runs without agents: the local host is
// served in-process and only wsu_agent_binary files are deployed.
func selfName() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Base(exe)
}
