// Package winrm is wsu's WinRM transport: it opens a remote shell on a
// Windows host with masterzen/winrm, makes sure the agent binary at the
// versioned path is the build wsu ships (the run's windows/amd64 wsu-agent,
// transport/agentbin; uploaded through one small PowerShell bootstrap when
// it is missing or different), starts it and hands its stdin and stdout to
// the agent client, which implements host.Host. See docs/transports.md.
package winrm

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/notify"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// bootstrapCommand is the only PowerShell wsu runs on a host, once per
// agent deployment. It reads the agent from its stdin, writes it to a temp
// file beside the target, flushes it to disk and renames it over the
// target, so the path holds the old binary or the whole new one.
//
// Stdin is streamed in Send messages as large as the envelope allows
// (hundreds of KB each), instead of the thousands of 8 KB `echo >> file`
// commands other tools run. It carries base64 text, one line per message:
// WinRM gives the process a console-mode stdin (WINRS_CONSOLEMODE_STDIN),
// where a raw Ctrl-Z or Ctrl-C byte could end or interrupt the stream;
// FromBase64Transform skips the line breaks. %s is the target path, which
// ConfigFromVars limits to letters, digits, '.', '_', '-', ':' and '\', so
// it needs no quoting inside the single quotes.
const bootstrapCommand = `powershell.exe -NoProfile -NonInteractive -Command "` +
	`$ErrorActionPreference='Stop';$p='%s';$t=$p+'.'+$PID+'.tmp';` +
	`[void][IO.Directory]::CreateDirectory([IO.Path]::GetDirectoryName($p));` +
	`$i=New-Object Security.Cryptography.CryptoStream([Console]::OpenStandardInput(),(New-Object Security.Cryptography.FromBase64Transform),'Read');` +
	`$o=[IO.File]::Create($t);try{$i.CopyTo($o,1MB);$o.Flush($true);$o.Close()}catch{$o.Close();Remove-Item -LiteralPath $t;throw};` +
	`Move-Item -Force -LiteralPath $t -Destination $p"`

// BootstrapFormat is bootstrapCommand, for test endpoints that emulate it
// (test/wsman's SimAgent) outside this package's tests: the benchmarks.
func BootstrapFormat() string { return bootstrapCommand }

// agentStartTimeout bounds the agent's start-up: greeting, probes, hello.
const agentStartTimeout = 60 * time.Second

// AgentPlatform is the agent build the transport deploys.
func AgentPlatform() agentbin.Platform { return agentbin.Platform{OS: "windows", Arch: "amd64"} }

// Dialer is the WinRM transport of one run.
type Dialer struct {
	// Agents supplies the windows/amd64 agent build unless
	// wsu_agent_binary names a file. nil: wsu_agent_binary must.
	Agents *agentbin.Source
}

// Dial is the transport's transport.Dialer.
func (d Dialer) Dial(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error) {
	cfg, err := ConfigFromVars(name, vars)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	if cfg.Agent, err = d.Agents.Resolve(cfg.AgentBinary, AgentPlatform()); err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	h, err := Connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Dial is Dialer{}.Dial: the agent to deploy is the file wsu_agent_binary
// names.
func Dial(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error) {
	return Dialer{}.Dial(ctx, name, vars)
}

// Deployment says how the agent got in place.
type Deployment struct {
	Path   string // the agent's path on the host
	SHA256 string // the agent's sha256, confirmed by its hello
	// Uploaded is set when the agent was (re)deployed, for Reason.
	Uploaded bool
	Reason   string
	Bytes    int64 // bytes uploaded
	Duration time.Duration
	Sends    int64 // Send messages the upload took
}

// MBps is the upload's speed in MB/s (10^6 bytes).
func (d Deployment) MBps() float64 {
	if d.Duration <= 0 {
		return 0
	}
	return float64(d.Bytes) / 1e6 / d.Duration.Seconds()
}

func (d Deployment) String() string {
	if !d.Uploaded {
		return fmt.Sprintf("agent %s is current (sha256 %s)", d.Path, short(d.SHA256))
	}
	return fmt.Sprintf("uploaded agent %s (%s): %.1f MB in %s, %.1f MB/s, %d Send messages",
		d.Path, d.Reason, float64(d.Bytes)/1e6, d.Duration.Round(time.Millisecond), d.MBps(), d.Sends)
}

// Host is a host reached over WinRM: the agent client, and the shell and
// command that carry its streams.
type Host struct {
	*client.Client
	s      *session
	cmd    *command
	deploy Deployment

	closeOnce sync.Once
	closeErr  error
}

var (
	_ host.Host    = (*Host)(nil)
	_ host.Lossy   = (*Host)(nil)
	_ host.Metered = (*Host)(nil)
	// The agent client's, promoted.
	_ host.Firewall         = (*Host)(nil)
	_ host.CertStore        = (*Host)(nil)
	_ host.Rebooter         = (*Host)(nil)
	_ host.OptionalFeatures = (*Host)(nil)
)

// Deployment reports how the agent got in place.
func (h *Host) Deployment() Deployment { return h.deploy }

// Counters are the agent client's (round trips, fs.write content) plus the
// agent binary this connection uploaded through the bootstrap command, as
// AgentBytes.
func (h *Host) Counters() host.Counters {
	c := h.Client.Counters()
	c.AgentBytes += h.deploy.Bytes
	return c
}

// Lost reports whether the connection died: the WinRM exchange failed, or
// the agent's streams broke. Calls then fail with host.ErrConnectionLost.
func (h *Host) Lost() bool { return h.cmd.failed.Load() || h.Client.Lost() }

// Close ends the agent (its stdin closes), then the command and the shell.
// On a lost connection the clean-up runs in the background, bounded by the
// read timeout, and Close returns at once.
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		lost := h.Lost()
		h.Client.Close()
		cleanup := func() error {
			var errs []error
			if !h.cmd.wait(5 * time.Second) {
				errs = append(errs, h.cmd.terminate())
			}
			h.cmd.abandon()
			errs = append(errs, h.s.deleteShell())
			return errors.Join(errs...)
		}
		if lost {
			go cleanup() // a host that comes back frees the shell
			return
		}
		if err := cleanup(); err != nil {
			h.closeErr = fmt.Errorf("closing the WinRM shell: %w", err)
		}
	})
	return h.closeErr
}

