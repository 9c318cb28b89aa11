//go:build linux

package ssh

// THIS IS A FAKE SSH SERVER (in-process, golang.org/x/crypto/ssh), not
// OpenSSH. Everything that OpenSSH can do is tested against the real sshd
// (sshd_test.go); the fake exists only for faults OpenSSH cannot be told to
// make: cutting the connection mid-upload or mid-task, stalling a channel
// while the connection stays up, and freezing the network silently.

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// fakeServer is a FAKE SSH server: exec runs `sh -c` locally (so the real
// agent runs), the sftp subsystem is pkg/sftp's server, and the fault
// switches below break things on purpose.
type fakeServer struct {
	t    *testing.T
	ln   net.Listener
	addr string
	conf *gossh.ServerConfig

	keyFile    string // the client's private key
	knownHosts string // trusts the fake's host key

	// cutSFTPAfter, when > 0, drops the connection once an SFTP session
	// has received that many bytes.
	cutSFTPAfter atomic.Int64
	// stall makes every exec session stop passing data both ways while the
	// connection (and keepalive replies) carry on.
	stall atomic.Bool

	mu     sync.Mutex
	conns  map[*fakeConn]bool
	wg     sync.WaitGroup
	closed bool
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	dir := t.TempDir()
	_, hostPriv, _ := ed25519.GenerateKey(nil)
	hostSigner, err := gossh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	clientPub, clientPriv, _ := ed25519.GenerateKey(nil)
	block, err := gossh.MarshalPrivateKey(clientPriv, "fake client")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	authorized, _ := gossh.NewPublicKey(clientPub)

	conf := &gossh.ServerConfig{
		PublicKeyCallback: func(_ gossh.ConnMetadata, k gossh.PublicKey) (*gossh.Permissions, error) {
			if keysEqual(k, authorized) {
				return nil, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	conf.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{t: t, ln: ln, addr: ln.Addr().String(), conf: conf, keyFile: keyFile, conns: map[*fakeConn]bool{}}
	s.knownHosts = filepath.Join(dir, "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(s.addr)}, hostSigner.PublicKey())
	if err := os.WriteFile(s.knownHosts, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

// config is a host on the fake running a simulated Windows agent under dir.
func (s *fakeServer) config(t *testing.T, dir string, extra map[string]string) Config {
	t.Helper()
	host, port, _ := net.SplitHostPort(s.addr)
	kv := map[string]string{
		"ansible_host":                 host,
		"ansible_port":                 port,
		"ansible_user":                 "fake",
		"ansible_ssh_private_key_file": s.keyFile,
		"ssh_known_hosts_file":         s.knownHosts,
		"connect_retry_window":         "0s",
		"wsu_remote_os":                "linux",
		"wsu_agent_path":               filepath.Join(dir, "agent", "wsu-test"),
		"wsu_agent_binary":             agentBinary(t),
		"wsu_agent_args":               "--platform sim --sim-root " + filepath.Join(dir, "sim"),
	}
	for k, v := range extra {
		kv[k] = v
	}
	cfg, err := ParseConfig("fake01", vars(kv))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (s *fakeServer) serve() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		fc := &fakeConn{Conn: nc, thawed: make(chan struct{})}
		close(fc.thawed)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[fc] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(fc)
			s.mu.Lock()
			delete(s.conns, fc)
			s.mu.Unlock()
		}()
	}
}

// dropAll cuts every connection, as a network reconfiguration does.
func (s *fakeServer) dropAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// freezeAll makes every connection silently stop moving bytes: no reset,
// no replies, as when a route disappears.
func (s *fakeServer) freezeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.freeze()
	}
}

func (s *fakeServer) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.ln.Close()
	s.dropAll()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.t.Error("the fake server's handlers did not finish")
	}
}

