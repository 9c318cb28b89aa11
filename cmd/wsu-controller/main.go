// Command wsu-controller is wsu's cluster face: the controller that keeps
// WindowsInstances joined (package controller), and run-job, what a Job's
// pod runs in --run-mode=job (package controller/run).
//
// It is a binary of its own so the wsu CLI links none of it: the
// controller's manager and metrics filters pull in k8s.io/apiserver and
// cel-go, which cost every CLI process start-up time and memory. `wsu
// controller ARGS` runs `wsu-controller ARGS`, so both spellings work.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/wsu-project/wsu/cmd/internal/agents"
	"github.com/wsu-project/wsu/transport/agentbin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{stdout: os.Stdout, stderr: os.Stderr, agents: agents.Options(wsuName())}
	cmd := a.controllerCommand()
	cmd.SetArgs(os.Args[1:])
	err := cmd.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", err)
		os.Exit(1)
	}
}

// app holds what the commands share.
type app struct {
	stdout, stderr io.Writer
	// agents say where a run finds the agent builds it deploys: embedded,
	// beside this program, or the wsu beside it for its own platform.
	agents *agentbin.Options
}

// agentSource is a run's agent builds (each hashed once).
func (a *app) agentSource() *agentbin.Source { return agentbin.New(*a.agents) }

// wsuName is the wsu executable's name beside this program, which serves
// as the local platform's agent when no build is embedded or beside it.
func wsuName() string {
	if runtime.GOOS == "windows" {
		return "wsu.exe"
	}
	return "wsu"
}
