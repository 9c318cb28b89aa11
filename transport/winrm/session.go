package winrm

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mzwinrm "github.com/masterzen/winrm"
	"github.com/masterzen/winrm/soap"
)

// ErrUnauthorized wraps a 401 from the host: wrong user or password, or an
// authentication scheme the host does not allow.
var ErrUnauthorized = errors.New("the host refused the credentials (HTTP 401)")

// session is one remote shell on a host, driven through masterzen/winrm.
//
// It builds and parses the WS-Management messages with masterzen/winrm's
// exported request and response functions and posts them through its
// transports (Basic, or NTLM via go-ntlmssp), but runs commands itself
// instead of through winrm.Command: Command.Stdin splits input by raw size,
// so a full chunk grows past MaxEnvelopeSize once base64-encoded, and it
// drops the host's fault; and its Receive loop cannot tell a fault from an
// answer. Here every response is checked for a fault, Send messages are
// sized to the envelope, and a TimedOut Receive is simply asked again.
type session struct {
	cfg    Config
	client *mzwinrm.Client
	tr     mzwinrm.Transporter
	params *mzwinrm.Parameters
	url    string

	shellID string

	// sendEnvelope is the size Send messages are built to; halved when the
	// host answers EncodingLimit.
	sendEnvelope atomic.Int64
	sendOverhead int // a Send envelope's size without data

	// Counters, for the deployment report and tests.
	sends    atomic.Int64
	timeouts atomic.Int64
}

func newSession(cfg Config) (*session, error) {
	if cfg.CAPEM != nil && !x509.NewCertPool().AppendCertsFromPEM(cfg.CAPEM) {
		// Checked here because masterzen's NTLM transport ignores a CA it
		// cannot parse and falls back to the system roots.
		return nil, errors.New("winrm: the CA file holds no usable PEM certificate")
	}
	host := cfg.Host
	if strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		host = "[" + host + "]" // an IPv6 literal in masterzen's URL
	}
	ep := &mzwinrm.Endpoint{
		Host:     host,
		Port:     cfg.Port,
		HTTPS:    cfg.HTTPS,
		Insecure: cfg.Insecure,
		CACert:   cfg.CAPEM,
		Timeout:  cfg.ReadTimeout, // the HTTP response header timeout
	}
	dial := deadlineDialer(cfg.ReadTimeout)
	var tr mzwinrm.Transporter
	if cfg.Auth == "basic" {
		tr = mzwinrm.NewClientWithDial(dial)
	} else {
		tr = mzwinrm.NewClientNTLMWithDial(dial)
	}
	params := mzwinrm.NewParameters(isoDuration(cfg.OperationTimeout), "en-US", cfg.MaxEnvelopeSize)
	params.TransportDecorator = func() mzwinrm.Transporter { return tr }
	client, err := mzwinrm.NewClientWithParameters(ep, cfg.User, cfg.Password, params)
	if err != nil {
		return nil, fmt.Errorf("winrm: %w", err)
	}
	scheme := "http"
	if cfg.HTTPS {
		scheme = "https"
	}
	s := &session{
		cfg:    cfg,
		client: client,
		tr:     tr,
		params: params,
		url:    fmt.Sprintf("%s://%s:%d/wsman", scheme, host, cfg.Port),
	}
	s.sendEnvelope.Store(int64(cfg.MaxEnvelopeSize))
	return s, nil
}

// isoDuration spells a duration as WS-Management's xs:duration.
func isoDuration(d time.Duration) string {
	return fmt.Sprintf("PT%.3fS", d.Seconds())
}

// deadlineDialer gives every read and write on a connection the read
// timeout, so a host that vanishes mid-message cannot hang the transport
// (the response header timeout only covers the wait for an answer).
func deadlineDialer(timeout time.Duration) func(network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	return func(network, addr string) (net.Conn, error) {
		c, err := d.Dial(network, addr)
		if err != nil {
			return nil, err
		}
		return &deadlineConn{Conn: c, timeout: timeout}, nil
	}
}

type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	c.SetReadDeadline(time.Now().Add(c.timeout))
	return c.Conn.Read(p)
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.Conn.Write(p)
}

