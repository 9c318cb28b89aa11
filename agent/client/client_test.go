package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent"
	"github.com/wsu-project/wsu/agent/agenttest"
	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/transport/local"
)

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// crlf rewrites "\n" to "\r\n", like a console in text mode.
type crlf struct{ io.WriteCloser }

func (w crlf) Write(p []byte) (int, error) {
	_, err := w.WriteCloser.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n")))
	return len(p), err
}

// sevenBit drops every byte's high bit, like an old terminal line.
type sevenBit struct{ io.WriteCloser }

func (w sevenBit) Write(p []byte) (int, error) {
	q := make([]byte, len(p))
	for i, b := range p {
		q[i] = b & 0x7f
	}
	_, err := w.WriteCloser.Write(q)
	return len(p), err
}

func wrapCRLF(w io.WriteCloser) io.WriteCloser     { return crlf{w} }
func wrapSevenBit(w io.WriteCloser) io.WriteCloser { return sevenBit{w} }

// A transport that mangles bytes in either direction gets base64 mode, and
// binary content still arrives intact.
func TestMangledTransport(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses the local backend with POSIX tools")
	}
	tests := []struct {
		name              string
		toAgent, toClient func(io.WriteCloser) io.WriteCloser
		want              proto.Mode
	}{
		{"clean", nil, nil, proto.ModeBinary},
		{"crlf both ways", wrapCRLF, wrapCRLF, proto.ModeBase64},
		{"crlf to the client", nil, wrapCRLF, proto.ModeBase64},
		{"crlf to the agent", wrapCRLF, nil, proto.ModeBase64},
		{"seven bit", wrapSevenBit, wrapSevenBit, proto.ModeBase64},
	}
	content := make([]byte, 1<<20+3)
	for i := range content {
		content[i] = byte(i)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := agenttest.Start(t, local.New(), agenttest.Options{ToAgent: tt.toAgent, ToClient: tt.toClient}).Client
			ctx := testCtx(t)
			assert.Equal(t, tt.want, c.Mode())
			require.NotNil(t, c.Hello().Facts)

			path := filepath.Join(t.TempDir(), "bin\nary")
			require.NoError(t, c.WriteFile(ctx, path, bytes.NewReader(content), 0o600))
			got, err := c.ReadFile(ctx, path, 0)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(content, got), "content intact")
			fi, err := c.Stat(ctx, path)
			require.NoError(t, err)
			assert.Equal(t, int64(len(content)), fi.Size)

			res, err := c.Run(ctx, host.RunRequest{Argv: []string{"cat"}, Stdin: []byte("a\r\nb\n\x00\xff")})
			require.NoError(t, err)
			assert.Equal(t, []byte("a\r\nb\n\x00\xff"), res.Stdout)
		})
	}
}

