package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/notify"
)

// Backoff between connection attempts: doubling from the first, capped.
const (
	firstBackoff = time.Second
	maxBackoff   = 20 * time.Second
)

// conn is an established SSH connection, through a jump host if any.
type conn struct {
	client *gossh.Client
	jump   *gossh.Client

	// loginKey is the public key the target accepted, nil when the login
	// used none that wsu can name.
	loginKey gossh.PublicKey

	done chan struct{} // closed once the connection is gone
	mu   sync.Mutex
	err  error // why it is gone
}

// errClosedByUs is the reason of a connection Close ended on purpose.
var errClosedByUs = errors.New("closed by wsu")

func newConn(client, jump *gossh.Client) *conn {
	c := &conn{client: client, jump: jump, done: make(chan struct{})}
	go func() {
		err := client.Wait()
		if err == nil {
			err = errors.New("the server closed the SSH connection")
		}
		c.fail(fmt.Errorf("SSH connection ended: %w", err))
	}()
	if jump != nil {
		go func() {
			err := jump.Wait()
			if err == nil {
				err = errors.New("the server closed the SSH connection")
			}
			c.fail(fmt.Errorf("SSH connection to the jump host ended: %w", err))
		}()
	}
	return c
}

// fail records why the connection is gone (the first reason wins) and
// closes it, which ends every session on it.
func (c *conn) fail(err error) {
	c.mu.Lock()
	first := c.err == nil
	if first {
		c.err = err
	}
	c.mu.Unlock()
	if !first {
		return
	}
	// done first: whoever sees the sessions end must find the reason.
	close(c.done)
	c.client.Close()
	if c.jump != nil {
		c.jump.Close()
	}
}

// Close ends the connection on purpose.
func (c *conn) Close() { c.fail(errClosedByUs) }

// dead reports whether the connection is gone and why.
func (c *conn) dead() (bool, error) {
	select {
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return true, c.err
	default:
		return false, nil
	}
}

// keepalive sends keepalive@openssh.com every interval. A reply (even a
// refusal) proves the server alive; none for interval*countMax means the
// network has gone away silently (an HNS change, a reboot), so the
// connection is closed and counts as lost instead of hanging.
func (c *conn) keepalive(interval time.Duration, countMax int) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		replied := make(chan error, 1)
		go func() {
			_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
			replied <- err
		}()
		limit := interval * time.Duration(countMax)
		select {
		case <-c.done:
			return
		case err := <-replied:
			if err != nil {
				c.fail(fmt.Errorf("keepalive failed: %w", err))
				return
			}
		case <-time.After(limit):
			c.fail(fmt.Errorf("no reply to keepalives for %s (keepalive_interval %s × keepalive_count_max %d)", limit, interval, countMax))
			return
		}
	}
}

// attempt is one failed connection attempt, for the final error.
type attempt struct {
	at  time.Duration // since the first attempt
	err error
}

// ConnectError is a connection that could not be made; it lists every
// attempt and unwraps to the last attempt's error.
type ConnectError struct {
	Name, Addr string
	Attempts   []attempt
	// Why says why wsu stopped trying.
	Why string
}

func (e *ConnectError) Error() string {
	last := e.Attempts[len(e.Attempts)-1]
	var b strings.Builder
	fmt.Fprintf(&b, "ssh: cannot connect to %s (%s): %v", e.Name, e.Addr, last.err)
	if len(e.Attempts) == 1 && e.Why == "" {
		return b.String()
	}
	fmt.Fprintf(&b, "\n%s; %d attempts:", e.Why, len(e.Attempts))
	// Runs of the same error (a host refusing while it boots) fold into
	// one line.
	for i := 0; i < len(e.Attempts); {
		j := i
		for j+1 < len(e.Attempts) && e.Attempts[j+1].err.Error() == e.Attempts[i].err.Error() {
			j++
		}
		if i == j {
			fmt.Fprintf(&b, "\n  attempt %d at +%s: %v", i+1, round(e.Attempts[i].at), e.Attempts[i].err)
		} else {
			fmt.Fprintf(&b, "\n  attempts %d-%d at +%s..+%s: %v", i+1, j+1, round(e.Attempts[i].at), round(e.Attempts[j].at), e.Attempts[i].err)
		}
		i = j + 1
	}
	return b.String()
}

