package ssh

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/agent/client"
)

// SFTP tuning, measured against OpenSSH's sftp-server on loopback (see
// BenchmarkUploadTuning and docs/transports.md). OpenSSH accepts writes of
// up to 255 KiB (256 KiB messages); variables so the benchmark can vary
// them.
var (
	sftpMaxPacket   = 255 << 10
	sftpConcurrency = 2
)

// staleUploadAge is when a temp file left by a cut upload is old enough to
// be no other run's upload in progress.
const staleUploadAge = 15 * time.Minute

// agentSession is a started agent and the SSH session it runs in.
type agentSession struct {
	client  *client.Client
	sess    *gossh.Session
	stderr  *tailBuffer
	exited  chan struct{} // closed when the session ended
	exitErr error
	// uploaded is how much of the agent binary was sent to start this
	// agent: 0 when the one in place was current.
	uploaded int64
	// deployMethod is how it was sent: deployNone, deploySFTP or
	// deployExec; noSFTP why SFTP could not be used, for deployExec.
	deployMethod string
	noSFTP       error
	// up is the connection's payload uploads over SFTP (upload.go).
	up uploads
}

// close ends the agent (its stdin closes) and waits up to grace for it to
// exit, so a Windows image is unlocked before anyone replaces it.
func (a *agentSession) close(grace time.Duration) {
	a.up.close()
	if a.client != nil {
		a.client.Close()
	}
	select {
	case <-a.exited:
	case <-time.After(grace):
	}
	a.sess.Close()
}

// agentCommand is the start command: the path and arguments are validated
// to need no quoting, so it reads the same to sh, cmd and PowerShell.
func agentCommand(cfg Config) string {
	return strings.Join(append([]string{cfg.AgentPath, "agent"}, cfg.AgentArgs...), " ")
}

