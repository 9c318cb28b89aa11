package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/test/standin"
)

// child is the command kube-log-runner runs: it reports on stdout and
// stderr, then exits 7 on SIGTERM, or with its first argument at once.
const child = `#!/bin/sh
printf 'out: %s\n' "$*"
printf 'err: %s\n' "$*" >&2
[ -n "$1" ] && exit "$1"
trap 'echo "child got TERM"; exit 7' TERM
while :; do sleep 0.05; done
`

func TestLogRunner(t *testing.T) {
	ctx := context.Background()
	bins, err := standin.Build(ctx, t.TempDir(), "", "logrunner")
	require.NoError(t, err)
	h, err := sim.New(t.TempDir(), sim.Options{})
	require.NoError(t, err)
	local := func(p string) string {
		lp, err := h.LocalPath(p)
		require.NoError(t, err)
		return lp
	}
	require.NoError(t, os.MkdirAll(local(`C:\k`), 0o755))
	require.NoError(t, os.WriteFile(local(`C:\k\child.exe`), []byte(child), 0o755))
	require.NoError(t, os.MkdirAll(local(`C:\var\log\child`), 0o755))
	logFile := local(`C:\var\log\child\child.log`)
	runner := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bins["logrunner"], args...)
		cmd.Env = append(os.Environ(), sim.EnvRoot+"="+h.Root())
		return cmd
	}

	t.Run("exit code and output", func(t *testing.T) {
		cmd := runner(`-log-file=C:\var\log\child\child.log`, `C:\k\child.exe`, "3", `C:\not\translated`)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", out)
		assert.Equal(t, 3, exit.ExitCode(), "the command's exit code")
		b, err := os.ReadFile(logFile)
		require.NoError(t, err)
		assert.Contains(t, string(b), `out: 3 C:\not\translated`, "arguments go untranslated")
		assert.Contains(t, string(b), `err: 3`, "stderr goes to the log too")
		assert.NotContains(t, string(out), "out: 3", "nothing of the command's on the runner's own output")
	})

	t.Run("appends", func(t *testing.T) {
		require.NoError(t, runner(`-log-file=C:\var\log\child\child.log`, "-redirect-stderr=false", `C:\k\child.exe`, "0").Run())
		b, err := os.ReadFile(logFile)
		require.NoError(t, err)
		assert.Equal(t, 2, strings.Count(string(b), "out: "), "the earlier run's output stays")
		assert.Equal(t, 1, strings.Count(string(b), "err: "), "-redirect-stderr=false leaves stderr alone")
	})

	t.Run("forwards SIGTERM", func(t *testing.T) {
		cmd := runner(`-log-file=C:\var\log\child\child.log`, `C:\k\child.exe`)
		require.NoError(t, cmd.Start())
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		require.Eventually(t, func() bool {
			b, _ := os.ReadFile(logFile)
			return strings.Count(string(b), "out: ") == 3
		}, 10*time.Second, 20*time.Millisecond, "the child started")
		// Only the runner is signalled: the child hears of it from it.
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-done:
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "%v", err)
			assert.Equal(t, 7, exit.ExitCode())
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("the runner did not exit after SIGTERM")
		}
		b, err := os.ReadFile(logFile)
		require.NoError(t, err)
		assert.Contains(t, string(b), "child got TERM")
	})

	t.Run("errors", func(t *testing.T) {
		out, err := runner(`-log-file=C:\var\log\absent\x.log`, `C:\k\child.exe`).CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), "opening the log file", "it does not create the log directory")
		out, err = runner(`C:\k\absent.exe`).CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), `starting C:\k\absent.exe`)
		out, err = runner().CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), "not enough arguments")
		cmd := exec.Command(bins["logrunner"], `C:\k\child.exe`)
		cmd.Env = append(os.Environ(), sim.EnvRoot+"="+filepath.Join(t.TempDir(), "nothing"))
		out, err = cmd.CombinedOutput()
		require.Error(t, err)
		assert.Contains(t, string(out), "holds no simulated host")
	})
}
