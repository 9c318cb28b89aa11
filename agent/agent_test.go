package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
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

func skipUnlessLinux(t testing.TB) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the tests drive the local backend with POSIX tools")
	}
}

func start(t testing.TB, backend host.Host) *client.Client {
	t.Helper()
	skipUnlessLinux(t)
	return agenttest.Start(t, backend, agenttest.Options{}).Client
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// allBytes is content no text transport leaves alone.
func allBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

func TestHello(t *testing.T) {
	skipUnlessLinux(t)
	info := agent.ServerInfo{Version: "1.2.3-test", SHA256: strings.Repeat("ab", 32), Platform: "test-platform"}
	c := agenttest.Start(t, local.New(), agenttest.Options{Info: info}).Client
	h := c.Hello()
	assert.Equal(t, proto.Protocol, h.Protocol)
	assert.Equal(t, info.Version, h.AgentVersion)
	assert.Equal(t, info.SHA256, h.AgentSHA256)
	assert.Equal(t, info.Platform, h.Platform)
	require.NotNil(t, h.Facts)
	assert.Equal(t, "linux", h.Facts.OS)
	assert.Equal(t, proto.ModeBinary, c.Mode())

	facts, err := c.Facts(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, *h.Facts, facts)
}

func TestFileOps(t *testing.T) {
	c := start(t, local.New())
	ctx := testCtx(t)
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	big := allBytes(3<<20 + 17) // several data frames, not a multiple of a chunk

	fail := errors.New("any error")
	tests := []struct {
		name    string
		do      func() (any, error)
		want    any
		wantErr error // a sentinel the error must wrap, or fail for any error
	}{
		{"mkdir", func() (any, error) { return nil, c.MkdirAll(ctx, p("a/b"), 0o750) }, nil, nil},
		{"stat dir", func() (any, error) {
			fi, err := c.Stat(ctx, p("a/b"))
			return []any{fi.Exists, fi.IsDir, fi.Mode.Perm()}, err
		}, []any{true, true, fs.FileMode(0o750)}, nil},
		{"stat missing", func() (any, error) {
			fi, err := c.Stat(ctx, p("nope"))
			return []any{fi.Path, fi.Exists}, err
		}, []any{p("nope"), false}, nil},
		{"write", func() (any, error) {
			return nil, c.WriteFile(ctx, p("a/f"), bytes.NewReader([]byte("hello\n")), 0o640)
		}, nil, nil},
		{"stat file", func() (any, error) {
			fi, err := c.Stat(ctx, p("a/f"))
			return []any{fi.Exists, fi.IsDir, fi.Size, fi.Mode}, err
		}, []any{true, false, int64(6), fs.FileMode(0o640)}, nil},
		{"sha256", func() (any, error) { return c.SHA256(ctx, p("a/f")) }, sum([]byte("hello\n")), nil},
		{"read", func() (any, error) { return c.ReadFile(ctx, p("a/f"), 0) }, []byte("hello\n"), nil},
		{"read exactly the limit", func() (any, error) { return c.ReadFile(ctx, p("a/f"), 6) }, []byte("hello\n"), nil},
		{"read over the limit", func() (any, error) { return c.ReadFile(ctx, p("a/f"), 5) }, nil, fail},
		{"write empty", func() (any, error) { return nil, c.WriteFile(ctx, p("empty"), strings.NewReader(""), 0o600) }, nil, nil},
		{"read empty", func() (any, error) { return c.ReadFile(ctx, p("empty"), 0) }, []byte(nil), nil},
		{"write big", func() (any, error) { return nil, c.WriteFile(ctx, p("big"), bytes.NewReader(big), 0o600) }, nil, nil},
		{"read big", func() (any, error) {
			b, err := c.ReadFile(ctx, p("big"), 0)
			return sum(b), err
		}, sum(big), nil},
		{"sha256 big", func() (any, error) { return c.SHA256(ctx, p("big")) }, sum(big), nil},
		{"chmod", func() (any, error) {
			if err := c.Chmod(ctx, p("a/f"), 0o604); err != nil {
				return nil, err
			}
			fi, err := c.Stat(ctx, p("a/f"))
			return fi.Mode, err
		}, fs.FileMode(0o604), nil},
		{"read missing", func() (any, error) { return c.ReadFile(ctx, p("nope"), 0) }, nil, fs.ErrNotExist},
		{"sha256 missing", func() (any, error) { return c.SHA256(ctx, p("nope")) }, nil, fs.ErrNotExist},
		{"chmod missing", func() (any, error) { return nil, c.Chmod(ctx, p("nope"), 0o600) }, nil, fs.ErrNotExist},
		{"write into missing dir", func() (any, error) {
			return nil, c.WriteFile(ctx, p("no/dir/f"), bytes.NewReader(big), 0o600)
		}, nil, fs.ErrNotExist},
		{"read a directory", func() (any, error) { return c.ReadFile(ctx, p("a"), 0) }, nil, fail},
		{"list", func() (any, error) { return names(c.ReadDir(ctx, p("a"), 0)) }, []string{"b", "f"}, nil},
		{"list describes entries", func() (any, error) {
			ents, err := c.ReadDir(ctx, p("a"), 0)
			if err != nil {
				return nil, err
			}
			f := ents[1]
			return []any{f.IsDir, f.Size, f.Mode, ents[0].IsDir, ents[0].Mode.Perm(), f.ModTime.IsZero()}, nil
		}, []any{false, int64(6), fs.FileMode(0o604), true, fs.FileMode(0o750), false}, nil},
		{"list within the limit", func() (any, error) {
			ents, err := c.ReadDir(ctx, p("a"), 1)
			return len(ents), err
		}, 1, nil},
		{"list empty", func() (any, error) { return names(c.ReadDir(ctx, p("a/b"), 1)) }, []string{}, nil},
		{"list missing", func() (any, error) { return c.ReadDir(ctx, p("nope"), 0) }, nil, fs.ErrNotExist},
		{"list a file", func() (any, error) { return c.ReadDir(ctx, p("a/f"), 0) }, nil, fail},
		{"remove file", func() (any, error) { return nil, c.Remove(ctx, p("a/f"), false) }, nil, nil},
		{"remove missing", func() (any, error) { return nil, c.Remove(ctx, p("a/f"), false) }, nil, nil},
		{"remove non-empty dir", func() (any, error) {
			if err := c.WriteFile(ctx, p("a/b/g"), strings.NewReader("x"), 0o600); err != nil {
				return nil, err
			}
			return nil, c.Remove(ctx, p("a"), false)
		}, nil, fail},
		{"remove tree", func() (any, error) { return nil, c.Remove(ctx, p("a"), true) }, nil, nil},
		{"stat removed", func() (any, error) {
			fi, err := c.Stat(ctx, p("a"))
			return fi.Exists, err
		}, false, nil},
	}
	// The cases run in order: later ones see what earlier ones did.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.do()
			switch {
			case tt.wantErr == fail:
				require.Error(t, err)
			case tt.wantErr != nil:
				require.Error(t, err)
				assert.ErrorIs(t, err, tt.wantErr)
			default:
				require.NoError(t, err)
				if tt.want != nil || got != nil {
					assert.Equal(t, tt.want, got)
				}
			}
		})
	}
}