func (e *ConnectError) Unwrap() error { return e.Attempts[len(e.Attempts)-1].err }

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

// AuthFailureText is in the message of a connection the host refused to
// authenticate (golang.org/x/crypto/ssh's "unable to authenticate"): how a
// caller that has only the run's message (the controller, a Job's result)
// tells a refused key from a host that cannot be reached.
const AuthFailureText = "unable to authenticate"

// errKind says whether a failed attempt is worth repeating.
type errKind int

const (
	fatal     errKind = iota
	transient         // refused, reset, timed out: the host may be booting
	authFail          // the host may still be provisioning its users/keys
)

func classify(err error) errKind {
	var hk *HostKeyError
	var dns *net.DNSError
	var oce *gossh.OpenChannelError
	switch {
	case errors.As(err, &hk):
		return fatal
	case strings.Contains(err.Error(), AuthFailureText):
		return authFail
	case errors.As(err, &dns):
		// A misspelt name fails at once; a resolver hiccup is retried.
		if dns.IsNotFound {
			return fatal
		}
		return transient
	case errors.As(err, &oce):
		// The jump host could not reach the target.
		if oce.Reason == gossh.ConnectionFailed {
			return transient
		}
		return fatal
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, errHandshakeTimeout), errors.Is(err, context.DeadlineExceeded):
		return transient
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return transient
	}
	// Any other failure to dial (on Windows the errnos differ) is the
	// network or the host not being there yet.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return transient
	}
	return fatal
}

var errHandshakeTimeout = errors.New("SSH handshake timed out")

