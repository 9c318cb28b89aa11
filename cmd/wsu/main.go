// Command wsu runs HCL playbooks that join Windows hosts to Kubernetes.
package main

import (
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/wsu-project/wsu/cmd/internal/agents"
)

func main() {
	started := time.Now()
	if p, ok := gcPercent(os.Getenv); ok {
		debug.SetGCPercent(p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, agents.Options(selfName()), processReplacer(), started)
	stop()
	os.Exit(code)
}

// defaultGCPercent: the CLI collects when its heap has grown by half
// since the last collection, not doubled (Go's default of 100). A run's
// live heap is small (35 MB at the peak of a 100-host cold join: the
// hosts' scopes and the copies' buffers), but it allocates fast (every
// chunk of every copy): at 100 the heap and what the runtime keeps of it
// took the join's peak RSS to 188 MB; at 50 it was 148 MB for the same
// CPU within the run-to-run spread (docs/performance.md).
const defaultGCPercent = 50

// gcPercent is the GC percent wsu sets: its default, unless GOGC is set
// (then the runtime has read it, and it stands).
func gcPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return defaultGCPercent, true
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