// names are a listing's names.
func names(ents []host.DirEntry, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out, nil
}

// The agent's errors read like the local host's.
func TestErrorMessagesMatchLocal(t *testing.T) {
	c := start(t, local.New())
	ctx := testCtx(t)
	dir := t.TempDir()
	l := local.New()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f"), []byte("0123456789"), 0o600))
	calls := map[string]func(h host.Host) error{
		"read missing": func(h host.Host) error { _, err := h.ReadFile(ctx, filepath.Join(dir, "nope"), 0); return err },
		"read limit":   func(h host.Host) error { _, err := h.ReadFile(ctx, filepath.Join(dir, "f"), 3); return err },
		"read dir":     func(h host.Host) error { _, err := h.ReadFile(ctx, dir, 0); return err },
		"list missing": func(h host.Host) error { _, err := h.ReadDir(ctx, filepath.Join(dir, "nope"), 0); return err },
		"list a file":  func(h host.Host) error { _, err := h.ReadDir(ctx, filepath.Join(dir, "f"), 0); return err },
		"svc query":    func(h host.Host) error { _, err := h.QueryService(ctx, "kubelet"); return err },
		"run missing": func(h host.Host) error {
			_, err := h.Run(ctx, host.RunRequest{Argv: []string{"wsu-no-such"}})
			return err
		},
		"run empty": func(h host.Host) error { _, err := h.Run(ctx, host.RunRequest{}); return err },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			want, got := call(l), call(c)
			require.Error(t, want)
			require.Error(t, got)
			assert.Equal(t, want.Error(), got.Error())
		})
	}
}

