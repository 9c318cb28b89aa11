//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	winetest "github.com/wsu-project/wsu/test/wine"
)

type event struct {
	Event string   `json:"event"`
	PID   int      `json:"pid"`
	Args  []string `json:"args"`
}

func events(t *testing.T, marker string) []event {
	t.Helper()
	f, err := os.Open(marker)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), sc.Text())
		out = append(out, e)
	}
	return out
}

func hasEvent(es []event, prefix string) bool {
	for _, e := range es {
		if strings.HasPrefix(e.Event, prefix) {
			return true
		}
	}
	return false
}

// TestWine runs the Windows build under Wine's service control manager
// with kube-proxy's real command line, then in the foreground.
func TestWine(t *testing.T) {
	exe := binary(t, "windows")
	p := winetest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k := filepath.Join(p.DriveC(), "k")
	require.NoError(t, os.MkdirAll(k, 0o755))
	b, err := os.ReadFile(exe)
	require.NoError(t, err)
	for _, name := range []string{"kube-proxy.exe", "csi-proxy.exe"} {
		require.NoError(t, os.WriteFile(filepath.Join(k, name), b, 0o755))
	}
	marker := filepath.Join(k, "kube-proxy.exe.standin.log")
	sc := func(args ...string) string {
		out, err := p.Output(ctx, nil, "sc.exe", args...)
		require.NoError(t, err, "sc %v: %s", args, out)
		return string(out)
	}
	sc("create", "kube-proxy", "binPath=", `C:\k\kube-proxy.exe --config C:\k\kube-proxy.conf --windows-service`)

	// No config yet: the service reports the failure and stops.
	p.Output(ctx, nil, "sc.exe", "start", "kube-proxy") // fails or not depending on timing
	require.Eventually(t, func() bool { return hasEvent(events(t, marker), "error: cannot load config") },
		30*time.Second, 100*time.Millisecond, "events: %v", events(t, marker))
	require.Eventually(t, func() bool { return strings.Contains(sc("query", "kube-proxy"), "STOPPED") },
		30*time.Second, 200*time.Millisecond)

	require.NoError(t, os.WriteFile(filepath.Join(k, "kube-proxy.conf"), []byte("kind: KubeProxyConfiguration\n"), 0o644))
	sc("start", "kube-proxy")
	require.Eventually(t, func() bool { return hasEvent(events(t, marker), "start") },
		30*time.Second, 100*time.Millisecond, "events: %v", events(t, marker))
	es := events(t, marker)
	assert.Equal(t, []string{"--config", `C:\k\kube-proxy.conf`, "--windows-service"}, es[len(es)-1].Args)
	sc("stop", "kube-proxy")
	require.Eventually(t, func() bool { return hasEvent(events(t, marker)[len(es):], "exit") },
		30*time.Second, 100*time.Millisecond, "events: %v", events(t, marker))
	assert.True(t, hasEvent(events(t, marker)[len(es):], "stop"))

	// Started by hand there is no service controller to connect to: it
	// runs in the foreground.
	csi := filepath.Join(k, "csi-proxy.exe.standin.log")
	args := []string{`-log_file=C:\var\log\csi-proxy\csi-proxy.log`, "-logtostderr=false", "-windows-service", "--v=2"}
	cmd := p.CommandContext(ctx, `C:\k\csi-proxy.exe`, args...)
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	require.Eventually(t, func() bool { return hasEvent(events(t, csi), "console") },
		30*time.Second, 100*time.Millisecond, "events: %v", events(t, csi))
	assert.Equal(t, args, events(t, csi)[0].Args)
}