// post sends one message; a fault in the answer is returned as a *Fault.
func (s *session) post(msg *soap.SoapMessage) (string, error) {
	body, err := s.tr.Post(s.client, msg)
	if err != nil {
		return "", s.explain(err)
	}
	if f := parseFault(body); f != nil {
		return "", f
	}
	return body, nil
}

// explain turns masterzen's transport errors into ones that say what to do.
func (s *session) explain(err error) error {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	switch {
	case strings.Contains(err.Error(), "http response error: 401"), strings.Contains(err.Error(), "http error 401"):
		return fmt.Errorf("winrm %s as %q (%s): %w", s.url, s.cfg.User, s.cfg.Auth, ErrUnauthorized)
	case errors.As(err, &unknownCA):
		return fmt.Errorf("winrm %s: the server certificate is not signed by a trusted CA "+
			"(set winrm_ca_file to the CA's PEM file, or ansible_winrm_server_cert_validation=ignore for a test host): %w", s.url, err)
	case errors.As(err, &hostname):
		return fmt.Errorf("winrm %s: the server certificate does not name this host: %w", s.url, err)
	}
	return fmt.Errorf("winrm %s: %w", s.url, err)
}

func (s *session) createShell() error {
	body, err := s.post(mzwinrm.NewOpenShellRequest(s.url, s.params))
	if err != nil {
		return err
	}
	id, err := mzwinrm.ParseOpenShellResponse(body)
	if err != nil || id == "" {
		return fmt.Errorf("winrm %s: the answer to Create holds no ShellId", s.url)
	}
	s.shellID = id
	// The fixed part of a Send envelope, measured once; 256 bytes spare
	// for ids longer than the placeholder.
	empty := mzwinrm.NewSendInputRequest(s.url, id, "00000000-0000-0000-0000-000000000000", nil, true, s.params)
	s.sendOverhead = len(empty.String()) + 256
	return nil
}

func (s *session) deleteShell() error {
	if s.shellID == "" {
		return nil
	}
	_, err := s.post(mzwinrm.NewDeleteShellRequest(s.url, s.shellID, s.params))
	return err
}

// sendCapacity is how many stdin bytes fit in one Send: the envelope less
// its fixed part, base64-encoded.
func (s *session) sendCapacity() int {
	return (int(s.sendEnvelope.Load()) - s.sendOverhead) / 4 * 3
}

// send delivers a prefix of data (all of it if it fits in one message) to a
// command's stdin and returns its length. eof marks the end of stdin once
// all of data is sent. An EncodingLimit fault means the host refused the
// message whole: the envelope is made smaller and the message sent again.
func (s *session) send(commandID string, data []byte, eof bool) (int, error) {
	for {
		n := min(len(data), s.sendCapacity())
		_, err := s.post(mzwinrm.NewSendInputRequest(s.url, s.shellID, commandID, data[:n], eof && n == len(data), s.params))
		if isEncodingLimit(err) {
			if cur := s.sendEnvelope.Load(); cur > minEnvelopeSize {
				s.sendEnvelope.CompareAndSwap(cur, smallerEnvelope(cur))
				continue
			}
		}
		if err != nil {
			return 0, err
		}
		s.sends.Add(1)
		return n, nil
	}
}

// smallerEnvelope is the next size to try after the host refused cur:
// Windows' older default (150 KB) first, then halves.
func smallerEnvelope(cur int64) int64 {
	const legacy = 150 * 1024 // MaxEnvelopeSizekb before Windows Server 2012
	if cur > legacy {
		return legacy
	}
	return max(cur/2, minEnvelopeSize)
}

// command is a process started in the shell. Its stdout is a pipe fed by a
// Receive loop; stdin is fed with Send through Write and Close.
type command struct {
	s    *session
	id   string
	line string
	name string // for messages

	stdout  *io.PipeReader
	stdoutW *io.PipeWriter
	stderr  *headBuffer

	quit     chan struct{} // closed to stop the Receive loop
	quitOnce sync.Once
	done     chan struct{} // closed when the Receive loop ended
	exitCode int           // set before done closes
	finished bool          // the host reported CommandState Done
	err      error         // why the loop ended otherwise
	failed   atomic.Bool   // the loop ended on a transport error

	inMu     sync.Mutex
	inClosed bool
}

