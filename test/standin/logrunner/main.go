// Command logrunner is a TEST STAND-IN for kube-log-runner.exe, not a
// product binary. Under the simulated Windows host (agent/platform/sim) it
// is what C:\k\kube-log-runner.exe runs as, and does what the real one
// (k8s.io/component-base/logs/kube-log-runner) does:
//
//	kube-log-runner -log-file=C:\var\log\kubelet\kubelet.log C:\k\kubelet.exe ARGS...
//
// starts the command with ARGS, appends its stdout (and stderr, unless
// -redirect-stderr=false) to the log file, forwards SIGTERM and SIGINT to
// it, waits, and exits with its exit code. The log file and the command
// are Windows paths, translated to the simulated host's files (see
// test/standin/simhost); ARGS are passed untranslated, as the command
// translates its own. Like the real one it does not create the log
// file's directory.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/wsu-project/wsu/test/standin/simhost"
)

func main() {
	log.SetPrefix("kube-log-runner (stand-in): ")
	log.SetFlags(log.LstdFlags)
	fs := flag.NewFlagSet("kube-log-runner", flag.ContinueOnError)
	logFile := fs.String("log-file", "", "append the command's output to this file instead of stdout")
	alsoStdout := fs.Bool("also-stdout", false, "with -log-file, write to stdout as well")
	redirectStderr := fs.Bool("redirect-stderr", true, "send the command's stderr where its stdout goes")
	// Rotation and flushing flags of newer kube-log-runners: accepted so a
	// command line written for them runs, but the stand-in does not rotate.
	fs.String("log-file-size", "", "ignored by the stand-in")
	fs.String("log-file-age", "", "ignored by the stand-in")
	fs.String("flush-interval", "", "ignored by the stand-in")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	code, err := run(fs.Args(), *logFile, *alsoStdout, *redirectStderr)
	if err != nil {
		log.Print(err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(args []string, logFile string, alsoStdout, redirectStderr bool) (int, error) {
	if len(args) == 0 {
		return 0, errors.New("not enough arguments to run")
	}
	paths, err := simhost.Open()
	if err != nil {
		return 0, err
	}
	var out, errOut io.Writer = os.Stdout, os.Stderr
	if logFile != "" {
		lp, err := paths.Local(logFile)
		if err != nil {
			return 0, fmt.Errorf("log file: %w", err)
		}
		f, err := os.OpenFile(lp, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return 0, fmt.Errorf("opening the log file %s: %w", logFile, err)
		}
		defer f.Close()
		out = f
		if alsoStdout {
			out = io.MultiWriter(os.Stdout, f)
		}
	}
	if redirectStderr {
		errOut = out
	}
	exe, err := paths.Local(args[0])
	if err != nil {
		return 0, fmt.Errorf("command: %w", err)
	}
	cmd := exec.Command(exe, args[1:]...)
	cmd.Stdout, cmd.Stderr = out, errOut
	// Take the signals before starting, so one sent right after the start
	// is forwarded rather than killing the runner alone.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	log.Printf("running %s %q", args[0], args[1:])
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting %s: %w", args[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sigs:
			log.Printf("got %v, sending it to %s (pid %d)", s, args[0], cmd.Process.Pid)
			if err := cmd.Process.Signal(s); err != nil && !errors.Is(err, os.ErrProcessDone) {
				log.Printf("signalling pid %d: %v", cmd.Process.Pid, err)
			}
		case err := <-done:
			var exit *exec.ExitError
			switch {
			case err == nil:
				return 0, nil
			case errors.As(err, &exit):
				if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					log.Printf("%s was killed by %v", args[0], ws.Signal())
					return 128 + int(ws.Signal()), nil
				}
				return exit.ExitCode(), nil
			default:
				return 0, fmt.Errorf("waiting for %s: %w", args[0], err)
			}
		}
	}
}