// Connect opens a shell on the host, puts the agent in place and starts it.
func Connect(ctx context.Context, cfg Config) (*Host, error) {
	fail := func(err error) (*Host, error) {
		if cfg.HTTPS && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
			err = fmt.Errorf("%w: the listener on port %d speaks plain HTTP. wsu uses HTTPS whatever the port (5985 does not imply HTTP, as it does in Ansible): "+
				"point ansible_port at an HTTPS listener (5986), or set ansible_winrm_scheme=http and ansible_winrm_message_encryption=never to send in plain text", err, cfg.Port)
		}
		return nil, fmt.Errorf("host %s: %w", cfg.Name, err)
	}
	report := notify.From(ctx)
	for _, w := range cfg.Warnings {
		report(notify.Notice{Kind: notify.Warning, Host: cfg.Name, Summary: w})
	}
	if cfg.Agent == nil {
		if cfg.AgentBinary == "" {
			return fail(errors.New("no agent binary to deploy: set wsu_agent_binary to the GOOS=windows build of wsu-agent"))
		}
		cfg.Agent = agentbin.File(cfg.AgentBinary)
	}
	want, err := cfg.Agent.SHA256()
	if err != nil {
		return fail(fmt.Errorf("the agent binary to deploy (wsu_agent_binary): %w", err))
	}
	s, err := newSession(cfg)
	if err != nil {
		return fail(err)
	}
	if err := s.createShell(); err != nil {
		return fail(err)
	}
	done := false
	defer func() {
		if !done {
			s.deleteShell()
		}
	}()

	dep := Deployment{Path: cfg.AgentPath, SHA256: want}
	h, why, err := s.startAgent(ctx, want)
	if err != nil {
		return fail(err)
	}
	if h == nil {
		dep.Uploaded, dep.Reason = true, why
		st, err := s.upload(ctx, cfg.Agent, cfg.AgentPath)
		if err != nil {
			return fail(fmt.Errorf("deploying the agent to %s (%s): %w", cfg.AgentPath, why, err))
		}
		dep.Bytes, dep.Duration, dep.Sends = st.bytes, st.duration, st.sends
		h, why, err = s.startAgent(ctx, want)
		if err != nil {
			return fail(err)
		}
		if h == nil {
			return fail(fmt.Errorf("the agent uploaded to %s does not start as it should: %s", cfg.AgentPath, why))
		}
	}
	h.deploy = dep
	done = true
	return h, nil
}

func agentCommandLine(cfg Config) string {
	return strings.Join(append([]string{cfg.AgentPath, "agent"}, cfg.AgentArgs...), " ")
}