func TestRun(t *testing.T) {
	c := start(t, local.New())
	ctx := testCtx(t)
	dir := t.TempDir()
	tests := []struct {
		name string
		req  host.RunRequest
		want host.RunResult
	}{
		{"exit code", host.RunRequest{Argv: []string{"sh", "-c", "exit 3"}}, host.RunResult{ExitCode: 3}},
		{"stdout and stderr", host.RunRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2"}},
			host.RunResult{Stdout: []byte("out\n"), Stderr: []byte("err\n")}},
		{"stdin", host.RunRequest{Argv: []string{"cat"}, Stdin: []byte("piped\x00\n")}, host.RunResult{Stdout: []byte("piped\x00\n")}},
		{"empty stdin", host.RunRequest{Argv: []string{"cat"}, Stdin: []byte{}}, host.RunResult{}},
		{"big stdin", host.RunRequest{Argv: []string{"sha256sum"}, Stdin: allBytes(3 << 20)},
			host.RunResult{Stdout: []byte(sum(allBytes(3<<20)) + "  -\n")}},
		{"env and dir", host.RunRequest{Argv: []string{"sh", "-c", `printf '%s %s' "$WSU_X" "$PWD"`}, Env: []string{"WSU_X=y"}, Dir: dir},
			host.RunResult{Stdout: []byte("y " + dir)}},
		{"truncated", host.RunRequest{Argv: []string{"sh", "-c", "printf 0123456789; printf abcdefghij >&2"}, OutputLimit: 4},
			host.RunResult{Stdout: []byte("0123"), Stderr: []byte("abcd"), Truncated: true}},
		// Output larger than a frame travels as data frames.
		{"large output", host.RunRequest{Argv: []string{"sh", "-c", "head -c 3000000 /dev/zero; head -c 2500000 /dev/zero >&2"}, OutputLimit: 4 << 20},
			host.RunResult{Stdout: make([]byte, 3000000), Stderr: make([]byte, 2500000)}},
		{"timeout", host.RunRequest{Argv: []string{"sleep", "30"}, Timeout: 100 * time.Millisecond},
			host.RunResult{ExitCode: -1, TimedOut: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Run(ctx, tt.req)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// Windows-only operations fail on the Linux local host, and the sentinel
// survives the wire.
func TestNotSupported(t *testing.T) {
	c := start(t, local.New())
	ctx := testCtx(t)
	calls := map[string]func() error{
		"svc.query":   func() error { _, err := c.QueryService(ctx, "kubelet"); return err },
		"svc.start":   func() error { return c.StartService(ctx, "kubelet") },
		"reg.get":     func() error { _, err := c.RegistryGet(ctx, `HKLM\SOFTWARE`, "x"); return err },
		"env.set":     func() error { return c.EnvSet(ctx, "X", "y") },
		"path.add":    func() error { _, err := c.PathAdd(ctx, `C:\k`); return err },
		"proc.list":   func() error { _, err := c.ListProcesses(ctx); return err },
		"proc.kill":   func() error { _, err := c.Kill(ctx, 0, "kubelet.exe"); return err },
		"hns.create":  func() error { _, err := c.HNSCreateEndpoint(ctx, host.HNSEndpoint{Name: "e"}); return err },
		"fs.acl.get":  func() error { _, err := c.FileACL(ctx, "/tmp"); return err },
		"fs.acl.set":  func() error { return c.SetFileACL(ctx, "/tmp", host.AdminsOnlyACL()) },
		"fw.rule.get": func() error { _, err := c.FirewallRule(ctx, "wsu kubelet"); return err },
		"fw.rule.set": func() error {
			return c.SetFirewallRule(ctx, host.FirewallRule{Name: "r", Direction: "in", Action: "allow", Protocol: "tcp"})
		},
		"fw.rule.delete": func() error { return c.DeleteFirewallRule(ctx, "wsu kubelet") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			err := call()
			require.Error(t, err)
			assert.ErrorIs(t, err, host.ErrNotSupported)
			assert.Contains(t, err.Error(), "linux (local)")
		})
	}
	// The certificate stores are an optional interface the local host
	// lacks: the agent says so, through the hash cache it wraps the
	// backend in.
	certCalls := map[string]func() error{
		"cert.list":   func() error { _, err := c.Certificates(ctx, "ROOT"); return err },
		"cert.add":    func() error { return c.AddCertificate(ctx, "ROOT", []byte{0x30}) },
		"cert.delete": func() error { return c.DeleteCertificate(ctx, "ROOT", strings.Repeat("AB", 20)) },
	}
	for name, call := range certCalls {
		t.Run(name, func(t *testing.T) {
			err := call()
			require.Error(t, err)
			assert.ErrorIs(t, err, host.ErrNotSupported)
			assert.Contains(t, err.Error(), "certificate store")
		})
	}
	// Bad arguments are refused before any backend sees them.
	assert.ErrorIs(t, c.DeleteCertificate(ctx, "ROOT", "abc"), proto.ErrInvalid)
	_, err := c.Certificates(ctx, `ROOT\..`)
	assert.ErrorIs(t, err, proto.ErrInvalid)
}

func TestConcurrentStats(t *testing.T) {
	c := start(t, local.New())
	ctx := testCtx(t)
	dir := t.TempDir()
	const n = 50
	for i := range n {
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), make([]byte, i), 0o600))
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	sizes := make([]int64, n)
	for i := range n {
		wg.Go(func() {
			fi, err := c.Stat(ctx, filepath.Join(dir, fmt.Sprint(i)))
			errs[i], sizes[i] = err, fi.Size
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, int64(i), sizes[i], "each answer reaches its own caller")
	}
}

// Cancelling a call stops the process on the host and returns promptly.
func TestCancelRun(t *testing.T) {
	backend := &watchHost{Host: local.New(), runDone: make(chan error, 1)}
	c := start(t, backend)
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(200*time.Millisecond, cancel)
	begin := time.Now()
	_, err := c.Run(ctx, host.RunRequest{Argv: []string{"sleep", "30"}})
	assert.Equal(t, context.Canceled, err)
	assert.Less(t, time.Since(begin), 10*time.Second)
	select {
	case err := <-backend.runDone:
		assert.ErrorIs(t, err, context.Canceled, "the backend's Run was cancelled")
	case <-time.After(10 * time.Second):
		t.Fatal("the process on the host was not stopped")
	}
	// The connection is still good.
	_, err = c.Stat(testCtx(t), "/")
	assert.NoError(t, err)
}

// watchHost reports when Run returns.
type watchHost struct {
	host.Host
	runDone chan error
}

func (h *watchHost) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	res, err := h.Host.Run(ctx, req)
	h.runDone <- err
	return res, err
}

// meterHost watches the content WriteFile reads.
type meterHost struct {
	host.Host
	produced *atomic.Int64 // bytes the client's source has handed out
	consumed atomic.Int64
	maxRead  atomic.Int64
	maxLag   atomic.Int64 // produced but not yet consumed, at worst
	onRead   func(consumed int64)
}

func (h *meterHost) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	return h.Host.WriteFile(ctx, path, readerFunc(func(p []byte) (int, error) {
		n, err := content.Read(p)
		total := h.consumed.Add(int64(n))
		storeMax(&h.maxRead, int64(n))
		if h.produced != nil {
			storeMax(&h.maxLag, h.produced.Load()-total)
		}
		if h.onRead != nil {
			h.onRead(total)
		}
		return n, err
	}), mode)
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func storeMax(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// source yields size deterministic bytes, counting them.
type source struct {
	size, off int64
	produced  *atomic.Int64
}

func (s *source) Read(p []byte) (int, error) {
	if s.off >= s.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), s.size-s.off))
	for i := range p[:n] {
		p[i] = byte((s.off + int64(i)) * 31 >> 3)
	}
	s.off += int64(n)
	s.produced.Add(int64(n))
	return n, nil
}