// start runs a command line in the shell.
func (s *session) start(name, line string) (*command, error) {
	body, err := s.post(mzwinrm.NewExecuteCommandRequest(s.url, s.shellID, line, nil, s.params))
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	id, err := mzwinrm.ParseExecuteCommandResponse(body)
	if err != nil || id == "" {
		return nil, fmt.Errorf("winrm %s: the answer to Command holds no CommandId", s.url)
	}
	r, w := io.Pipe()
	c := &command{s: s, id: id, line: line, name: name, stdout: r, stdoutW: w,
		stderr: &headBuffer{limit: 64 << 10}, quit: make(chan struct{}), done: make(chan struct{})}
	go c.receive()
	return c, nil
}

// receive polls the command's output until it ends. A TimedOut fault only
// means there was nothing to say within the OperationTimeout, so it asks
// again; nothing was taken from the streams.
func (c *command) receive() {
	for {
		select {
		case <-c.quit:
			c.err = errors.New("abandoned")
			c.stdoutW.CloseWithError(io.ErrClosedPipe)
			close(c.done)
			return
		default:
		}
		body, err := c.s.post(mzwinrm.NewGetOutputRequest(c.s.url, c.s.shellID, c.id, "stdout stderr", c.s.params))
		if isTimedOut(err) {
			c.s.timeouts.Add(1)
			continue
		}
		if err != nil {
			c.err = err
			c.failed.Store(true)
			c.stdoutW.CloseWithError(fmt.Errorf("receiving the output of %s: %w", c.name, err))
			close(c.done)
			return
		}
		// Writes to the stdout pipe block until read: the agent client's
		// reader paces the polling.
		done, code, err := mzwinrm.ParseSlurpOutputErrResponse(body, c.stdoutW, c.stderr)
		if err != nil {
			c.err = fmt.Errorf("winrm %s: malformed Receive answer: %w", c.s.url, err)
			c.failed.Store(true)
			c.stdoutW.CloseWithError(c.err)
			close(c.done)
			return
		}
		if done {
			c.exitCode, c.finished = code, true
			c.stdoutW.Close()
			close(c.done)
			return
		}
	}
}

// wait waits up to d for the command to end.
func (c *command) wait(d time.Duration) bool {
	select {
	case <-c.done:
		return true
	case <-time.After(d):
		return false
	}
}

// Write sends p to the command's stdin, in as many Send messages as the
// envelope size needs.
func (c *command) Write(p []byte) (int, error) {
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if c.inClosed {
		return 0, io.ErrClosedPipe
	}
	n := 0
	for n < len(p) {
		k, err := c.s.send(c.id, p[n:], false)
		n += k
		if err != nil {
			return n, fmt.Errorf("sending to the stdin of %s: %w", c.name, err)
		}
	}
	return n, nil
}

// Close ends the command's stdin.
func (c *command) Close() error {
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if c.inClosed {
		return nil
	}
	c.inClosed = true
	if c.failed.Load() {
		return nil // the host is gone; nothing to tell it
	}
	_, err := c.s.send(c.id, nil, true)
	return err
}

// terminate signals the command to stop (the host kills the process).
func (c *command) terminate() error {
	_, err := c.s.post(mzwinrm.NewSignalRequest(c.s.url, c.s.shellID, c.id, c.s.params))
	return err
}

// abandon stops reading the command's output: the Receive loop ends after
// the request in flight.
func (c *command) abandon() {
	c.quitOnce.Do(func() { close(c.quit) })
	c.stdout.CloseWithError(io.ErrClosedPipe)
}

// describe says how a command ended, for error messages.
func (c *command) describe() string {
	select {
	case <-c.done:
	default:
		return "still running"
	}
	if !c.finished {
		return c.err.Error()
	}
	msg := fmt.Sprintf("exit code %d", c.exitCode)
	if e := c.stderr.String(); e != "" {
		msg += ": " + e
	}
	return msg
}
