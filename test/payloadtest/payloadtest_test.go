//go:build linux

package payloadtest

import (
	"bytes"
	"context"
	"encoding/json"
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

	"github.com/wsu-project/wsu/payload"
	winetest "github.com/wsu-project/wsu/test/wine"
)

func build(t *testing.T, opts Options) (string, *payload.Manifest) {
	t.Helper()
	dir := t.TempDir()
	start := time.Now()
	m, err := Build(context.Background(), dir, opts)
	require.NoError(t, err)
	t.Logf("Build(GOOS %q, %d sizes) in %s", opts.GOOS, len(opts.Sizes), time.Since(start).Round(time.Millisecond))
	return dir, m
}

func byName(m *payload.Manifest) map[string]payload.Component {
	out := map[string]payload.Component{}
	for _, c := range m.Components {
		out[c.Name] = c
	}
	return out
}

func verified(t *testing.T, dir string) *payload.Manifest {
	t.Helper()
	m, err := payload.Load(dir)
	require.NoError(t, err)
	problems, err := payload.Verify(dir, m)
	require.NoError(t, err)
	require.Empty(t, problems)
	return m
}

// TestLinuxPayload is the payload the simulated host runs: every
// component, where the playbooks expect it, each file a Linux executable.
func TestLinuxPayload(t *testing.T) {
	dir, m := build(t, Options{})
	assert.Equal(t, m, verified(t, dir))
	assert.Equal(t, DefaultVersion, m.Version)
	assert.Equal(t, Names(), func() (n []string) {
		for _, c := range m.Components {
			n = append(n, c.Name)
		}
		return
	}())
	want := map[string]struct{ dest, service string }{
		"kubelet":                   {`C:\k\kubelet.exe`, "kubelet"},
		"kube-proxy":                {`C:\k\kube-proxy.exe`, "kube-proxy"},
		"kube-log-runner":           {`C:\k\kube-log-runner.exe`, "kubelet"},
		"hybrid-overlay-node":       {`C:\k\hybrid-overlay-node.exe`, "hybrid-overlay-node"},
		"csi-proxy":                 {`C:\k\csi-proxy.exe`, "csi-proxy"},
		"windows_exporter":          {`C:\k\windows_exporter.exe`, "windows_exporter"},
		"win-overlay":               {`C:\k\cni\win-overlay.exe`, ""},
		"win-bridge":                {`C:\k\cni\win-bridge.exe`, ""},
		"host-local":                {`C:\k\cni\host-local.exe`, ""},
		"containerd":                {`C:\k\containerd\containerd.exe`, "containerd"},
		"containerd-shim-runhcs-v1": {`C:\k\containerd\containerd-shim-runhcs-v1.exe`, ""},
		"azure-cloud-node-manager":  {`C:\k\azure-cloud-node-manager.exe`, "cloud-node-manager"},
	}
	require.Len(t, m.Components, len(want))
	shas := map[string]string{}
	for _, c := range m.Components {
		assert.Equal(t, want[c.Name].dest, c.Destination, c.Name)
		assert.Equal(t, want[c.Name].service, c.Service, c.Name)
		assert.Equal(t, c.Name == "containerd" || c.Name == "containerd-shim-runhcs-v1", c.Runtime, c.Name)
		assert.NotEmpty(t, c.Version, c.Name)
		assert.Empty(t, shas[c.SHA256], "%s has the same bytes as %s", c.Name, shas[c.SHA256])
		shas[c.SHA256] = c.Name
		head := make([]byte, 4)
		f, err := os.Open(filepath.Join(dir, c.File))
		require.NoError(t, err)
		_, err = f.Read(head)
		f.Close()
		require.NoError(t, err)
		assert.Equal(t, "\x7fELF", string(head), c.Name)
	}
	// manifest.json is what the playbooks decode: runtime and service keys.
	raw, err := os.ReadFile(filepath.Join(dir, payload.ManifestFile))
	require.NoError(t, err)
	var doc struct {
		Components []map[string]any `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	assert.Equal(t, true, doc.Components[9]["runtime"])
	assert.Equal(t, "containerd", doc.Components[9]["service"])

	// Same inputs, same bytes: a second payload needs no copying.
	_, again := build(t, Options{})
	assert.Equal(t, m, again)
}

func TestBump(t *testing.T) {
	_, before := build(t, Options{GOOS: "windows"})
	dir, after := build(t, Options{GOOS: "windows", Version: "1.1.0", Bump: map[string]string{KubeProxy: "v1.31.5"}})
	verified(t, dir)
	assert.Equal(t, "1.1.0", after.Version)
	b, a := byName(before), byName(after)
	var changed []string
	for name, c := range a {
		if c != b[name] {
			changed = append(changed, name)
		}
	}
	assert.Equal(t, []string{KubeProxy}, changed)
	assert.Equal(t, "v1.31.5", a[KubeProxy].Version)
	assert.NotEqual(t, b[KubeProxy].SHA256, a[KubeProxy].SHA256)
	assert.Equal(t, func() payload.Component {
		c := b[KubeProxy]
		c.Version, c.SHA256 = a[KubeProxy].Version, a[KubeProxy].SHA256
		return c
	}(), a[KubeProxy])
}

func TestOptionErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{GOOS: "darwin"}, `GOOS "darwin"`},
		{Options{Bump: map[string]string{"kubelet.exe": "v2"}}, `Bump: no component "kubelet.exe"`},
		{Options{Sizes: map[string]int64{"cni": 1}}, `Sizes: no component "cni"`},
		{Options{GOOS: "windows", Sizes: map[string]int64{HostLocal: 1000}}, "host-local: size 1000 is below the stand-in binary"},
	} {
		_, err := Build(ctx, t.TempDir(), tc.opts)
		require.Error(t, err, "%+v", tc.opts)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestMissingStandin(t *testing.T) {
	_, err := standins(context.Background(), "linux", map[string]bool{"service": true, "no-such-standin": true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the stand-in package github.com/wsu-project/wsu/test/standin/no-such-standin does not exist")
	// What exists was built anyway, and is cached.
	cache.mu.Lock()
	_, ok := cache.bins["linux/service"]
	cache.mu.Unlock()
	assert.True(t, ok)
}

// TestPaddedLinuxRuns pads the service stand-in and runs it as the
// simulated host would: bytes after the ELF image do not matter.
func TestPaddedLinuxRuns(t *testing.T) {
	dir, m := build(t, Options{Sizes: map[string]int64{KubeProxy: 8 << 20, WinOverlay: 5 << 20}})
	fi, err := os.Stat(filepath.Join(dir, "kube-proxy.exe"))
	require.NoError(t, err)
	assert.Equal(t, int64(8<<20), fi.Size())
	fi, err = os.Stat(filepath.Join(dir, "win-overlay.exe"))
	require.NoError(t, err)
	assert.Equal(t, int64(5<<20), fi.Size())
	assert.Equal(t, m, verified(t, dir))

	conf := filepath.Join(t.TempDir(), "kube-proxy.conf")
	require.NoError(t, os.WriteFile(conf, []byte("kind: KubeProxyConfiguration\n"), 0o644))
	cmd := exec.Command(filepath.Join(dir, "kube-proxy.exe"), "--config", conf, "--windows-service")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return strings.Contains(out.String(), " started, pid ") },
		20*time.Second, 20*time.Millisecond, "%s", &out)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), out.String())
}

// TestPaddedWindowsRuns runs a padded Windows payload file under Wine:
// bytes after the PE image do not matter either.
func TestPaddedWindowsRuns(t *testing.T) {
	dir, _ := build(t, Options{GOOS: "windows", Sizes: map[string]int64{CSIProxy: 6 << 20}})
	start := time.Now()
	p := winetest.New(t)
	t.Logf("Wine prefix in %s", time.Since(start).Round(time.Millisecond))
	k := filepath.Join(p.DriveC(), "k")
	require.NoError(t, os.MkdirAll(k, 0o755))
	b, err := os.ReadFile(filepath.Join(dir, "csi-proxy.exe"))
	require.NoError(t, err)
	require.Len(t, b, 6<<20)
	require.NoError(t, os.WriteFile(filepath.Join(k, "csi-proxy.exe"), b, 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := p.CommandContext(ctx, `C:\k\csi-proxy.exe`, "-windows-service", "--v=2")
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	marker := filepath.Join(k, "csi-proxy.exe.standin.log")
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(marker)
		return bytes.Contains(b, []byte(`"event":"console"`)) && bytes.Contains(b, []byte(`"args":["-windows-service","--v=2"]`))
	}, 60*time.Second, 100*time.Millisecond)
	t.Logf("running under Wine after %s", time.Since(start).Round(time.Millisecond))
}

// TestRealisticSizes is the benchmark payload: about 300 MB, written and
// verified in seconds.
func TestRealisticSizes(t *testing.T) {
	dir, m := build(t, Options{GOOS: "windows", Sizes: RealisticSizes})
	var total int64
	for _, c := range m.Components {
		fi, err := os.Stat(filepath.Join(dir, c.File))
		require.NoError(t, err)
		if want, ok := RealisticSizes[c.Name]; ok {
			assert.Equal(t, want, fi.Size(), c.Name)
		}
		total += fi.Size()
	}
	t.Logf("total %d MiB", total>>20)
	assert.InDelta(t, 300<<20, total, 30<<20)
	start := time.Now()
	verified(t, dir)
	t.Logf("verified in %s", time.Since(start).Round(time.Millisecond))
}

func TestWriteComponentErrors(t *testing.T) {
	_, err := writeComponent(filepath.Join(t.TempDir(), "x.exe"), "/nonexistent/bin", "x", "v1", 0)
	assert.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

// TestSweep: the stand-in directories of exited processes go, this
// process's stays.
func TestSweep(t *testing.T) {
	_, err := standins(context.Background(), "windows", map[string]bool{"service": true})
	require.NoError(t, err)
	dead, err := os.MkdirTemp("", procDirPattern)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dead, "lock"), nil, 0o644))
	sweep()
	_, err = os.Stat(dead)
	assert.True(t, os.IsNotExist(err), "the unlocked directory should be gone: %v", err)
	_, err = os.Stat(filepath.Join(cache.dir, "windows", "service.exe"))
	assert.NoError(t, err, "this process's directory must stay")
}

// TestRealisticSizesFitStandins keeps the benchmarks' sizes above the
// stand-in binaries: a dependency that grows a stand-in past a component's
// realistic size fails here, not in a 300 MB benchmark run.
func TestRealisticSizesFitStandins(t *testing.T) {
	for _, goos := range []string{"linux", "windows"} {
		pkgs := map[string]bool{}
		for _, c := range components {
			pkgs[standinFor(c, goos)] = true
		}
		bins, err := standins(context.Background(), goos, pkgs)
		require.NoError(t, err)
		for _, c := range components {
			size, ok := RealisticSizes[c.name]
			if !ok {
				continue
			}
			fi, err := os.Stat(bins[standinFor(c, goos)])
			require.NoError(t, err)
			used := fi.Size() + int64(len(trailer(c.name, c.version)))
			assert.LessOrEqual(t, used, size, "%s/%s: the %s stand-in and trailer are %d bytes, above RealisticSizes' %d",
				goos, c.name, standinFor(c, goos), used, size)
		}
	}
}