// connect opens the SSH connection, retrying transient failures within
// connect_retry_window (and authentication failures within
// auth_retry_window), with capped exponential backoff.
func connect(ctx context.Context, cfg Config) (*conn, error) {
	creds, err := loadCredentials(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("ssh: host %s: %w", cfg.Name, err)
	}
	defer creds.close()
	start := time.Now()
	cerr := &ConnectError{Name: cfg.Name, Addr: cfg.User + "@" + cfg.Addr()}
	if cfg.ProxyJump != nil {
		cerr.Addr += " via " + cfg.ProxyJump.User + "@" + cfg.ProxyJump.Addr()
	}
	backoff := firstBackoff
	cfg.Notify = cfg.notifier(ctx)
	report := cfg.Notify
	for _, w := range cfg.Warnings {
		report(notify.Notice{Kind: notify.Warning, Host: cfg.Name, Summary: w})
	}
	for {
		creds.keyUsed.Store(false)
		c, err := dialOnce(ctx, cfg, creds)
		if err == nil {
			c.loginKey = creds.loginKey()
			go c.keepalive(cfg.KeepaliveInterval, cfg.KeepaliveCountMax)
			return c, nil
		}
		elapsed := time.Since(start)
		cerr.Attempts = append(cerr.Attempts, attempt{at: elapsed, err: err})
		if ctx.Err() != nil {
			if len(cerr.Attempts) > 1 {
				cerr.Why = fmt.Sprintf("stopped retrying: %v", ctx.Err())
			}
			return nil, cerr
		}
		window := cfg.ConnectRetryWindow
		switch classify(err) {
		case fatal:
			if len(cerr.Attempts) > 1 {
				cerr.Why = "stopped retrying: this error is not transient"
			}
			return nil, cerr
		case authFail:
			window = cfg.AuthRetryWindow
			if err := authHint(err, creds); err != nil {
				cerr.Attempts[len(cerr.Attempts)-1].err = err
			}
		}
		// Jitter spreads the retries of hosts booted together.
		wait := backoff/2 + rand.N(backoff/2+1)
		if elapsed+wait > window {
			if window > 0 {
				cerr.Why = fmt.Sprintf("gave up after %s (%s)", round(elapsed), windowName(classify(err), window))
			}
			return nil, cerr
		}
		last := cerr.Attempts[len(cerr.Attempts)-1].err
		report(notify.Notice{
			Kind:    notify.Retry,
			Host:    cfg.Name,
			Attempt: len(cerr.Attempts),
			Err:     last,
			Wait:    wait,
			Summary: fmt.Sprintf("connection attempt %d to %s failed: %v; retrying in %s (%s, %s left)",
				len(cerr.Attempts), cerr.Addr, last, round(wait), windowName(classify(err), window), round(window-elapsed)),
		})
		select {
		case <-ctx.Done():
			cerr.Why = fmt.Sprintf("stopped retrying: %v", ctx.Err())
			return nil, cerr
		case <-time.After(wait):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// notifier is cfg.Notify, or the context's hook (stderr without one).
func (c Config) notifier(ctx context.Context) notify.Func {
	if c.Notify != nil {
		return c.Notify
	}
	return notify.From(ctx)
}

func windowName(k errKind, d time.Duration) string {
	if k == authFail {
		return fmt.Sprintf("authentication failures are retried for auth_retry_window = %s", d)
	}
	return fmt.Sprintf("connect_retry_window = %s", d)
}

// authHint says which credentials the server refused.
func authHint(err error, cr *credentials) error {
	if cr.what == "" {
		return nil
	}
	return fmt.Errorf("%w (offered %s)", err, cr.what)
}

// dialOnce makes one attempt: TCP, the jump host's handshake and tunnel if
// any, the target's handshake. Each hop gets connect_timeout. Each SSH
// transport writes through a coalescingConn.
func dialOnce(ctx context.Context, cfg Config, creds *credentials) (*conn, error) {
	var nc net.Conn
	var jump *gossh.Client
	policy := hostKeyPolicy{knownHosts: cfg.KnownHostsFile, tofu: cfg.TrustOnFirstUse, name: cfg.Name, notify: cfg.Notify, jump: true}
	if j := cfg.ProxyJump; j != nil {
		jnc, err := dialTCP(ctx, j.Addr(), cfg.ConnectTimeout)
		if err != nil {
			return nil, fmt.Errorf("jump host %s: %w", j.Addr(), err)
		}
		jump, err = handshake(ctx, newCoalescingConn(jnc), j.Addr(), j.User, creds.jump, policy, cfg.ConnectTimeout)
		if err != nil {
			return nil, fmt.Errorf("jump host %s: %w", j.Addr(), err)
		}
		tctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
		nc, err = jump.DialContext(tctx, "tcp", cfg.Addr())
		cancel()
		if err != nil {
			jump.Close()
			return nil, fmt.Errorf("through jump host %s: %w", j.Addr(), err)
		}
	} else {
		var err error
		if nc, err = dialTCP(ctx, cfg.Addr(), cfg.ConnectTimeout); err != nil {
			return nil, err
		}
	}
	policy.pinned, policy.jump = cfg.HostKey, false
	client, err := handshake(ctx, newCoalescingConn(nc), cfg.Addr(), cfg.User, creds.target, policy, cfg.ConnectTimeout)
	if err != nil {
		if jump != nil {
			jump.Close()
		}
		return nil, err
	}
	return newConn(client, jump), nil
}

func dialTCP(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// handshake runs the SSH handshake on nc within timeout. Closing nc is the
// only way to interrupt it (a tunnelled conn has no deadlines).
func handshake(ctx context.Context, nc net.Conn, addr, user string, auth []gossh.AuthMethod, p hostKeyPolicy, timeout time.Duration) (*gossh.Client, error) {
	cb, algos, err := p.callback(addr)
	if err != nil {
		nc.Close()
		return nil, err
	}
	conf := &gossh.ClientConfig{
		User:              user,
		Auth:              auth,
		HostKeyCallback:   cb,
		HostKeyAlgorithms: algos,
		Timeout:           timeout,
	}
	timer := time.AfterFunc(timeout, func() { nc.Close() })
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	c, chans, reqs, err := gossh.NewClientConn(nc, addr, conf)
	timerStopped := timer.Stop()
	ctxStopped := stop()
	if err == nil && (!timerStopped || !ctxStopped) {
		c.Close() // the handshake won the race, but nc is being closed
		err = errHandshakeTimeout
	}
	if err != nil {
		nc.Close()
		if !timerStopped {
			return nil, fmt.Errorf("the SSH handshake with %s did not finish within connect_timeout (%s): %w", addr, timeout, errHandshakeTimeout)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("SSH handshake with %s: %w", addr, ctx.Err())
		}
		return nil, err
	}
	return gossh.NewClient(c, chans, reqs), nil
}