// startAgent starts the agent at the configured path. It returns the host
// when the agent answers with the wanted sha256. It returns no host and the
// reason when the agent must be deployed: missing, failing to start, another
// build or another protocol. Errors are what deploying would not fix: the
// connection, or an agent that hangs in its start-up.
func (s *session) startAgent(ctx context.Context, want string) (*Host, string, error) {
	c, err := s.start("the agent", agentCommandLine(s.cfg))
	if err != nil {
		return nil, "", err
	}
	dctx, cancel := context.WithTimeout(ctx, agentStartTimeout)
	defer cancel()
	cl, err := client.Dial(dctx, c.stdout, c)
	if err != nil {
		c.Close() // EOF: an agent that is running leaves
		if !c.wait(5 * time.Second) {
			c.terminate()
		}
		c.abandon()
		var mismatch *proto.MismatchError
		switch {
		case c.failed.Load():
			return nil, "", c.err
		case ctx.Err() != nil:
			return nil, "", fmt.Errorf("starting the agent: %w", ctx.Err())
		case dctx.Err() != nil:
			return nil, "", fmt.Errorf("the agent %s did not finish its start-up within %s", s.cfg.AgentPath, agentStartTimeout)
		case errors.As(err, &mismatch):
			return nil, fmt.Sprintf("the agent there (wsu %s) speaks protocol %d, not %d", mismatch.AgentVersion, mismatch.AgentProtocol, proto.Protocol), nil
		}
		return nil, fmt.Sprintf("the agent did not start: %s", c.describe()), nil
	}
	if got := cl.Hello().AgentSHA256; got != want {
		cl.Close() // the agent exits when its stdin ends
		if !c.wait(10 * time.Second) {
			c.terminate()
		}
		c.abandon()
		return nil, fmt.Sprintf("the agent there has sha256 %s, not %s", short(got), short(want)), nil
	}
	return &Host{Client: cl, s: s, cmd: c}, "", nil
}

type uploadStats struct {
	bytes    int64
	duration time.Duration
	sends    int64
}

// upload copies the agent build to path on the host through the bootstrap
// command's stdin.
func (s *session) upload(ctx context.Context, agent *agentbin.Binary, path string) (uploadStats, error) {
	f, _, err := agent.Open()
	if err != nil {
		return uploadStats{}, err
	}
	defer f.Close()
	c, err := s.start("the upload command", fmt.Sprintf(bootstrapCommand, path))
	if err != nil {
		return uploadStats{}, err
	}
	defer c.abandon()
	go io.Copy(io.Discard, c.stdout) // the Receive loop must not block on it

	sends0, start := s.sends.Load(), time.Now()
	n, err := s.stream(ctx, f, c)
	if err == nil {
		err = c.Close()
	}
	if err == nil {
		select {
		case <-c.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	st := uploadStats{bytes: n, duration: time.Since(start), sends: s.sends.Load() - sends0}
	switch {
	case ctx.Err() != nil:
		c.terminate()
		return st, ctx.Err()
	case err != nil:
		// The bootstrap may have failed first (a Send into a closed pipe):
		// its exit says why.
		if !c.wait(10 * time.Second) {
			c.terminate()
		}
		return st, fmt.Errorf("%w (upload command: %s)", err, c.describe())
	case c.failed.Load():
		return st, c.err
	case c.exitCode != 0:
		return st, fmt.Errorf("the upload command failed: %s", c.describe())
	}
	return st, nil
}

// stream sends r to w as base64 lines, each sized to fill one Send. A
// goroutine reads and encodes the next line while the current one is on
// the wire.
func (s *session) stream(ctx context.Context, r io.Reader, w io.Writer) (int64, error) {
	raw := max((s.sendCapacity()-2)/4*3, 3) // a multiple of 3: no padding mid-stream
	type chunk struct {
		line []byte
		n    int
		err  error
	}
	free := make(chan []byte, 3)
	for range 3 {
		free <- make([]byte, 0, base64.StdEncoding.EncodedLen(raw)+2)
	}
	full := make(chan chunk, 2)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		in := make([]byte, raw)
		for {
			var line []byte
			select {
			case line = <-free:
			case <-stop:
				return
			}
			n, err := io.ReadFull(r, in)
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			line = line[:base64.StdEncoding.EncodedLen(n)]
			base64.StdEncoding.Encode(line, in[:n])
			line = append(line, '\r', '\n')
			select {
			case full <- chunk{line, n, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var total int64
	for {
		var ch chunk
		select {
		case ch = <-full:
		case <-ctx.Done():
			return total, ctx.Err()
		}
		if ch.n > 0 {
			if _, err := w.Write(ch.line); err != nil {
				return total, err
			}
			total += int64(ch.n)
		}
		free <- ch.line[:0]
		switch {
		case ch.err == io.EOF:
			return total, nil
		case ch.err != nil:
			return total, fmt.Errorf("reading the agent binary: %w", ch.err)
		}
	}
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	if sum == "" {
		return "(none)"
	}
	return sum
}
