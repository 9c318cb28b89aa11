package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/spf13/cobra"
)

// The cluster face is a binary of its own, wsu-controller: the controller's
// manager and metrics filters pull in k8s.io/apiserver and cel-go, which
// would cost every CLI process (a no-op re-run's floor is `ssh host true`).
// `wsu controller ARGS` runs `wsu-controller ARGS`, as git and kubectl run
// their plugins: found beside the wsu executable, else on PATH; its
// arguments, output and exit code are its own.

// controllerBinary is the cluster face's executable name.
func controllerBinary() string {
	if runtime.GOOS == "windows" {
		return "wsu-controller.exe"
	}
	return "wsu-controller"
}

func (a *app) controllerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "controller",
		Short: "Keep WindowsInstances joined to the cluster (the in-cluster face; runs wsu-controller)",
		Long: `Controller runs wsu-controller, the cluster face, with the same arguments: found beside
this wsu, else on PATH. 'wsu controller --help' shows its options; docs/controller.md
has the API, the workflows and a troubleshooting table.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.forwardController(cmd.Context(), args)
		},
	}
}

// forwardController runs wsu-controller with args: in place of this
// process where the platform allows (a.replace, from main), else as a
// child whose exit code becomes wsu's and which is interrupted when wsu is.
func (a *app) forwardController(ctx context.Context, args []string) error {
	path, err := findController()
	if err != nil {
		return err
	}
	if a.replace != nil {
		return a.replace(path, append([]string{path}, args...), os.Environ())
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = a.stdin, a.stdout, a.stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return exitError{code: ee.ExitCode()}
	}
	return err
}

// findController is wsu-controller beside the wsu executable, else on
// PATH, else an error that says how to get it.
func findController() (string, error) {
	name := controllerBinary()
	var beside string
	if exe, err := os.Executable(); err == nil {
		beside = filepath.Join(filepath.Dir(exe), name)
		if st, err := os.Stat(beside); err == nil && st.Mode().IsRegular() {
			return beside, nil
		}
	}
	if path, err := exec.LookPath(name); err == nil {
		return path, nil
	}
	return "", fmt.Errorf("wsu controller runs %s, the cluster face, which is neither beside this wsu (%s) nor on PATH: "+
		"install it from the same release as wsu (make build builds both into bin/; the wsu image has it at /usr/local/bin/%s), "+
		"or run `go build -o %s ./cmd/wsu-controller`", name, beside, "wsu-controller", beside)
}