func TestWriteFileStreams(t *testing.T) {
	const size = 20 << 20
	var produced atomic.Int64
	backend := &meterHost{Host: local.New(), produced: &produced}
	c := start(t, backend)
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "big.bin")

	want := sha256.New()
	_, err := io.Copy(want, &source{size: size, produced: new(atomic.Int64)})
	require.NoError(t, err)

	require.NoError(t, c.WriteFile(ctx, path, &source{size: size, produced: &produced}, 0o600))
	got, err := c.SHA256(ctx, path)
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(want.Sum(nil)), got, "byte-exact")
	assert.Equal(t, int64(size), backend.consumed.Load())
	assert.LessOrEqual(t, backend.maxRead.Load(), int64(proto.MaxPayload))
	// The backend reads while the client still sends: never more than a
	// few chunks are in flight, let alone the whole file.
	assert.Less(t, backend.maxLag.Load(), int64(4<<20), "bytes in flight at worst")
	t.Logf("largest read %d bytes; at most %d bytes in flight", backend.maxRead.Load(), backend.maxLag.Load())
}

// dirEntries lists dir's names.
func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// A stream cut mid-way leaves the old file and no temp file, however it is
// cut.
func TestWriteFileCut(t *testing.T) {
	skipUnlessLinux(t)
	boom := errors.New("disk image unreadable")
	tests := []struct {
		name string
		// cut is called once the backend has 2 MiB of the new content.
		cut     func(conn *agenttest.Conn, cancel context.CancelFunc)
		readErr error // the content reader fails when cut
		wantErr error
	}{
		{"client closes", func(conn *agenttest.Conn, _ context.CancelFunc) { conn.Client.Close() }, nil, client.ErrClosed},
		{"context cancelled", func(_ *agenttest.Conn, cancel context.CancelFunc) { cancel() }, nil, context.Canceled},
		{"content read fails", func(*agenttest.Conn, context.CancelFunc) {}, boom, boom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "target")
			require.NoError(t, os.WriteFile(path, []byte("old content"), 0o600))

			cutNow := make(chan struct{})
			var once sync.Once
			backend := &meterHost{Host: local.New(), onRead: func(n int64) {
				if n >= 2<<20 {
					once.Do(func() { close(cutNow) })
				}
			}}
			conn := agenttest.Start(t, backend, agenttest.Options{})
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()

			// An endless source that fails, if asked to, once cut.
			var cut atomic.Bool
			content := readerFunc(func(p []byte) (int, error) {
				if cut.Load() && tt.readErr != nil {
					return 0, tt.readErr
				}
				return len(p), nil
			})
			go func() {
				<-cutNow
				cut.Store(true)
				tt.cut(conn, cancel)
			}()
			err := conn.Client.WriteFile(ctx, path, content, 0o600)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.wantErr)

			// The agent has finished with the request once it closes; for
			// the other cuts, a later call proves the connection works and
			// the write request ended.
			if tt.name == "client closes" {
				require.NoError(t, conn.Wait())
			} else {
				assert.Eventually(t, func() bool { return len(dirEntries(t, dir)) == 1 }, 10*time.Second, 10*time.Millisecond)
				_, err := conn.Client.Stat(testCtx(t), path)
				require.NoError(t, err)
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "old content", string(got))
			assert.Equal(t, []string{"target"}, dirEntries(t, dir), "no temp file left")
		})
	}
}

