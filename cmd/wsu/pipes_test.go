//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of issue 31's inputs from pipes and special files: what a
// shell gives as a file (<(…), /dev/stdin, a FIFO, /dev/zero) is read
// once and bounded, and a signal ends a run waiting on one.

// pipeGreeting is a playbook whose one task prints var.greeting, which a
// validation rule keeps shorter than 10 characters.
const pipeGreeting = `
variable "greeting" {
  type    = string
  default = "default"
  validation {
    condition     = length(var.greeting) < 10
    error_message = "The greeting is too long."
  }
}
play "p" {
  hosts = "all"
  task "t" {
    print { msg = "said ${var.greeting}" }
  }
}
`

// pipePath is a path naming the read end of a pipe whose writer writes
// content and closes, as bash's <(…) gives.
func pipePath(t *testing.T, content string) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	go func() {
		_, _ = w.Write([]byte(content))
		w.Close()
	}()
	return "/dev/fd/" + strconv.Itoa(int(r.Fd()))
}

// TestInputsFromPipes: a var file, an -e @file, a playbook and an
// inventory from a pipe are read, and their values used.
func TestInputsFromPipes(t *testing.T) {
	dir := t.TempDir()
	pb := filepath.Join(dir, "p.hcl")
	require.NoError(t, os.WriteFile(pb, []byte(pipeGreeting), 0o644))
	cases := map[string]func() []string{
		"--var-file": func() []string {
			return []string{"plan", pb, "--local", "--var-file", pipePath(t, `greeting = "piped"`)}
		},
		"-e @": func() []string {
			return []string{"plan", pb, "--local", "-e", "@" + pipePath(t, `greeting = "piped"`)}
		},
		"playbook": func() []string {
			return []string{"plan", pipePath(t, strings.ReplaceAll(pipeGreeting, `"default"`, `"piped"`)), "--local"}
		},
		"inventory": func() []string {
			return []string{"plan", pb, "-i", pipePath(t, "[windows]\nlocalhost ansible_connection=local greeting=piped\n")}
		},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			code, out, errs := wsu(t, nil, args()...)
			require.Equal(t, 0, code, out+errs)
			assert.Contains(t, out, "said piped", "the piped value is used, not the default")
		})
	}
}

// TestValidateReadsPipedVarFile: validate checks the values a piped var
// file gives, and does not say Success over one it did not read.
func TestValidateReadsPipedVarFile(t *testing.T) {
	pb := filepath.Join(t.TempDir(), "p.hcl")
	require.NoError(t, os.WriteFile(pb, []byte(pipeGreeting), 0o644))
	for _, args := range [][]string{
		{"validate", pb, "--var-file", pipePath(t, `greeting = "far too long a greeting"`)},
		{"plan", pb, "--syntax-check", "-e", "@" + pipePath(t, `greeting = "far too long a greeting"`)},
	} {
		code, out, errs := wsu(t, nil, args...)
		assert.Equal(t, 1, code, out+errs)
		assert.Contains(t, errs, "The greeting is too long.")
		assert.NotContains(t, out, "Success")
	}
}

// wsuProcess runs this package's main as its own process (TestMain), its
// address space capped so that reading without bound fails fast instead
// of exhausting the machine.
func wsuProcess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", `ulimit -v 4000000; exec "$0" "$@"`, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WSU_TEST_RUN_MAIN=1", "WSU_TEST_ARGS="+strings.Join(args, " "))
	return cmd
}

// TestDevZeroIsBounded: /dev/zero as a playbook, var file, inventory, join
// configuration or plan is refused at the size bound: exit 1, a message
// naming it, no out-of-memory crash.
func TestDevZeroIsBounded(t *testing.T) {
	pb := filepath.Join(t.TempDir(), "p.hcl")
	require.NoError(t, os.WriteFile(pb, []byte(pipeGreeting), 0o644))
	for _, args := range []string{
		"plan /dev/zero --local",
		"validate /dev/zero",
		"apply /dev/zero --local --auto-approve",
		"plan " + pb + " --local --var-file /dev/zero",
		"plan " + pb + " --local -e @/dev/zero",
		"validate " + pb + " --var-file /dev/zero",
		"plan " + pb + " -i /dev/zero",
		"plan " + pb + " --local --join-config /dev/zero",
	} {
		t.Run(args, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := wsuProcess(t, strings.Fields(args)...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, stderr.String())
			assert.Equal(t, 1, exit.ExitCode(), stderr.String())
			assert.Contains(t, oneLine(stderr.String()), "/dev/zero is larger than 2097152 bytes")
			assert.NotContains(t, stderr.String(), "goroutine")
		})
	}
	code, out, errs := wsu(t, nil, "show", "/dev/zero")
	assert.Equal(t, 1, code)
	assert.Contains(t, out+errs, "/dev/zero is not a saved plan")
}

// TestFIFOWithoutWriterEndsOnSignal: a run waiting for a FIFO nothing
// writes to ends at SIGTERM or Ctrl-C, exit 1, saying what it waited for.
func TestFIFOWithoutWriterEndsOnSignal(t *testing.T) {
	dir := t.TempDir()
	pb := filepath.Join(dir, "p.hcl")
	require.NoError(t, os.WriteFile(pb, []byte(pipeGreeting), 0o644))
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, c := range []struct {
		args string
		sig  syscall.Signal
	}{
		{"plan " + pb + " --local --var-file " + fifo, syscall.SIGTERM},
		{"plan " + fifo + " --local", syscall.SIGINT},
		{"validate " + pb + " -i " + fifo, syscall.SIGTERM},
		{"show " + fifo, syscall.SIGINT},
	} {
		t.Run(c.args, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := wsuProcess(t, strings.Fields(c.args)...)
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			require.Eventually(t, func() bool { return waitsForWriter(cmd.Process.Pid) }, time.Minute, 20*time.Millisecond,
				"wsu opens the FIFO and waits for a writer")
			require.NoError(t, cmd.Process.Signal(c.sig))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			select {
			case err := <-done:
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, stderr.String())
				assert.Equal(t, 1, exit.ExitCode(), stderr.String())
				assert.Contains(t, oneLine(stderr.String()), "interrupted while waiting to read "+fifo)
			case <-ctx.Done():
				t.Fatalf("wsu still waits on the FIFO after %v", c.sig)
			}
		})
	}
}

// waitsForWriter: one of pid's threads waits in open(2) for a FIFO's
// writer (the kernel's wait_for_partner).
func waitsForWriter(pid int) bool {
	chans, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "wchan"))
	for _, c := range chans {
		if b, err := os.ReadFile(c); err == nil && string(b) == "wait_for_partner" {
			return true
		}
	}
	return false
}