// startAgent runs the agent in a new session and does the protocol
// start-up. A failure quotes what the agent (or the shell) wrote on stderr.
func startAgent(ctx context.Context, c *conn, cfg Config) (*agentSession, error) {
	sess, err := c.client.NewSession()
	if err != nil {
		return nil, fmt.Errorf("opening an SSH session: %w", err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, err
	}
	a := &agentSession{sess: sess, stderr: &tailBuffer{max: 4 << 10}, exited: make(chan struct{})}
	sess.Stderr = a.stderr
	cmd := agentCommand(cfg)
	if err := sess.Start(cmd); err != nil {
		sess.Close()
		return nil, fmt.Errorf("starting %q: %w", cmd, err)
	}
	go func() { a.exitErr = sess.Wait(); close(a.exited) }()
	// A shell profile waiting for input must not hang the run.
	sctx, cancel := context.WithTimeoutCause(ctx, cfg.ConnectTimeout,
		fmt.Errorf("no agent greeting within connect_timeout (%s)", cfg.ConnectTimeout))
	cl, err := client.Dial(sctx, stdout, stdin)
	if sctx.Err() != nil && ctx.Err() == nil {
		err = context.Cause(sctx)
	}
	cancel()
	if err != nil {
		stdin.Close()
		a.close(2 * time.Second)
		msg := fmt.Sprintf("starting %q: %v", cmd, err)
		if s := strings.TrimSpace(a.stderr.String()); s != "" {
			msg += "; it wrote on stderr: " + s
		}
		select {
		case <-a.exited:
			if a.exitErr != nil {
				msg += " (" + a.exitErr.Error() + ")"
			}
		default: // still running after the grace period
		}
		return nil, &startError{msg: msg, err: err}
	}
	a.client = cl
	return a, nil
}

type startError struct {
	msg string
	err error
}

func (e *startError) Error() string { return e.msg }
func (e *startError) Unwrap() error { return e.err }

// startOrDeploy starts the agent at cfg.AgentPath, deploying it first when
// it is missing, does not start, or is another build than cfg.Agent.
// The build is compared by the sha256 the agent reports in its hello.
// wantSum returns cfg.Agent's sha256.
func startOrDeploy(ctx context.Context, c *conn, cfg Config, wantSum func() (string, error)) (*agentSession, error) {
	var why string
	a, err := startAgent(ctx, c, cfg)
	want, werr := wantSum()
	if werr != nil {
		if err == nil {
			a.close(5 * time.Second)
		}
		return nil, fmt.Errorf("the agent binary to deploy (wsu_agent_binary): %w", werr)
	}
	switch {
	case err == nil && a.client.Hello().AgentSHA256 == want:
		return a, nil
	case err == nil:
		why = fmt.Sprintf("it is another build (wsu %s, sha256 %s; want %s)", a.client.Hello().AgentVersion, a.client.Hello().AgentSHA256, want)
		a.close(5 * time.Second)
	case ctx.Err() != nil:
		return nil, err
	default:
		if dead, derr := c.dead(); dead {
			return nil, fmt.Errorf("%w (%v)", err, derr)
		}
		why = err.Error()
	}

	d, uerr := deployAgent(ctx, c, cfg)
	if uerr != nil {
		// Another run may have deployed the same build meanwhile (and on
		// Windows be running it, so ours could not replace it).
		if a, err := startAgent(ctx, c, cfg); err == nil {
			if a.client.Hello().AgentSHA256 == want {
				a.uploaded, a.deployMethod, a.noSFTP = d.bytes, d.method, d.noSFTP
				return a, nil
			}
			a.close(5 * time.Second)
		}
		return nil, fmt.Errorf("deploying the agent to %s (%s): %w", cfg.AgentPath, why, uerr)
	}
	a, err = startAgent(ctx, c, cfg)
	if err != nil {
		return nil, fmt.Errorf("the agent deployed to %s does not start: %w", cfg.AgentPath, err)
	}
	if got := a.client.Hello().AgentSHA256; got != want {
		a.close(5 * time.Second)
		return nil, fmt.Errorf("the agent deployed to %s (%s) reports sha256 %s, but %s has %s: the file was changed after the upload", cfg.AgentPath, deployName(d.method), got, cfg.Agent.Name(), want)
	}
	a.uploaded, a.deployMethod, a.noSFTP = d.bytes, d.method, d.noSFTP
	return a, nil
}

// deployAgent uploads the agent binary over SFTP or, when the SFTP
// subsystem cannot be started (sshd_config without `Subsystem sftp`),
// through an exec session's stdin. The bytes sent are counted also when it
// fails.
func deployAgent(ctx context.Context, c *conn, cfg Config) (deployment, error) {
	n, err := uploadAgent(ctx, c, cfg)
	d := deployment{bytes: n, method: deploySFTP}
	var ns *noSFTPError
	if !errors.As(err, &ns) {
		return d, err
	}
	if dead, derr := c.dead(); dead {
		return d, fmt.Errorf("%w (%v)", err, derr)
	}
	if ctx.Err() != nil {
		return d, err
	}
	d.method, d.noSFTP = deployExec, err
	d.bytes, err = execUploadAgent(ctx, c, cfg)
	if err != nil {
		return d, fmt.Errorf("%v; through an exec session instead: %w", d.noSFTP, err)
	}
	return d, nil
}

// deployment is what deployAgent did.
type deployment struct {
	bytes  int64  // of the agent binary sent
	method string // deploySFTP or deployExec
	noSFTP error  // why SFTP was not used, for deployExec
}

func deployName(method string) string {
	if method == deployExec {
		return "through an exec session, without SFTP"
	}
	return "over SFTP"
}

// noSFTPError is SFTP that could not be started: the subsystem is missing
// or refused. Nothing was written, so another way may be tried.
type noSFTPError struct{ err error }

func (e *noSFTPError) Error() string {
	return "starting SFTP (is the sftp subsystem enabled in sshd_config?): " + e.err.Error()
}

func (e *noSFTPError) Unwrap() error { return e.err }

// newSFTP opens the SFTP subsystem tuned for bulk uploads.
func newSFTP(c *gossh.Client) (*sftp.Client, error) {
	sc, err := sftp.NewClient(c,
		sftp.UseConcurrentWrites(true),
		sftp.MaxPacketUnchecked(sftpMaxPacket),
		sftp.MaxConcurrentRequestsPerFile(sftpConcurrency),
	)
	if err != nil {
		return nil, &noSFTPError{err}
	}
	return sc, nil
}

// uploadAgent puts cfg.Agent at cfg.AgentPath over SFTP. It returns
// how many bytes of it were written, also when it fails.
func uploadAgent(ctx context.Context, c *conn, cfg Config) (int64, error) {
	sc, err := newSFTP(c.client)
	if err != nil {
		return 0, err
	}
	defer sc.Close()
	// Closing the client is how a context interrupts SFTP calls.
	stop := context.AfterFunc(ctx, func() { sc.Close() })
	defer stop()
	mode := fs.FileMode(0)
	if cfg.RemoteOS != "windows" {
		mode = 0o755
	}
	src, _, err := cfg.Agent.Open()
	if err != nil {
		return 0, err
	}
	defer src.Close()
	n, err := putFile(sc, src, sftpPath(cfg.RemoteOS, cfg.AgentPath), mode, true)
	if ctx.Err() != nil {
		return n, fmt.Errorf("upload interrupted: %w", ctx.Err())
	}
	return n, err
}

// putFile copies src to remote (an SFTP path) through a temp file beside
// it that is synced and renamed over remote, so remote is always either
// the old file or the complete new one; with mkdir, missing directories
// are created, else a missing parent directory is an error
// (fs.ErrNotExist), as for Host.WriteFile. mode 0 leaves the permissions
// alone (Windows). A read error of src fails it and leaves remote alone.
// It returns the bytes written, also when it fails, for the transport's
// counters.
func putFile(sc *sftp.Client, src io.Reader, remote string, mode fs.FileMode, mkdir bool) (int64, error) {
	dir, base := path.Split(remote)
	dir = strings.TrimSuffix(dir, "/")
	if dir != "" && mkdir {
		if err := sc.MkdirAll(dir); err != nil {
			return 0, fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	prefix := "." + base + ".wsu-upload-"
	tmp := path.Join(dir, prefix+randomHex(6))
	if dir == "" {
		tmp = prefix + randomHex(6)
	}
	n, err := writeRemote(sc, src, tmp, mode)
	if err != nil {
		sc.Remove(tmp)
		return n, err
	}
	if err := rename(sc, tmp, remote); err != nil {
		sc.Remove(tmp)
		return n, fmt.Errorf("renaming %s over %s: %w", tmp, remote, err)
	}
	removeStale(sc, dir, prefix)
	return n, nil
}

// writeRemote creates tmp, sets its mode (unless 0) before any content is
// in it, and writes src with concurrent requests.
func writeRemote(sc *sftp.Client, src io.Reader, tmp string, mode fs.FileMode) (int64, error) {
	f, err := sc.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", tmp, err)
	}
	if mode != 0 {
		if err := f.Chmod(mode); err != nil {
			f.Close()
			return 0, fmt.Errorf("chmod %s: %w", tmp, err)
		}
	}
	// Concurrent whatever src is: ReadFrom would write a reader of unknown
	// size one request at a time.
	n, err := f.ReadFromWithConcurrency(src, 0)
	if err != nil {
		f.Close()
		return n, fmt.Errorf("writing %s: %w", tmp, err)
	}
	if _, ok := sc.HasExtension("fsync@openssh.com"); ok {
		if err := f.Sync(); err != nil {
			f.Close()
			return n, fmt.Errorf("syncing %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		return n, fmt.Errorf("closing %s: %w", tmp, err)
	}
	return n, nil
}

// rename replaces newpath atomically with posix-rename@openssh.com; plain
// SFTP rename refuses an existing target, so without the extension the
// target is removed first (a short window without the file).
func rename(sc *sftp.Client, oldpath, newpath string) error {
	if _, ok := sc.HasExtension("posix-rename@openssh.com"); ok {
		return sc.PosixRename(oldpath, newpath)
	}
	if err := sc.Remove(newpath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return sc.Rename(oldpath, newpath)
}

// removeStale deletes temp files of uploads that were cut off long ago.
func removeStale(sc *sftp.Client, dir, prefix string) {
	if dir == "" {
		dir = "."
	}
	entries, err := sc.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && time.Since(e.ModTime()) > staleUploadAge {
			sc.Remove(path.Join(dir, e.Name()))
		}
	}
}

// sftpPath turns a Windows path into the form Windows OpenSSH's SFTP
// server expects: C:\k\wsu\x.exe is /C:/k/wsu/x.exe. Other paths are
// used as they are.
func sftpPath(remoteOS, p string) string {
	if remoteOS != "windows" {
		return p
	}
	p = strings.ReplaceAll(p, `\`, "/")
	if len(p) >= 2 && p[1] == ':' {
		p = "/" + p
	}
	return p
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tailBuffer keeps the last max bytes written to it (a command's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

// ReadFrom copies r through a 1 KiB buffer. x/crypto/ssh copies a
// session's stderr into its Stderr writer with io.Copy, which would
// otherwise hold a 32 KiB buffer for the session's life: per connected
// host, for an agent that rarely writes to stderr.
func (t *tailBuffer) ReadFrom(r io.Reader) (int64, error) {
	var buf [1 << 10]byte
	var n int64
	for {
		m, err := r.Read(buf[:])
		if m > 0 {
			t.Write(buf[:m])
			n += int64(m)
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