// fakeAgent runs a scripted agent on pipes and dials it.
func fakeAgent(t *testing.T, script func(r *bufio.Reader, w io.Writer)) (*client.Client, error) {
	t.Helper()
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	go func() {
		script(bufio.NewReader(agentIn), agentOut)
		agentOut.Close()
		io.Copy(io.Discard, agentIn)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, clientIn, clientOut)
	if err != nil {
		clientOut.Close()
		clientIn.Close()
	} else {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// greet runs a correct agent start-up and sends hello as the hello frame.
func greet(hello string) func(r *bufio.Reader, w io.Writer) {
	return func(r *bufio.Reader, w io.Writer) {
		mode, err := proto.AgentStart(r, w, "9.9.9", "cafe")
		if err != nil {
			return
		}
		proto.NewEncoder(w, mode).Encode(proto.Frame{Kind: proto.KindHello, Payload: []byte(hello)})
	}
}

func write(s string) func(r *bufio.Reader, w io.Writer) {
	return func(_ *bufio.Reader, w io.Writer) { io.WriteString(w, s) }
}

func TestDialErrors(t *testing.T) {
	other := proto.Protocol + 1 // an agent newer than this client
	tests := []struct {
		name     string
		script   func(r *bufio.Reader, w io.Writer)
		mismatch bool
		want     string
	}{
		{
			name:     "hello speaks another protocol",
			script:   greet(fmt.Sprintf(`{"protocol":%d,"agent_version":"9.9.9","agent_sha256":"cafe","future_field":[1]}`, other)),
			mismatch: true,
			want:     fmt.Sprintf("agent protocol mismatch: the agent (wsu 9.9.9, sha256 cafe) speaks protocol %d, this wsu speaks %d; redeploy the agent", other, proto.Protocol),
		},
		{
			name:     "greeting speaks another protocol",
			script:   write(fmt.Sprintf("WSU-AGENT/%d 10.0.0 beef\nwhatever that protocol says next", other)),
			mismatch: true,
			want:     fmt.Sprintf("speaks protocol %d", other),
		},
		{name: "no agent", script: write("bash: wsu: command not found\n"), want: `without a greeting; it wrote: "bash: wsu: command not found\n"`},
		{name: "silent exit", script: write(""), want: "closed the connection without a greeting"},
		{name: "malformed greeting", script: write("WSU-AGENT/1 onlyversion\n"), want: "malformed agent greeting"},
		{name: "no hello", script: func(r *bufio.Reader, w io.Writer) { proto.AgentStart(r, w, "1", "x") }, want: "reading the hello: unexpected EOF"},
		{name: "hello not json", script: greet("{"), want: "malformed hello"},
		{
			name: "request instead of hello",
			script: func(r *bufio.Reader, w io.Writer) {
				mode, _ := proto.AgentStart(r, w, "1", "x")
				proto.NewEncoder(w, mode).Encode(proto.Frame{Kind: proto.KindRequest, ID: 1})
			},
			want: "expected hello, got a request frame",
		},
		{
			name: "no MODE line",
			script: func(r *bufio.Reader, w io.Writer) {
				fmt.Fprintf(w, "WSU-AGENT/%d 1 x\n\x00\nEND-PROBE\n", proto.Protocol)
				r.ReadString('\n') // the client's line
				io.WriteString(w, "MODE telepathy\n")
			},
			want: `expected a MODE line, got "MODE telepathy"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fakeAgent(t, tt.script)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			var me *proto.MismatchError
			assert.Equal(t, tt.mismatch, errors.As(err, &me))
		})
	}
}

// Noise before the greeting (a banner, a prompt) is skipped.
func TestDialSkipsNoise(t *testing.T) {
	c, err := fakeAgent(t, func(r *bufio.Reader, w io.Writer) {
		io.WriteString(w, "Welcome to Windows Server\r\nPS C:\\> ")
		greet(fmt.Sprintf(`{"protocol":%d,"agent_version":"9.9.9","agent_sha256":"cafe","platform":"sim"}`, proto.Protocol))(r, w)
		io.Copy(io.Discard, r)
	})
	require.NoError(t, err)
	assert.Equal(t, proto.Hello{Protocol: proto.Protocol, AgentVersion: "9.9.9", AgentSHA256: "cafe", Platform: "sim"}, c.Hello())
}

func TestDialCancelled(t *testing.T) {
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	defer agentOut.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := client.Dial(ctx, clientIn, clientOut) // the agent never speaks
	assert.ErrorIs(t, err, context.Canceled)
	_, err = agentIn.Read(make([]byte, 1))
	assert.Equal(t, io.EOF, err, "Dial closed the agent's input")
}

// blockHost blocks Stat until its context ends.
type blockHost struct {
	host.Host
	entered chan struct{}
}

func (h *blockHost) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	h.entered <- struct{}{}
	<-ctx.Done()
	return host.FileInfo{}, ctx.Err()
}

// When the transport dies, the call in flight and every later call say the
// agent connection was lost.
func TestConnectionLost(t *testing.T) {
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	backend := &blockHost{Host: local.New(), entered: make(chan struct{}, 1)}
	served := make(chan error, 1)
	go func() {
		served <- agent.Serve(context.Background(), agentIn, agentOut, backend, agent.ServerInfo{})
	}()
	c, err := client.Dial(testCtx(t), clientIn, clientOut)
	require.NoError(t, err)
	defer c.Close()

	inFlight := make(chan error, 1)
	go func() {
		_, err := c.Stat(testCtx(t), "/")
		inFlight <- err
	}()
	<-backend.entered
	// The link drops: both directions fail.
	agentOut.CloseWithError(errors.New("connection reset by peer"))
	agentIn.CloseWithError(errors.New("connection reset by peer"))

	select {
	case err := <-inFlight:
		assert.ErrorIs(t, err, client.ErrConnectionLost)
		assert.Contains(t, err.Error(), "connection to the host was lost: agent connection lost")
		assert.Contains(t, err.Error(), "connection reset by peer")
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight did not fail")
	}
	_, err = c.SHA256(testCtx(t), "/etc/hostname")
	assert.ErrorIs(t, err, client.ErrConnectionLost)
	select {
	case err := <-served:
		assert.Error(t, err, "Serve saw the broken input")
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// After Close, calls fail with ErrClosed and the agent exits cleanly.
func TestClose(t *testing.T) {
	conn := agenttest.Start(t, local.New(), agenttest.Options{})
	require.NoError(t, conn.Client.Close())
	require.NoError(t, conn.Client.Close(), "Close is idempotent")
	_, err := conn.Client.Stat(testCtx(t), "/")
	assert.ErrorIs(t, err, client.ErrClosed)
	assert.NoError(t, conn.Wait())
}

// An already cancelled context sends nothing.
func TestCallCancelledBefore(t *testing.T) {
	c := agenttest.Start(t, local.New(), agenttest.Options{}).Client
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Stat(ctx, "/")
	assert.Equal(t, context.Canceled, err)
}

func TestRequestTooLarge(t *testing.T) {
	c := agenttest.Start(t, local.New(), agenttest.Options{}).Client
	err := c.EnvSet(testCtx(t), "BIG", strings.Repeat("x", proto.MaxPayload))
	assert.ErrorIs(t, err, proto.ErrInvalid)
	_, err = c.Stat(testCtx(t), "/")
	assert.NoError(t, err, "the connection is unaffected")
}

// fakeHost records the Windows-side calls it gets, arguments in full, and
// answers with fixed values.
type fakeHost struct {
	host.Unsupported
	mu    sync.Mutex
	calls []string
}

func (f *fakeHost) rec(method string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s%#v", method, args))
}

var errMissing = &fs.PathError{Op: "open", Path: `HKLM\SOFTWARE\missing`, Err: fs.ErrNotExist}

func (f *fakeHost) Facts(context.Context) (host.Facts, error) {
	f.rec("Facts")
	return host.Facts{OS: "windows", Platform: "sim", Version: "10.0.20348", Build: "20348", Hostname: "node1", FQDN: "node1.example", Architecture: "amd64", IPv4: "10.0.0.5"}, nil
}
func (f *fakeHost) Stat(context.Context, string) (host.FileInfo, error) { return host.FileInfo{}, nil }
func (f *fakeHost) SHA256(context.Context, string) (string, error)      { return "", nil }
func (f *fakeHost) ReadFile(context.Context, string, int64) ([]byte, error) {
	return nil, nil
}
func (f *fakeHost) WriteFile(context.Context, string, io.Reader, fs.FileMode) error { return nil }
func (f *fakeHost) MkdirAll(context.Context, string, fs.FileMode) error             { return nil }
func (f *fakeHost) Chmod(context.Context, string, fs.FileMode) error                { return nil }
func (f *fakeHost) Remove(context.Context, string, bool) error                      { return nil }

// ReadDir answers with dirEntries whatever the limit: a backend that
// ignores it, for the client's check.
func (f *fakeHost) ReadDir(_ context.Context, path string, limit int) ([]host.DirEntry, error) {
	f.rec("ReadDir", path, limit)
	return dirEntries, nil
}

var dirEntries = []host.DirEntry{
	{Name: "kubelet.exe", Size: 1 << 27, Mode: 0o666, ModTime: time.Date(2024, 5, 1, 12, 0, 0, 123456789, time.UTC)},
	{Name: "log dir", IsDir: true, Mode: fs.ModeDir | 0o777, ModTime: time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)},
	{Name: "ünïcode.txt", Mode: 0o444},
}

func (f *fakeHost) Run(context.Context, host.RunRequest) (host.RunResult, error) {
	return host.RunResult{}, nil
}
func (f *fakeHost) Close() error { return nil }

// DialTCP times out for 10.0.0.9 and connects anywhere else.
func (f *fakeHost) DialTCP(_ context.Context, address string, timeout time.Duration) error {
	f.rec("DialTCP", address, timeout)
	if strings.HasPrefix(address, "10.0.0.9:") {
		return fmt.Errorf("%w: dial tcp %s: i/o timeout", host.ErrUnreachable, address)
	}
	return nil
}

// DoHTTP answers 200 with the request body behind its X-Prefix header's
// value; 10.0.0.9 cannot be reached. It records the request as the agent
// hands it on: normalized.
func (f *fakeHost) DoHTTP(_ context.Context, req host.HTTPRequest) (host.HTTPResponse, error) {
	req, err := req.Normalize()
	f.rec("DoHTTP", req)
	if err != nil {
		return host.HTTPResponse{}, err
	}
	if strings.Contains(req.URL, "//10.0.0.9") {
		return host.HTTPResponse{}, fmt.Errorf("%s %s: %w: i/o timeout", req.Method, req.URL, host.ErrUnreachable)
	}
	body := append([]byte(req.Header["X-Prefix"]), req.Body...)
	if len(body) == 0 {
		body = nil // as JSON's omitempty delivers it
	}
	return host.HTTPResponse{Status: 200, Body: body}, nil
}

// SystemTime is a fixed instant in UTC (nanoseconds kept over the wire).
func (f *fakeHost) SystemTime(context.Context) (time.Time, error) {
	f.rec("SystemTime")
	return time.Date(2026, 11, 25, 16, 0, 0, 123456789, time.UTC), nil
}

// DiskFree knows drive C only.
func (f *fakeHost) DiskFree(_ context.Context, path string) (host.DiskSpace, error) {
	f.rec("DiskFree", path)
	if !strings.HasPrefix(path, `C:\`) {
		return host.DiskSpace{}, &fs.PathError{Op: "GetDiskFreeSpaceEx", Path: path, Err: fs.ErrNotExist}
	}
	return host.DiskSpace{Free: 1<<40 + 7, Total: 1<<41 + 3}, nil
}

func (f *fakeHost) ListProcesses(context.Context) ([]host.Process, error) {
	f.rec("ListProcesses")
	return []host.Process{{PID: 4, Image: "System"}, {PID: 1234, Image: "kubelet.exe"}}, nil
}
func (f *fakeHost) Kill(_ context.Context, pid int, image string) (int, error) {
	f.rec("Kill", pid, image)
	return 2, nil
}
func (f *fakeHost) QueryService(_ context.Context, name string) (host.ServiceInfo, error) {
	f.rec("QueryService", name)
	if name == "missing" {
		return host.ServiceInfo{}, nil
	}
	return host.ServiceInfo{Exists: true, State: host.ServiceRunning, PID: 77, Config: svcConfig}, nil
}
func (f *fakeHost) CreateService(_ context.Context, cfg host.ServiceConfig) error {
	f.rec("CreateService", cfg)
	return nil
}
func (f *fakeHost) UpdateService(_ context.Context, cfg host.ServiceConfig) error {
	f.rec("UpdateService", cfg)
	return nil
}
func (f *fakeHost) SetServiceRecovery(_ context.Context, name string, r host.ServiceRecovery) error {
	f.rec("SetServiceRecovery", name, r)
	return host.NotSupported("service recovery", "wine")
}
func (f *fakeHost) StartService(_ context.Context, name string) error {
	f.rec("StartService", name)
	return nil
}
func (f *fakeHost) StopService(_ context.Context, name string, timeout time.Duration) error {
	f.rec("StopService", name, timeout)
	return nil
}
func (f *fakeHost) DeleteService(_ context.Context, name string, timeout time.Duration) error {
	f.rec("DeleteService", name, timeout)
	return nil
}
func (f *fakeHost) WaitService(_ context.Context, name string, state host.ServiceState, timeout time.Duration) error {
	f.rec("WaitService", name, state, timeout)
	return fmt.Errorf("wait for %s: %w", name, context.DeadlineExceeded)
}
func (f *fakeHost) DependentServices(_ context.Context, name string) ([]host.ServiceStatus, error) {
	f.rec("DependentServices", name)
	if name == "missing" {
		return nil, fmt.Errorf("service %s: %w", name, fs.ErrNotExist)
	}
	return []host.ServiceStatus{{Name: "kube-proxy", State: host.ServiceRunning}, {Name: "kubelet", State: host.ServiceStopped}}, nil
}
func (f *fakeHost) RegistryGet(_ context.Context, key, name string) (host.RegistryValue, error) {
	f.rec("RegistryGet", key, name)
	if strings.HasSuffix(key, "missing") {
		return host.RegistryValue{}, errMissing
	}
	return host.RegistryValue{Exists: true, Type: host.RegMultiSZ, Strings: []string{"a", "", "c d"}}, nil
}
func (f *fakeHost) RegistrySet(_ context.Context, key, name string, v host.RegistryValue) error {
	f.rec("RegistrySet", key, name, v)
	return nil
}
func (f *fakeHost) RegistryDelete(_ context.Context, key, name string) error {
	f.rec("RegistryDelete", key, name)
	return nil
}
func (f *fakeHost) EnvGet(_ context.Context, name string) (string, bool, error) {
	f.rec("EnvGet", name)
	return `C:\k;C:\Windows`, true, nil
}
func (f *fakeHost) EnvSet(_ context.Context, name, value string) error {
	f.rec("EnvSet", name, value)
	return nil
}
func (f *fakeHost) EnvDelete(_ context.Context, name string) error {
	f.rec("EnvDelete", name)
	return nil
}
func (f *fakeHost) PathAdd(_ context.Context, dir string) (bool, error) {
	f.rec("PathAdd", dir)
	return true, nil
}
func (f *fakeHost) PathRemove(_ context.Context, dir string) (bool, error) {
	f.rec("PathRemove", dir)
	return false, nil
}
func (f *fakeHost) HNSNetworks(context.Context) ([]host.HNSNetwork, error) {
	f.rec("HNSNetworks")
	return []host.HNSNetwork{{ID: "n1", Name: "vxlan0", Type: "Overlay", ManagementIP: "10.0.0.5", Subnets: []string{"10.244.1.0/24"}}}, nil
}
func (f *fakeHost) HNSEndpoints(context.Context) ([]host.HNSEndpoint, error) {
	f.rec("HNSEndpoints")
	return nil, nil
}
func (f *fakeHost) HNSCreateEndpoint(_ context.Context, spec host.HNSEndpoint) (host.HNSEndpoint, error) {
	f.rec("HNSCreateEndpoint", spec)
	spec.ID, spec.IP, spec.MAC = "e1", "10.244.1.2", "00-15-5D-00-00-01"
	return spec, nil
}
func (f *fakeHost) HNSDeleteEndpoint(_ context.Context, id string) error {
	f.rec("HNSDeleteEndpoint", id)
	return nil
}
func (f *fakeHost) HNSDeleteNetwork(_ context.Context, id string) error {
	f.rec("HNSDeleteNetwork", id)
	return host.NotSupported("HNS network delete", "wine")
}

var svcConfig = host.ServiceConfig{
	Name: "kubelet", DisplayName: "Kubelet", Description: "Kubernetes node agent",
	BinaryPath: `C:\Program Files\k\kubelet.exe`, Args: []string{"--config", `C:\k\kubelet conf.yaml`, ""},
	StartType: host.StartDelayedAutomatic, Dependencies: []string{"containerd"},
}

// windowsCases call each Windows-side op with arguments that would show a
// lossy encoding (spaces, empty strings, durations, binary).
var windowsCases = []struct {
	op   string
	call func(ctx context.Context, h host.Host) (any, error)
}{
	{proto.OpList, func(ctx context.Context, h host.Host) (any, error) { return h.ListProcesses(ctx) }},
	{proto.OpKill, func(ctx context.Context, h host.Host) (any, error) { return h.Kill(ctx, 0, "kubelet.exe") }},
	{proto.OpSvcQuery, func(ctx context.Context, h host.Host) (any, error) { return h.QueryService(ctx, "kubelet") }},
	{proto.OpSvcQuery, func(ctx context.Context, h host.Host) (any, error) { return h.QueryService(ctx, "missing") }},
	{proto.OpSvcCreate, func(ctx context.Context, h host.Host) (any, error) { return nil, h.CreateService(ctx, svcConfig) }},
	{proto.OpSvcUpdate, func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.UpdateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\kubelet.exe`})
	}},
	{proto.OpSvcRecovery, func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.SetServiceRecovery(ctx, "kubelet", host.ServiceRecovery{RestartDelays: []time.Duration{time.Second, 90 * time.Second}, ResetPeriod: 24 * time.Hour})
	}},
	{proto.OpSvcStart, func(ctx context.Context, h host.Host) (any, error) { return nil, h.StartService(ctx, "kubelet") }},
	{proto.OpSvcStop, func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.StopService(ctx, "kubelet", 1500*time.Millisecond)
	}},
	{proto.OpSvcDelete, func(ctx context.Context, h host.Host) (any, error) { return nil, h.DeleteService(ctx, "kubelet", 0) }},
	{proto.OpSvcWait, func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.WaitService(ctx, "kubelet", host.ServiceStopped, time.Minute)
	}},
	{proto.OpSvcDependents, func(ctx context.Context, h host.Host) (any, error) { return h.DependentServices(ctx, "containerd") }},
	{proto.OpSvcDependents, func(ctx context.Context, h host.Host) (any, error) { return h.DependentServices(ctx, "missing") }},
	{proto.OpRegGet, func(ctx context.Context, h host.Host) (any, error) {
		return h.RegistryGet(ctx, `HKLM\SYSTEM\CurrentControlSet\Services\kubelet`, "Environment")
	}},
	{proto.OpRegGet, func(ctx context.Context, h host.Host) (any, error) {
		return h.RegistryGet(ctx, `HKLM\SOFTWARE\missing`, "x")
	}},
	{proto.OpRegSet, func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.RegistrySet(ctx, `HKLM\SOFTWARE\wsu`, "", host.RegistryValue{Exists: true, Type: host.RegBinary, Binary: []byte{0, 10, 13, 255}})
	}},
	{proto.OpRegSet, func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.RegistrySet(ctx, `HKLM\SOFTWARE\wsu`, "q", host.RegistryValue{Exists: true, Type: host.RegQWORD, Integer: 1<<64 - 1})
	}},
	{proto.OpRegDelete, func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.RegistryDelete(ctx, `HKLM\SOFTWARE\wsu`, "q")
	}},
	{proto.OpEnvGet, func(ctx context.Context, h host.Host) (any, error) {
		v, ok, err := h.EnvGet(ctx, "Path")
		return []any{v, ok}, err
	}},
	{proto.OpEnvSet, func(ctx context.Context, h host.Host) (any, error) { return nil, h.EnvSet(ctx, "K", "a=b; c") }},
	{proto.OpEnvDelete, func(ctx context.Context, h host.Host) (any, error) { return nil, h.EnvDelete(ctx, "K") }},
	{proto.OpPathAdd, func(ctx context.Context, h host.Host) (any, error) { return h.PathAdd(ctx, `C:\k\`) }},
	{proto.OpPathRm, func(ctx context.Context, h host.Host) (any, error) { return h.PathRemove(ctx, `C:\k`) }},
	{proto.OpHNSNetworks, func(ctx context.Context, h host.Host) (any, error) { return h.HNSNetworks(ctx) }},
	{proto.OpHNSEndpoints, func(ctx context.Context, h host.Host) (any, error) { return h.HNSEndpoints(ctx) }},
	{proto.OpHNSCreateEndpoint, func(ctx context.Context, h host.Host) (any, error) {
		return h.HNSCreateEndpoint(ctx, host.HNSEndpoint{Name: "cbr0_ep", Network: "vxlan0", HostAttach: true})
	}},
	{proto.OpHNSDeleteEndpoint, func(ctx context.Context, h host.Host) (any, error) { return nil, h.HNSDeleteEndpoint(ctx, "e1") }},
	{proto.OpHNSDeleteNetwork, func(ctx context.Context, h host.Host) (any, error) { return nil, h.HNSDeleteNetwork(ctx, "n1") }},
	{proto.OpDial, func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.DialTCP(ctx, "10.0.0.5:10250", 3*time.Second)
	}},
	{proto.OpDial + " timeout", func(ctx context.Context, h host.Host) (any, error) {
		return nil, h.DialTCP(ctx, "10.0.0.9:6443", time.Second)
	}},
	{proto.OpHTTP, func(ctx context.Context, h host.Host) (any, error) {
		return h.DoHTTP(ctx, host.HTTPRequest{Method: "PUT", URL: "http://169.254.169.254/latest/api/token",
			Header: map[string]string{"X-Prefix": "tok:"}, Body: []byte{0, 1, 255}, Timeout: 2 * time.Second, Limit: 100})
	}},
	{proto.OpHTTP + " defaults", func(ctx context.Context, h host.Host) (any, error) {
		return h.DoHTTP(ctx, host.HTTPRequest{URL: "http://metadata.google.internal/computeMetadata/v1/instance/hostname"})
	}},
	{proto.OpHTTP + " unreachable", func(ctx context.Context, h host.Host) (any, error) {
		return h.DoHTTP(ctx, host.HTTPRequest{URL: "http://10.0.0.9/"})
	}},
	{proto.OpSysTime, func(ctx context.Context, h host.Host) (any, error) {
		t, err := h.SystemTime(ctx)
		return t.UTC(), err
	}},
	{proto.OpDiskFree, func(ctx context.Context, h host.Host) (any, error) { return h.DiskFree(ctx, `C:\k`) }},
	{proto.OpDiskFree + " missing", func(ctx context.Context, h host.Host) (any, error) { return h.DiskFree(ctx, `Q:\k`) }},
}

// The agent is transparent: each Windows-side call made through it (Facts,
// served from the hello, is TestFacts') reaches the backend with the same arguments and returns the same result and
// error as a direct call.
func TestWindowsOpsTransparent(t *testing.T) {
	direct, served := &fakeHost{}, &fakeHost{}
	c := agenttest.Start(t, served, agenttest.Options{}).Client
	sentinels := []error{host.ErrNotSupported, fs.ErrNotExist, context.DeadlineExceeded, host.ErrUnreachable}
	for _, tc := range windowsCases {
		t.Run(tc.op, func(t *testing.T) {
			direct.calls, served.calls = nil, nil
			want, wantErr := tc.call(context.Background(), direct)
			got, err := tc.call(testCtx(t), c)
			assert.Equal(t, direct.calls, served.calls, "arguments")
			assert.Equal(t, want, got, "result")
			if wantErr == nil {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, wantErr.Error(), err.Error())
			for _, s := range sentinels {
				assert.Equal(t, errors.Is(wantErr, s), errors.Is(err, s), "errors.Is %v", s)
			}
		})
	}
}

// A listing crosses the wire intact, and the client holds the agent to the
// limit it asked for: an answer with more entries is a protocol error.
func TestReadDirLimit(t *testing.T) {
	tests := []struct {
		name    string
		limit   int
		want    []host.DirEntry
		wantErr error
	}{
		{name: "under the limit", limit: 5, want: dirEntries},
		{name: "exactly the limit", limit: 3, want: dirEntries},
		{name: "no limit is the maximum", limit: 0, want: dirEntries},
		{name: "over the limit", limit: 2, wantErr: proto.ErrProtocol},
	}
	backend := &fakeHost{}
	c := agenttest.Start(t, backend, agenttest.Options{}).Client
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			backend.calls = nil
			got, err := c.ReadDir(testCtx(t), `C:\k`, tt.limit)
			assert.Equal(t, []string{fmt.Sprintf("ReadDir[]interface {}{%q, %d}", `C:\k`, tt.limit)}, backend.calls, "arguments")
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				assert.Nil(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, len(tt.want), len(got))
			for i := range tt.want {
				assert.True(t, tt.want[i].ModTime.Equal(got[i].ModTime), "mod_time of %s", tt.want[i].Name)
				got[i].ModTime = tt.want[i].ModTime // time.Time's location differs after JSON
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// The hello carries the backend's facts; a backend without facts still
// connects.
func TestHelloFacts(t *testing.T) {
	c := agenttest.Start(t, noFacts{&fakeHost{}}, agenttest.Options{}).Client
	h := c.Hello()
	assert.Nil(t, h.Facts)
	assert.Equal(t, "no WMI today", h.FactsError)
	b, err := json.Marshal(h)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"facts_error":"no WMI today"`)
}

type noFacts struct{ *fakeHost }

func (noFacts) Facts(context.Context) (host.Facts, error) {
	return host.Facts{}, errors.New("no WMI today")
}

// Facts come from the hello, without a round trip, when the agent could
// gather them; otherwise the agent is asked, and says why it cannot.
func TestFacts(t *testing.T) {
	t.Run("from the hello", func(t *testing.T) {
		backend := &fakeHost{}
		c := agenttest.Start(t, backend, agenttest.Options{}).Client
		backend.calls = nil // the hello's
		want, _ := (&fakeHost{}).Facts(context.Background())
		got, err := c.Facts(testCtx(t))
		require.NoError(t, err)
		assert.Equal(t, want, got)
		assert.Empty(t, backend.calls, "the backend is not asked again")
		assert.Equal(t, int64(0), c.Counters().RPCs)
	})
	t.Run("asked when the hello has none", func(t *testing.T) {
		c := agenttest.Start(t, noFacts{&fakeHost{}}, agenttest.Options{}).Client
		_, err := c.Facts(testCtx(t))
		assert.EqualError(t, err, "no WMI today")
		assert.Equal(t, map[string]int64{proto.OpFacts: 1}, c.Counters().RPCsByOp)
	})
	t.Run("closed", func(t *testing.T) {
		c := agenttest.Start(t, &fakeHost{}, agenttest.Options{}).Client
		require.NoError(t, c.Close())
		_, err := c.Facts(testCtx(t))
		assert.ErrorIs(t, err, client.ErrClosed, "a closed connection fails like any other call")
	})
}

// Every request sent is one RPC of its op, whatever the answer; fs.write
// content is counted as bytes sent, process stdin is not.
func TestCounters(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("uses the local backend with POSIX tools")
	}
	content := bytes.Repeat([]byte("wsu"), 200<<10) // 600 KiB: three data frames
	tests := []struct {
		name  string
		calls func(ctx context.Context, c *client.Client, dir string) error
		want  host.Counters
	}{
		{
			name:  "nothing",
			calls: func(context.Context, *client.Client, string) error { return nil },
			want:  host.Counters{},
		},
		{
			name: "one RPC per call",
			calls: func(ctx context.Context, c *client.Client, dir string) error {
				for _, p := range []string{"a", "b"} {
					if _, err := c.Stat(ctx, filepath.Join(dir, p)); err != nil {
						return err
					}
				}
				return c.MkdirAll(ctx, filepath.Join(dir, "d"), 0o755)
			},
			want: host.Counters{RPCs: 3, RPCsByOp: map[string]int64{proto.OpStat: 2, proto.OpMkdir: 1}},
		},
		{
			name: "a remote error is still a round trip",
			calls: func(ctx context.Context, c *client.Client, dir string) error {
				if _, err := c.SHA256(ctx, filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("want not found, got %v", err)
				}
				return nil
			},
			want: host.Counters{RPCs: 1, RPCsByOp: map[string]int64{proto.OpSHA256: 1}},
		},
		{
			name: "write content is payload",
			calls: func(ctx context.Context, c *client.Client, dir string) error {
				if err := c.WriteFile(ctx, filepath.Join(dir, "big"), bytes.NewReader(content), 0o644); err != nil {
					return err
				}
				return c.WriteFile(ctx, filepath.Join(dir, "empty"), strings.NewReader(""), 0o644)
			},
			want: host.Counters{RPCs: 2, RPCsByOp: map[string]int64{proto.OpWrite: 2}, BytesSent: int64(len(content))},
		},
		{
			name: "stdin is not payload",
			calls: func(ctx context.Context, c *client.Client, _ string) error {
				_, err := c.Run(ctx, host.RunRequest{Argv: []string{"cat"}, Stdin: content})
				return err
			},
			want: host.Counters{RPCs: 1, RPCsByOp: map[string]int64{proto.OpRun: 1}},
		},
		{
			name: "a listing is one RPC, even of a missing directory",
			calls: func(ctx context.Context, c *client.Client, dir string) error {
				if _, err := c.ReadDir(ctx, dir, 10); err != nil {
					return err
				}
				if _, err := c.ReadDir(ctx, filepath.Join(dir, "missing"), 1); !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("want not found, got %v", err)
				}
				return nil
			},
			want: host.Counters{RPCs: 2, RPCsByOp: map[string]int64{proto.OpReadDir: 2}},
		},
		{
			name: "a request refused before sending is not",
			calls: func(ctx context.Context, c *client.Client, _ string) error {
				if err := c.EnvSet(ctx, "BIG", strings.Repeat("x", proto.MaxPayload)); !errors.Is(err, proto.ErrInvalid) {
					return fmt.Errorf("want invalid, got %v", err)
				}
				return nil
			},
			want: host.Counters{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := agenttest.Start(t, local.New(), agenttest.Options{}).Client
			require.NoError(t, tt.calls(testCtx(t), c, t.TempDir()))
			assert.Equal(t, tt.want, c.Counters())
		})
	}
}