// stallHost's WriteFile reads a little of its content and then stops
// reading until its context ends, like a backend stuck on a dead disk.
type stallHost struct {
	host.Host
	stalled chan struct{}
	ended   chan error
}

func (h *stallHost) WriteFile(ctx context.Context, _ string, content io.Reader, _ fs.FileMode) error {
	io.ReadFull(content, make([]byte, 64<<10))
	close(h.stalled)
	<-ctx.Done()
	h.ended <- ctx.Err()
	return ctx.Err()
}

// A stream whose handler stopped reading stalls only itself: the client
// stops at the window, the agent still answers other requests on the
// connection, and cancelling the write reaches the handler.
func TestStalledStreamKeepsTheAgentResponsive(t *testing.T) {
	backend := &stallHost{Host: local.New(), stalled: make(chan struct{}), ended: make(chan error, 1)}
	c := start(t, backend)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	var produced atomic.Int64
	done := make(chan error, 1)
	go func() {
		done <- c.WriteFile(ctx, filepath.Join(t.TempDir(), "x"), &source{size: 1 << 40, produced: &produced}, 0o600)
	}()
	<-backend.stalled

	// The client sends until the window is full, then waits.
	require.Eventually(t, func() bool { return produced.Load() >= proto.StreamWindow }, 10*time.Second, time.Millisecond)
	_, err := c.Stat(testCtx(t), "/")
	require.NoError(t, err, "another request is answered while the stream is stalled")
	// What the handler read, the window, and the client's two read-ahead
	// buffers: never more.
	assert.LessOrEqual(t, produced.Load(), int64(64<<10+proto.StreamWindow+2*256<<10))

	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	select {
	case err := <-backend.ended:
		assert.ErrorIs(t, err, context.Canceled, "the cancel reached the stalled handler")
	case <-testCtx(t).Done():
		t.Fatal("the stalled handler was never cancelled")
	}
}
