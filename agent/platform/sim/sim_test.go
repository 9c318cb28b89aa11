package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

// newHost opens a simulated host on a fresh root and kills whatever real
// processes the test leaves running in it.
func newHost(t *testing.T) *Host {
	t.Helper()
	h, err := New(t.TempDir(), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Shutdown(context.Background())) })
	return h
}

// writeFile writes through the host, parent directories first, as a
// playbook would.
func writeFile(t *testing.T, h *Host, path, content string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, h.MkdirAll(ctx, path[:strings.LastIndexAny(path, `\/`)], 0o755))
	require.NoError(t, h.WriteFile(ctx, path, strings.NewReader(content), 0o644))
}

// gone reports whether a real pid has exited (a zombie has).
func gone(pid int) bool {
	_, running, err := procStat(pid)
	return err != nil || !running
}

func TestFacts(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want host.Facts
	}{
		{"defaults", Options{}, host.Facts{
			OS: "windows", Platform: "windows-server-sim", Version: "10.0.20348", Build: "20348",
			Hostname: "sim-host", FQDN: "sim-host.local", Architecture: "amd64", IPv4: "127.0.0.1",
		}},
		{"options", Options{Hostname: "win1", FQDN: "win1.example.com", IPv4: "10.0.0.5"}, host.Facts{
			OS: "windows", Platform: "windows-server-sim", Version: "10.0.20348", Build: "20348",
			Hostname: "win1", FQDN: "win1.example.com", Architecture: "amd64", IPv4: "10.0.0.5",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := New(t.TempDir(), tt.opts)
			require.NoError(t, err)
			got, err := h.Facts(context.Background())
			require.NoError(t, err)
			bt, err := time.Parse(time.RFC3339Nano, got.BootTime)
			require.NoError(t, err, "boot time %q", got.BootTime)
			assert.False(t, bt.IsZero())
			got.BootTime = ""
			assert.Equal(t, tt.want, got)
			assert.NoError(t, h.Close())
		})
	}
}

func TestNewLayout(t *testing.T) {
	root := t.TempDir()
	_, err := New(root, Options{})
	require.NoError(t, err)
	for _, d := range []string{"fs/C/Windows/System32", "state", "logs"} {
		assert.DirExists(t, filepath.Join(root, d))
	}
	_, err = New("", Options{})
	assert.Error(t, err)
}

// TestPersistence opens a second Host on the same root, as a restarted
// agent would, and finds the same host.
func TestPersistence(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	a, err := New(root, Options{})
	require.NoError(t, err)
	t.Cleanup(func() { a.Shutdown(ctx) })

	writeFile(t, a, `C:\k\kubelet.exe`, "kubelet")
	writeFile(t, a, `C:\k\real.exe`, "#!/bin/sh\nsleep 30\n")
	require.NoError(t, a.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\kubelet.exe`}))
	require.NoError(t, a.CreateService(ctx, host.ServiceConfig{Name: "real", BinaryPath: `C:\k\real.exe`}))
	require.NoError(t, a.SetServiceRecovery(ctx, "kubelet", host.ServiceRecovery{RestartDelays: []time.Duration{time.Second}}))
	require.NoError(t, a.StartService(ctx, "kubelet"))
	require.NoError(t, a.StartService(ctx, "real"))
	require.NoError(t, a.RegistrySet(ctx, `HKLM\SOFTWARE\wsu`, "Version", host.RegistryValue{Type: host.RegSZ, String: "1.2.3"}))
	_, err = a.PathAdd(ctx, `C:\k`)
	require.NoError(t, err)
	require.NoError(t, a.AddHNSNetwork(host.HNSNetwork{Name: "net", Type: "Overlay", Subnets: []string{"10.1.0.0/24"}}))
	ep, err := a.HNSCreateEndpoint(ctx, host.HNSEndpoint{Name: "VIPEndpoint", Network: "net"})
	require.NoError(t, err)
	procs, err := a.ListProcesses(ctx)
	require.NoError(t, err)
	require.NoError(t, a.Close())

	b, err := New(root, Options{})
	require.NoError(t, err)
	got, err := b.ReadFile(ctx, `c:/K/Kubelet.exe`, 0)
	require.NoError(t, err)
	assert.Equal(t, "kubelet", string(got))
	for _, name := range []string{"kubelet", "real"} {
		info, err := b.QueryService(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, host.ServiceRunning, info.State, name)
	}
	rec, err := b.ServiceRecovery("kubelet")
	require.NoError(t, err)
	assert.Equal(t, []time.Duration{time.Second}, rec.RestartDelays)
	v, err := b.RegistryGet(ctx, `HKEY_LOCAL_MACHINE\software\WSU`, "version")
	require.NoError(t, err)
	assert.Equal(t, "1.2.3", v.String)
	path, _, err := b.EnvGet(ctx, "PATH")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(path, `;C:\k`))
	eps, err := b.HNSEndpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, []host.HNSEndpoint{ep}, eps)
	procs2, err := b.ListProcesses(ctx)
	require.NoError(t, err)
	assert.Equal(t, procs, procs2)
	// The second agent can stop what the first one started.
	require.NoError(t, b.StopService(ctx, "real", 10*time.Second))
}

// TestConcurrentHosts has two agents on one root edit the same table at
// once; the lock file keeps every change.
func TestConcurrentHosts(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	var hosts []*Host
	for range 2 {
		h, err := New(root, Options{})
		require.NoError(t, err)
		hosts = append(hosts, h)
	}
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			for j := range 20 {
				_, err := h.PathAdd(ctx, fmt.Sprintf(`C:\dir-%d-%d`, i, j))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	path, _, err := hosts[0].EnvGet(ctx, "Path")
	require.NoError(t, err)
	entries := strings.Split(path, ";")
	for i := range 2 {
		for j := range 20 {
			assert.Contains(t, entries, fmt.Sprintf(`C:\dir-%d-%d`, i, j))
		}
	}
}