func (s *fakeServer) handle(fc *fakeConn) {
	defer fc.Close()
	sc, chans, reqs, err := gossh.NewServerConn(fc, s.conf)
	if err != nil {
		return
	}
	defer sc.Close()
	// Global requests (keepalive@openssh.com) get a refusal, as OpenSSH
	// answers them: a reply is all a keepalive needs.
	go gossh.DiscardRequests(reqs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // kills what the sessions started
	var wg sync.WaitGroup
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(gossh.UnknownChannelType, "sessions only")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.session(ctx, fc, ch, creqs)
		}()
	}
	cancel()
	wg.Wait()
}

func (s *fakeServer) session(ctx context.Context, fc *fakeConn, ch gossh.Channel, reqs <-chan *gossh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "exec":
			var p struct{ Command string }
			if err := gossh.Unmarshal(req.Payload, &p); err != nil {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			go gossh.DiscardRequests(reqs)
			s.exec(ctx, ch, p.Command)
			return
		case "subsystem":
			var p struct{ Name string }
			if gossh.Unmarshal(req.Payload, &p) != nil || p.Name != "sftp" {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			go gossh.DiscardRequests(reqs)
			rw := &cuttingReader{ReadWriteCloser: ch, limit: s.cutSFTPAfter.Load(), cut: func() { fc.Close() }}
			srv, err := sftp.NewServer(rw)
			if err != nil {
				return
			}
			srv.Serve()
			srv.Close()
			return
		default:
			req.Reply(false, nil)
		}
	}
}

func (s *fakeServer) exec(ctx context.Context, ch gossh.Channel, command string) {
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	gate := &stallGate{stall: &s.stall, done: ctx.Done()}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return
	}
	cmd.Stdout = gate.writer(ch)
	cmd.Stderr = ch.Stderr()
	status := uint32(255)
	if err := cmd.Start(); err == nil {
		// Not cmd.Stdin: Wait would wait for this copy, which only ends
		// when the client closes its side.
		go func() {
			io.Copy(stdin, gate.reader(ch))
			stdin.Close()
		}()
		err = cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			status = 0
		case errors.As(err, &ee) && ee.ExitCode() >= 0:
			status = uint32(ee.ExitCode())
		}
	}
	ch.CloseWrite()
	ch.SendRequest("exit-status", false, gossh.Marshal(struct{ Status uint32 }{status}))
}

// stallGate holds data in both directions while stall is set.
type stallGate struct {
	stall *atomic.Bool
	done  <-chan struct{}
}

func (g *stallGate) wait() error {
	for g.stall.Load() {
		select {
		case <-g.done:
			return io.ErrClosedPipe
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func (g *stallGate) reader(r io.Reader) io.Reader {
	return readerFunc(func(p []byte) (int, error) {
		n, err := r.Read(p)
		if werr := g.wait(); werr != nil {
			return 0, werr
		}
		return n, err
	})
}

func (g *stallGate) writer(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if err := g.wait(); err != nil {
			return 0, err
		}
		return w.Write(p)
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// cuttingReader drops the connection after limit bytes were read (0: no
// limit).
type cuttingReader struct {
	io.ReadWriteCloser
	limit, n int64
	cut      func()
}

func (c *cuttingReader) Read(p []byte) (int, error) {
	n, err := c.ReadWriteCloser.Read(p)
	c.n += int64(n)
	if c.limit > 0 && c.n >= c.limit {
		c.cut()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// fakeConn is a server-side connection that can be frozen.
type fakeConn struct {
	net.Conn
	mu     sync.Mutex
	thawed chan struct{} // closed unless frozen
	closed atomic.Bool
}

func (c *fakeConn) freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.thawed = make(chan struct{})
}

func (c *fakeConn) gate() {
	for {
		c.mu.Lock()
		th := c.thawed
		c.mu.Unlock()
		select {
		case <-th:
			return
		case <-time.After(10 * time.Millisecond):
			if c.closed.Load() {
				return
			}
		}
	}
}

func (c *fakeConn) Read(p []byte) (int, error) {
	c.gate()
	return c.Conn.Read(p)
}

func (c *fakeConn) Write(p []byte) (int, error) {
	c.gate()
	return c.Conn.Write(p)
}

func (c *fakeConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}
