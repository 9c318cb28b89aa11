//go:build !windows

package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wsu-project/wsu/agent/platform/sim"
)

// logFileFlags name the log file: containerd's --log-file, klog's
// -log_file (csi-proxy), and --logfile.
var logFileFlags = []string{"log-file", "log_file", "logfile"}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	name := serviceName()
	out := io.Writer(os.Stdout)
	logf := func(format string, a ...any) {
		fmt.Fprintf(out, "%s %s (TEST STAND-IN): %s\n", time.Now().Format(time.RFC3339Nano), name, fmt.Sprintf(format, a...))
	}
	fail := func(format string, a ...any) int {
		logf("error: "+format, a...)
		if out != io.Writer(os.Stdout) {
			fmt.Fprintf(os.Stderr, "%s: error: %s\n", name, fmt.Sprintf(format, a...))
		}
		return 1
	}
	// Catch signals before anything slow, so an early stop is not lost.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)

	logf("argv %q", args)
	local, err := pathResolver()
	if err != nil {
		return fail("%v", err)
	}
	configs, err := flagValues(args, configFlags...)
	if err != nil {
		return fail("%v", err)
	}
	for _, c := range configs {
		p, err := local(c)
		if err != nil {
			return fail("config %s: %v", c, err)
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			// What a real service prints when its configuration is absent.
			return fail("cannot load config %s: open %s: The system cannot find the file specified.", c, c)
		}
	}
	logFiles, err := flagValues(args, logFileFlags...)
	if err != nil {
		return fail("%v", err)
	}
	for _, lf := range logFiles {
		p, err := local(lf)
		if err == nil {
			if _, err = os.Stat(filepath.Dir(p)); err == nil {
				var f *os.File
				if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
					defer f.Close()
					out = io.MultiWriter(os.Stdout, f)
				}
			}
		}
		if err != nil {
			logf("warning: not logging to %s: %v", lf, err)
		}
	}
	logf("started, pid %d, config %s", os.Getpid(), strings.Join(configs, ", "))
	s := <-sigs
	logf("stopping on %v", s)
	return 0
}

// pathResolver translates the paths in the arguments: Windows paths
// through the simulated host when the simulation started us, anything
// else unchanged.
func pathResolver() (func(string) (string, error), error) {
	root := os.Getenv(sim.EnvRoot)
	if root == "" {
		return func(p string) (string, error) { return p, nil }, nil
	}
	h, err := sim.New(root, sim.Options{})
	if err != nil {
		return nil, err
	}
	return func(p string) (string, error) {
		if len(p) >= 2 && p[1] == ':' || strings.HasPrefix(p, `\`) {
			return h.LocalPath(p)
		}
		return p, nil
	}, nil
}
