//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
)

var built struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// binary builds this stand-in for goos once per test run.
func binary(t *testing.T, goos string) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "service-standin-")
	})
	require.NoError(t, built.err)
	out := filepath.Join(built.dir, goos, "service")
	if goos == "windows" {
		out += ".exe"
	}
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build (GOOS=%s): %s", goos, b)
	return out
}

// started runs the stand-in and waits for its start line.
func started(t *testing.T, cmd *exec.Cmd) *bytes.Buffer {
	t.Helper()
	var out bytes.Buffer
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	pw.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "stand-in exited before starting:\n%s", out.String())
			out.WriteString(l + "\n")
			if strings.Contains(l, " started, pid ") {
				go func() { // keep draining so the child never blocks
					for l := range lines {
						out.WriteString(l + "\n")
					}
				}()
				return &out
			}
		case <-timeout:
			cmd.Process.Kill()
			t.Fatalf("no start line in 30s:\n%s", out.String())
		}
	}
}

func TestRunsUntilSIGTERM(t *testing.T) {
	exe := binary(t, "linux")
	dir := t.TempDir()
	conf := filepath.Join(dir, "kube-proxy.conf")
	require.NoError(t, os.WriteFile(conf, []byte("kind: KubeProxyConfiguration\n"), 0o644))
	logFile := filepath.Join(dir, "csi-proxy.log")
	args := []string{"--config", conf, "--windows-service", "-log_file=" + logFile, "--v=2"}
	cmd := exec.Command(exe, args...)
	out := started(t, cmd)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "exit status after SIGTERM:\n%s", out)
	assert.Contains(t, out.String(), `argv ["--config" "`+conf+`" "--windows-service" "-log_file=`+logFile+`" "--v=2"]`)
	assert.Contains(t, out.String(), "stopping on terminated")
	logged, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.Contains(t, string(logged), " started, pid ")
}

func TestSIGINT(t *testing.T) {
	cmd := exec.Command(binary(t, "linux"), "-windows-service")
	started(t, cmd)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait())
}

func TestMissingConfig(t *testing.T) {
	for _, form := range [][]string{
		{"--config", "/nonexistent/kube-proxy.conf", "--windows-service"},
		{"--config=/nonexistent/kube-proxy.conf"},
		{"-config", "/nonexistent/kube-proxy.conf"},
	} {
		cmd := exec.Command(binary(t, "linux"), form...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v: want exit status 1, got %v:\n%s", form, err, out)
		assert.Equal(t, 1, exit.ExitCode(), "%v", form)
		assert.Contains(t, string(out), "cannot load config /nonexistent/kube-proxy.conf", "%v", form)
	}
	out, err := exec.Command(binary(t, "linux"), "--config").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "flag needs an argument: --config")
}

// TestAsSimulatedService runs the stand-in the way the playbooks do: as
// the simulated host's services, with Windows paths in the arguments.
func TestAsSimulatedService(t *testing.T) {
	ctx := context.Background()
	h, err := sim.New(t.TempDir(), sim.Options{})
	require.NoError(t, err)
	exe, err := os.ReadFile(binary(t, "linux"))
	require.NoError(t, err)
	for _, d := range []string{`C:\k\containerd`, `C:\var\log\containerd`} {
		require.NoError(t, h.MkdirAll(ctx, d, 0o755))
	}
	for _, p := range []string{`C:\k\kube-proxy.exe`, `C:\k\containerd\containerd.exe`} {
		require.NoError(t, h.WriteFile(ctx, p, bytes.NewReader(exe), 0o755))
	}
	require.NoError(t, h.WriteFile(ctx, `C:\k\containerd\containerd_conf.toml`, strings.NewReader("version = 2\n"), 0o644))

	containerd := host.ServiceConfig{Name: "containerd", BinaryPath: `C:\k\containerd\containerd.exe`,
		Args: []string{"--config", `C:\k\containerd\containerd_conf.toml`, "--log-file", `C:\var\log\containerd\containerd.log`, "--run-service", "--log-level", "info"}}
	// The config is not there yet: kube-proxy must fail as the real one does.
	kubeProxy := host.ServiceConfig{Name: "kube-proxy", BinaryPath: `C:\k\kube-proxy.exe`,
		Args: []string{"--config", `C:\k\kube-proxy.conf`, "--windows-service"}}
	require.NoError(t, h.CreateService(ctx, containerd))
	require.NoError(t, h.CreateService(ctx, kubeProxy))
	require.NoError(t, h.StartService(ctx, "containerd"))
	require.NoError(t, h.StartService(ctx, "kube-proxy"))

	simLog := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(h.Root(), "logs", name+".log"))
		return string(b)
	}
	require.Eventually(t, func() bool {
		info, err := h.QueryService(ctx, "kube-proxy")
		return err == nil && info.State == host.ServiceStopped
	}, 20*time.Second, 50*time.Millisecond, "kube-proxy without its config should exit:\n%s", simLog("kube-proxy"))
	assert.Contains(t, simLog("kube-proxy"), `error: cannot load config C:\k\kube-proxy.conf`)

	require.Eventually(t, func() bool { return strings.Contains(simLog("containerd"), " started, pid ") },
		20*time.Second, 50*time.Millisecond, simLog("containerd"))
	info, err := h.QueryService(ctx, "containerd")
	require.NoError(t, err)
	assert.Equal(t, host.ServiceRunning, info.State)
	assert.Contains(t, simLog("containerd"), `"--config" "C:\\k\\containerd\\containerd_conf.toml"`)
	lp, err := h.LocalPath(`C:\var\log\containerd\containerd.log`)
	require.NoError(t, err)
	logged, err := os.ReadFile(lp)
	require.NoError(t, err)
	assert.Contains(t, string(logged), "containerd (TEST STAND-IN): started")

	require.NoError(t, h.WriteFile(ctx, `C:\k\kube-proxy.conf`, strings.NewReader("kind: KubeProxyConfiguration\n"), 0o644))
	require.NoError(t, h.StartService(ctx, "kube-proxy"))
	require.Eventually(t, func() bool { return strings.Contains(simLog("kube-proxy"), " started, pid ") },
		20*time.Second, 50*time.Millisecond, simLog("kube-proxy"))

	for _, name := range []string{"kube-proxy", "containerd"} {
		require.NoError(t, h.StopService(ctx, name, 10*time.Second))
		assert.Contains(t, simLog(name), "stopping on terminated", name)
	}
}

func TestWindowsBuild(t *testing.T) {
	exe := binary(t, "windows")
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	assert.Equal(t, "MZ", string(b[:2]), "a PE executable")
}
