//go:build !windows

package windows_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/host"
)

var wsuExe struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildWsu builds the real node agent, wsu-agent.exe (cmd/wsu-agent), as
// the transports deploy it.
func buildWsu(t *testing.T) string {
	t.Helper()
	dir := buildExes(t)
	wsuExe.once.Do(func() {
		wsuExe.path = filepath.Join(dir, "wsu-agent.exe")
		cmd := exec.Command("go", "build", "-o", wsuExe.path, "../../../cmd/wsu-agent")
		cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
		wsuExe.out, wsuExe.err = cmd.CombinedOutput()
	})
	require.NoError(t, wsuExe.err, "build wsu-agent.exe: %s", wsuExe.out)
	return wsuExe.path
}

// TestWineAgent runs `wsu-agent.exe agent` under Wine and drives the Windows
// platform through the real RPC client, as a play would.
func TestWineAgent(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	wsu := buildWsu(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startAgent(ctx, t, pr, wsu)
	var h host.Host = c
	assert.Equal(t, "windows", c.Hello().Platform, "the native backend names its OS")

	f, err := h.Facts(ctx)
	require.NoError(t, err)
	assert.Equal(t, "windows", f.OS)
	assert.Equal(t, "10.0", f.Version)

	// The preflight's reads: the clock (Wine's is this machine's) and
	// GetDiskFreeSpaceEx for a directory that does not exist yet, which
	// is answered for the drive it would be created on.
	before := time.Now()
	now, err := h.SystemTime(ctx)
	require.NoError(t, err)
	assert.WithinRange(t, now, before.Add(-2*time.Second), time.Now().Add(2*time.Second), "Wine's clock is this machine's")
	ds, err := h.DiskFree(ctx, `C:\k\not yet\there`)
	require.NoError(t, err)
	assert.NotZero(t, ds.Total, "the drive's size")
	assert.LessOrEqual(t, ds.Free, ds.Total)
	_, err = h.DiskFree(ctx, `Q:\nowhere`)
	assert.Error(t, err, "a drive that does not exist")

	// Files, streamed over the RPC.
	data := make([]byte, 2<<20+7)
	rand.Read(data)
	sum := sha256.Sum256(data)
	require.NoError(t, h.MkdirAll(ctx, `C:\k\agent dir`, 0o755))
	path := `C:\k\agent dir\payload.bin`
	require.NoError(t, h.WriteFile(ctx, path, bytes.NewReader(data), 0o644))
	got, err := h.SHA256(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sum[:]), got)
	back, err := h.ReadFile(ctx, path, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, back))
	onDisk, err := os.ReadFile(pr.p.LinuxPath(path))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, onDisk))
	// Chmod on Windows is the read-only attribute: 0444 sets it, anything
	// writable clears it, and Stat reports it as Go does (0444 / 0666).
	require.NoError(t, h.Chmod(ctx, path, 0o444))
	fi, err := h.Stat(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o444), fi.Mode.Perm(), "read-only")
	require.NoError(t, h.Chmod(ctx, path, 0o644))
	fi, err = h.Stat(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o666), fi.Mode.Perm(), "writable again")
	ents, err := h.ReadDir(ctx, `C:\K\AGENT DIR`, 0)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	assert.Equal(t, "payload.bin", ents[0].Name)
	assert.EqualValues(t, len(data), ents[0].Size)
	_, err = h.ReadDir(ctx, `C:\k\agent dir\missing`, 0)
	assert.ErrorIs(t, err, fs.ErrNotExist, "not found survives the RPC")

	// Registry, machine environment, processes.
	require.NoError(t, h.RegistrySet(ctx, `HKLM\SOFTWARE\wsu-agent`, "q", host.RegistryValue{Type: host.RegQWORD, Integer: 42}))
	v, err := h.RegistryGet(ctx, `HKLM\SOFTWARE\wsu-agent`, "q")
	require.NoError(t, err)
	assert.Equal(t, host.RegistryValue{Exists: true, Type: host.RegQWORD, Integer: 42}, v)
	require.NoError(t, h.EnvSet(ctx, "WSU_AGENT_VAR", "via rpc"))
	changed, err := h.PathAdd(ctx, `C:\k`)
	require.NoError(t, err)
	assert.True(t, changed)
	res, err := h.Run(ctx, host.RunRequest{Argv: []string{"cmd.exe", "/c", "echo %WSU_AGENT_VAR%& exit /b 4"}})
	require.NoError(t, err)
	assert.Equal(t, 4, res.ExitCode)
	assert.Equal(t, "via rpc", strings.TrimSpace(string(res.Stdout)))

	// A service lifecycle with the stand-in.
	exe, err := os.ReadFile(pr.winsvc)
	require.NoError(t, err)
	require.NoError(t, h.WriteFile(ctx, `C:\k\agent dir\winsvc.exe`, bytes.NewReader(exe), 0o755))
	marker := `C:\k\agent dir\marker.log`
	cfg := host.ServiceConfig{Name: "wsu-agent-standin", DisplayName: "wsu agent stand-in", Description: "Managed by wsu",
		BinaryPath: `C:\k\agent dir\winsvc.exe`, Args: []string{"-service", "-marker", marker}, StartType: host.StartAutomatic}
	require.NoError(t, h.CreateService(ctx, cfg))
	require.NoError(t, h.StartService(ctx, cfg.Name))
	require.NoError(t, h.WaitService(ctx, cfg.Name, host.ServiceRunning, 20*time.Second))
	info, err := h.QueryService(ctx, cfg.Name)
	require.NoError(t, err)
	assert.Equal(t, cfg, info.Config)
	assert.NotZero(t, info.PID)
	err = h.SetServiceRecovery(ctx, cfg.Name, host.ServiceRecovery{RestartDelays: []time.Duration{time.Second}})
	assert.ErrorIs(t, err, host.ErrNotSupported, "not supported survives the RPC")
	require.NoError(t, h.StopService(ctx, cfg.Name, 20*time.Second))
	require.NoError(t, h.DeleteService(ctx, cfg.Name, 20*time.Second))
	info, err = h.QueryService(ctx, cfg.Name)
	require.NoError(t, err)
	assert.False(t, info.Exists)
	assert.Equal(t, []string{"start", "stop", "exit"}, events(readMarker(t, pr.p.LinuxPath(marker))))

	// TCP probes go through Winsock, which Wine maps to the Linux sockets:
	// a listener here is reachable, a closed port is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, h.DialTCP(ctx, ln.Addr().String(), 10*time.Second))
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	err = h.DialTCP(ctx, closed, 10*time.Second)
	require.Error(t, err, "nothing listens on %s any more", closed)
	assert.Contains(t, err.Error(), closed)
	assert.ErrorIs(t, err, host.ErrUnreachable, "an answer about the port, not a failed agent")

	// net.http through Wine's Winsock: IMDSv2's token exchange, as
	// win_instance_metadata makes it.
	md := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Method+" "+r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
	}))
	defer md.Close()
	resp, err := h.DoHTTP(ctx, host.HTTPRequest{Method: "PUT", URL: md.URL + "/latest/api/token",
		Header: map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"}})
	require.NoError(t, err)
	assert.Equal(t, host.HTTPResponse{Status: 200, Body: []byte("PUT 60")}, resp)
	_, err = h.DoHTTP(ctx, host.HTTPRequest{URL: "http://" + closed + "/"})
	assert.ErrorIs(t, err, host.ErrUnreachable)

	_, err = h.HNSNetworks(ctx)
	assert.ErrorIs(t, err, host.ErrNotSupported)
}

// startAgent starts `wsu.exe agent` in the probe's prefix and dials it; the
// agent is stopped (by closing its input) when the test ends.
func startAgent(ctx context.Context, t *testing.T, pr *probe, wsu string) *client.Client {
	t.Helper()
	cmd := pr.p.Command(wsu, "agent")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	// A file, not a pipe: the processes the agent starts inherit it.
	stderr, err := os.Create(filepath.Join(t.TempDir(), "agent.stderr"))
	require.NoError(t, err)
	defer stderr.Close()
	cmd.Stderr = stderr
	require.NoError(t, cmd.Start())
	var c *client.Client
	t.Cleanup(func() {
		if c != nil {
			c.Close()
		}
		stdin.Close() // the agent exits when its input closes
		stopped := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
		defer stopped.Stop()
		if err := cmd.Wait(); err != nil {
			t.Errorf("agent did not exit cleanly when its input closed: %v", err)
		}
		if b, _ := os.ReadFile(stderr.Name()); len(b) > 0 {
			t.Logf("agent stderr:\n%s", b)
		}
	})
	c, err = client.Dial(ctx, stdout, stdin)
	require.NoError(t, err)
	return c
}
