package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCLILinksNoController: the wsu CLI links none of the cluster face's
// manager (its metrics filters pull k8s.io/apiserver and cel-go), which
// would cost every CLI process start-up time and memory: wsu-controller
// is a binary of its own.
func TestCLILinksNoController(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		switch {
		case p == "sigs.k8s.io/controller-runtime/pkg/manager", p == "k8s.io/apiserver", strings.HasPrefix(p, "k8s.io/apiserver/"),
			p == "github.com/wsu-project/wsu/controller", p == "github.com/wsu-project/wsu/controller/run":
			bad = append(bad, p)
		}
	}
	assert.Empty(t, bad, "cmd/wsu links the cluster face")
	assert.Contains(t, string(out), "github.com/wsu-project/wsu/controller/approval\n", "wsu approve's package is linked (the list is real)")
}

// TestControllerForwards: `wsu controller ARGS` runs the wsu-controller
// beside wsu with ARGS, its output and exit code kept; without one beside
// it or on PATH, wsu says which binary is missing and how to get it, and
// fails.
func TestControllerForwards(t *testing.T) {
	dir := t.TempDir()
	for _, b := range []struct{ out, pkg string }{{"wsu", "."}, {"wsu-controller", "../wsu-controller"}} {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		out, err := build.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	run := func(bin string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			require.NoError(t, err)
		}
		return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
	}
	stdout, stderr, code := run(filepath.Join(dir, "wsu"), "controller", "--help")
	assert.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "wsu-controller [flags]")
	assert.Contains(t, stdout, "--run-mode", "wsu-controller's own options")

	_, wantErr, want := run(filepath.Join(dir, "wsu-controller"), "--no-such-option")
	_, gotErr, got := run(filepath.Join(dir, "wsu"), "controller", "--no-such-option")
	assert.NotEqual(t, 0, want)
	assert.Equal(t, want, got, "the exit code is wsu-controller's")
	assert.Equal(t, wantErr, gotErr, "and so is its output")

	alone := t.TempDir()
	data, err := os.ReadFile(filepath.Join(dir, "wsu"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(alone, "wsu"), data, 0o755))
	_, stderr, code = run(filepath.Join(alone, "wsu"), "controller", "--help")
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "wsu controller runs wsu-controller")
	assert.Contains(t, stderr, filepath.Join(alone, "wsu-controller"), "where it was looked for")
	assert.Contains(t, stderr, "make build builds both")
}
