// Package wsmantest is a WS-Management TEST endpoint: the subset of WinRM
// (MS-WSMV's text-based command shell over WS-Management, DMTF DSP0226)
// that wsu's WinRM transport uses, served on 127.0.0.1 so tests can drive
// an unmodified WinRM client (masterzen/winrm) without a Windows machine.
//
// It is not WinRM and must never face a network. It implements:
//
//   - HTTPS with a CA and server certificate generated in-process (or plain
//     HTTP), on a free port of 127.0.0.1;
//   - Basic authentication and NTLMv2 inside HTTP Negotiate (connection
//     based, as on Windows); a wrong user or password is a 401;
//   - the shell actions Create, Command, Send (stdin), Receive (stdout and
//     stderr, CommandState Done with the ExitCode), Signal (terminate,
//     ctrl_c) and Delete;
//   - MaxEnvelopeSize: a request larger than the endpoint's limit is refused
//     with a wsman:EncodingLimit fault (ServiceEnvelopeLimit), and Receive
//     answers fit in the size the client asked for;
//   - OperationTimeout: a Receive with no output within the request's
//     timeout is answered with a wsman:TimedOut fault, as real WinRM does.
//
// Commands do not run in a shell: a Handler decides what a command line
// does. SimAgent is the handler for wsu's transport tests.
package wsmantest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Handler runs one command line. It reads the command's stdin, writes its
// output and returns the exit code. ctx is cancelled when the client sends
// a signal (context.Cause is ErrTerminated or ErrCtrlC) or deletes the
// shell; the handler must then return promptly.
type Handler func(ctx context.Context, cmd *Cmd) (exitCode int)

// Cmd is a command as the handler sees it.
type Cmd struct {
	// Line is the command line: rsp:Command and the rsp:Arguments, joined
	// with spaces, as cmd.exe would receive it.
	Line   string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Options configure an endpoint.
type Options struct {
	// User and Password are the one account the endpoint accepts
	// (default "wsu" / "Wsu-Test-Passw0rd").
	User, Password string
	// Domain is the NetBIOS domain the NTLM challenge names (default
	// "WSMANTEST").
	Domain string
	// DisableBasic and DisableNTLM turn an authentication scheme off.
	DisableBasic, DisableNTLM bool
	// HTTP serves plain HTTP instead of HTTPS.
	HTTP bool
	// MaxEnvelopeSize is the largest request envelope accepted, in bytes
	// (default 512000: WinRM's MaxEnvelopeSizekb of 500).
	MaxEnvelopeSize int
	// Handler runs the commands (default: every command fails with
	// "unknown command").
	Handler Handler
}

// Stats count what the endpoint saw.
type Stats struct {
	Requests     int      // authenticated requests
	AuthFailures int      // 401s for bad credentials
	Shells       int      // shells created
	Commands     []string // command lines, in order
	Sends        int      // Send requests that delivered stdin
	StdinBytes   int64    // stdin bytes delivered
	MaxEnvelope  int      // the largest request envelope accepted, bytes
	Oversized    int      // requests refused for their size
	TimedOut     int      // Receives answered with w:TimedOut
	Signals      []string // signal codes received
}

// Server is a running endpoint.
type Server struct {
	// URL is the endpoint, e.g. https://127.0.0.1:40123/wsman.
	URL  string
	Host string
	Port int
	// CA signed the server certificate (nil with Options.HTTP).
	CA *CA
	// User and Password are the account the endpoint accepts.
	User, Password string

	opts   Options
	ntlm   ntlmServer
	hs     *httptest.Server
	ctx    context.Context // ends when the server closes
	cancel context.CancelFunc

	mu      sync.Mutex
	shells  map[string]*shell
	stats   Stats
	stalled bool
}

type connKey struct{}

// connState is the NTLM state of one TCP connection: NTLM authenticates
// the connection, not each request.
type connState struct {
	mu        sync.Mutex
	challenge []byte
	user      string
}

// Start starts an endpoint on 127.0.0.1 at a free port.
func Start(opts Options) (*Server, error) {
	if opts.User == "" {
		opts.User, opts.Password = "wsu", "Wsu-Test-Passw0rd"
	}
	if opts.Domain == "" {
		opts.Domain = "WSMANTEST"
	}
	if opts.MaxEnvelopeSize == 0 {
		opts.MaxEnvelopeSize = 512000
	}
	if opts.Handler == nil {
		opts.Handler = Unknown
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		User:     opts.User,
		Password: opts.Password,
		opts:     opts,
		ntlm:     ntlmServer{user: opts.User, password: opts.Password, domain: strings.ToUpper(opts.Domain), computer: "WSMANTEST-HOST"},
		ctx:      ctx,
		cancel:   cancel,
		shells:   map[string]*shell{},
	}
	s.hs = httptest.NewUnstartedServer(s)
	s.hs.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, &connState{})
	}
	// A refused client certificate check is a test case, not noise.
	s.hs.Config.ErrorLog = log.New(io.Discard, "", 0)
	if opts.HTTP {
		s.hs.Start()
	} else {
		ca, err := NewCA("wsu wsmantest CA")
		if err != nil {
			cancel()
			return nil, err
		}
		cert, err := ca.ServerCert()
		if err != nil {
			cancel()
			return nil, err
		}
		s.CA = ca
		s.hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.hs.StartTLS()
	}
	addr := s.hs.Listener.Addr().(*net.TCPAddr)
	s.Host, s.Port = addr.IP.String(), addr.Port
	s.URL = s.hs.URL + "/wsman"
	return s, nil
}

// Close stops the endpoint: every command is cancelled and every
// connection closed.
func (s *Server) Close() {
	s.cancel()
	s.mu.Lock()
	shells := s.shells
	s.shells = map[string]*shell{}
	s.mu.Unlock()
	for _, sh := range shells {
		sh.close(ErrShellGone)
	}
	s.hs.CloseClientConnections()
	s.hs.Close()
}

// CloseClientConnections cuts every TCP connection, as a network change on
// the host does; shells and commands live on, as on Windows.
func (s *Server) CloseClientConnections() { s.hs.CloseClientConnections() }

// Stall makes the endpoint stop answering (a host that vanished from the
// network) until Stall(false).
func (s *Server) Stall(on bool) {
	s.mu.Lock()
	s.stalled = on
	s.mu.Unlock()
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Commands = append([]string(nil), st.Commands...)
	st.Signals = append([]string(nil), st.Signals...)
	return st
}

// Unknown is the default handler: no command exists.
func Unknown(_ context.Context, cmd *Cmd) int {
	fmt.Fprintf(cmd.Stderr, "unknown command: %s\r\n", cmd.Line)
	return 1
}

// ServeHTTP implements the endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/wsman" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if s.stall(r.Context()) {
		return
	}
	// Read the whole body before anything else, even for a 401: a request
	// body left unread closes the connection, and NTLM's challenge belongs
	// to the connection.
	limit := s.opts.MaxEnvelopeSize
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		return
	}
	size := len(body)
	if size > limit {
		n, _ := io.Copy(io.Discard, r.Body)
		size += int(n)
	}
	if !s.authenticate(w, r) {
		return
	}
	s.count(func(st *Stats) { st.Requests++ })
	if size > limit {
		s.count(func(st *Stats) { st.Oversized++ })
		s.fault(w, "", faultEnvelopeTooLarge(size, limit))
		return
	}
	var req request
	small, lifted := liftLongText(body)
	if err := xml.Unmarshal(small, &req); err != nil {
		s.fault(w, "", faultSchema(err.Error()))
		return
	}
	req.lifted = lifted
	s.count(func(st *Stats) { st.MaxEnvelope = max(st.MaxEnvelope, size) })
	s.dispatch(w, r, &req)
}

// stall blocks while the endpoint is stalled; true if the request should
// get no answer at all.
func (s *Server) stall(ctx context.Context) bool {
	for {
		s.mu.Lock()
		on := s.stalled
		s.mu.Unlock()
		if !on {
			return false
		}
		select {
		case <-ctx.Done():
			return true
		case <-s.ctx.Done():
			return true
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	f(&s.stats)
	s.mu.Unlock()
}

// authenticate checks Basic credentials or runs NTLM; it answers 401 itself
// and returns false when the request may not proceed.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) bool {
	cs, _ := r.Context().Value(connKey{}).(*connState)
	if cs == nil {
		cs = &connState{}
	}
	authz := r.Header.Get("Authorization")
	scheme, token, _ := strings.Cut(authz, " ")
	switch {
	case strings.EqualFold(scheme, "Basic") && !s.opts.DisableBasic:
		user, pass, ok := r.BasicAuth()
		if ok && s.userMatches(user) && pass == s.opts.Password {
			return true
		}
		s.count(func(st *Stats) { st.AuthFailures++ })
		s.unauthorized(w, "")
		return false
	case (strings.EqualFold(scheme, "Negotiate") || strings.EqualFold(scheme, "NTLM")) && !s.opts.DisableNTLM:
		msg, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
		if err != nil {
			s.unauthorized(w, "")
			return false
		}
		t, err := messageType(msg)
		if err != nil {
			s.unauthorized(w, "")
			return false
		}
		cs.mu.Lock()
		defer cs.mu.Unlock()
		switch t {
		case 1:
			cs.user = "" // a new handshake starts over
			chal, sc, err := s.ntlm.challenge(msg)
			if err != nil {
				s.unauthorized(w, "")
				return false
			}
			cs.challenge = sc
			s.unauthorized(w, scheme+" "+base64.StdEncoding.EncodeToString(chal))
			return false
		case 3:
			if cs.challenge == nil {
				s.unauthorized(w, "")
				return false
			}
			user, err := s.ntlm.authenticate(msg, cs.challenge)
			cs.challenge = nil
			if err != nil {
				s.count(func(st *Stats) { st.AuthFailures++ })
				s.unauthorized(w, "")
				return false
			}
			cs.user = user
			return true
		}
		s.unauthorized(w, "")
		return false
	case authz == "":
		cs.mu.Lock()
		ok := cs.user != ""
		cs.mu.Unlock()
		if ok {
			return true
		}
	}
	s.unauthorized(w, "")
	return false
}

// userMatches accepts the user as "user", ".\user" or "DOMAIN\user".
func (s *Server) userMatches(u string) bool {
	if dom, name, ok := strings.Cut(u, `\`); ok {
		if dom != "." && !strings.EqualFold(dom, s.opts.Domain) {
			return false
		}
		u = name
	}
	return strings.EqualFold(u, s.opts.User)
}

func (s *Server) unauthorized(w http.ResponseWriter, challenge string) {
	h := w.Header()
	if challenge != "" {
		h.Add("WWW-Authenticate", challenge)
	} else {
		if !s.opts.DisableNTLM {
			h.Add("WWW-Authenticate", "Negotiate")
		}
		if !s.opts.DisableBasic {
			h.Add("WWW-Authenticate", `Basic realm="WSMAN"`)
		}
	}
	h.Set("Content-Length", "0")
	w.WriteHeader(http.StatusUnauthorized)
}

func (s *Server) reply(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/soap+xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

func (s *Server) fault(w http.ResponseWriter, relatesTo string, f *fault) {
	s.reply(w, http.StatusInternalServerError, f.xml(relatesTo))
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, req *request) {
	h := &req.Header
	rel := strings.TrimSpace(h.MessageID)
	action := strings.TrimSpace(h.Action)
	switch action {
	case actionCreate, actionDelete, actionCommand, actionSend, actionReceive, actionSignal:
	default:
		s.fault(w, rel, faultAction(action))
		return
	}
	if uri := strings.TrimSpace(h.ResourceURI); uri != resourceCmd {
		s.fault(w, rel, faultResource(uri))
		return
	}
	// The client's MaxEnvelopeSize bounds our answer; the endpoint's own
	// limit caps it (MS-WSMV 3.1.4.1.7).
	maxReply := s.opts.MaxEnvelopeSize
	if v := strings.TrimSpace(h.MaxEnvelopeSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.fault(w, rel, faultSchema("MaxEnvelopeSize is not a number"))
			return
		}
		if n < 8192 {
			s.fault(w, rel, faultMinEnvelope(n))
			return
		}
		maxReply = min(maxReply, n)
	}
	timeout := 60 * time.Second
	if v := strings.TrimSpace(h.OperationTimeout); v != "" {
		d, ok := parseDuration(v)
		if !ok {
			s.fault(w, rel, faultSchema("OperationTimeout is not an xs:duration"))
			return
		}
		timeout = d
	}

	if action == actionCreate {
		if req.Body.Shell == nil {
			s.fault(w, rel, faultSchema("Create needs an rsp:Shell body"))
			return
		}
		sh := &shell{id: newUUID(), owner: s.opts.User, commands: map[string]*command{}}
		s.mu.Lock()
		s.shells[sh.id] = sh
		s.stats.Shells++
		s.mu.Unlock()
		s.reply(w, http.StatusOK, envelope(nsTransfer+"/CreateResponse", rel,
			`<x:ResourceCreated><a:Address>`+s.URL+`</a:Address><a:ReferenceParameters><w:ResourceURI>`+resourceCmd+
				`</w:ResourceURI><w:SelectorSet><w:Selector Name="ShellId">`+sh.id+`</w:Selector></w:SelectorSet></a:ReferenceParameters></x:ResourceCreated>`+
				`<rsp:Shell><rsp:ShellId>`+sh.id+`</rsp:ShellId><rsp:ResourceUri>`+resourceCmd+`</rsp:ResourceUri><rsp:Owner>`+xmlText(sh.owner)+
				`</rsp:Owner><rsp:InputStreams>stdin</rsp:InputStreams><rsp:OutputStreams>stdout stderr</rsp:OutputStreams></rsp:Shell>`))
		return
	}

	shellID := req.selector("ShellId")
	s.mu.Lock()
	sh := s.shells[shellID]
	s.mu.Unlock()
	if sh == nil {
		s.fault(w, rel, faultNoShell(shellID))
		return
	}

	switch action {
	case actionDelete:
		s.mu.Lock()
		delete(s.shells, shellID)
		s.mu.Unlock()
		sh.close(ErrShellGone)
		s.reply(w, http.StatusOK, envelope(nsTransfer+"/DeleteResponse", rel, ""))

	case actionCommand:
		cl := req.Body.CommandLine
		if cl == nil {
			s.fault(w, rel, faultSchema("Command needs an rsp:CommandLine body"))
			return
		}
		line := strings.Join(append([]string{cl.Command}, cl.Arguments...), " ")
		c := newCommand(s.ctx, line)
		sh.mu.Lock()
		sh.commands[c.id] = c
		sh.mu.Unlock()
		s.count(func(st *Stats) { st.Commands = append(st.Commands, line) })
		go c.run(s.opts.Handler)
		s.reply(w, http.StatusOK, envelope(nsShell+"/CommandResponse", rel,
			`<rsp:CommandResponse><rsp:CommandId>`+c.id+`</rsp:CommandId></rsp:CommandResponse>`))

	case actionSend:
		if req.Body.Send == nil {
			s.fault(w, rel, faultSchema("Send needs an rsp:Send body"))
			return
		}
		for _, st := range req.Body.Send.Streams {
			if st.Name != "stdin" {
				s.fault(w, rel, faultSchema(fmt.Sprintf("cannot send to stream %q", st.Name)))
				return
			}
			c := sh.command(st.CommandID)
			if c == nil {
				s.fault(w, rel, faultNoCommand(st.CommandID))
				return
			}
			data, err := decodeBase64(unlift(st.Data, req.lifted))
			if err != nil {
				s.fault(w, rel, faultSchema("stream content is not base64: "+err.Error()))
				return
			}
			end := st.End == "true" || st.End == "1"
			if err := c.send(data, end); err != nil {
				s.fault(w, rel, faultPipeClosed())
				return
			}
			s.count(func(st *Stats) { st.Sends++; st.StdinBytes += int64(len(data)) })
		}
		s.reply(w, http.StatusOK, envelope(nsShell+"/SendResponse", rel, `<rsp:SendResponse/>`))

	case actionReceive:
		if req.Body.Receive == nil {
			s.fault(w, rel, faultSchema("Receive needs an rsp:Receive body"))
			return
		}
		id := req.Body.Receive.DesiredStream.CommandID
		c := sh.command(id)
		if c == nil {
			s.fault(w, rel, faultNoCommand(id))
			return
		}
		// Room for the streams once base64-encoded, after the envelope.
		budget := (maxReply - 2048) / 4 * 3
		if budget <= 0 {
			s.fault(w, rel, faultMinEnvelope(maxReply))
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		stop := context.AfterFunc(s.ctx, cancel)
		out, ok, err := c.receive(ctx, timeout, budget)
		stop()
		cancel()
		if err != nil {
			return // the client or the endpoint went away
		}
		if !ok {
			s.count(func(st *Stats) { st.TimedOut++ })
			s.fault(w, rel, faultTimedOut())
			return
		}
		s.reply(w, http.StatusOK, envelope(nsShell+"/ReceiveResponse", rel, receiveBody(c.id, out)))

	case actionSignal:
		sig := req.Body.Signal
		if sig == nil {
			s.fault(w, rel, faultSchema("Signal needs an rsp:Signal body"))
			return
		}
		c := sh.command(sig.CommandID)
		if c == nil {
			s.fault(w, rel, faultNoCommand(sig.CommandID))
			return
		}
		code := strings.TrimSpace(sig.Code)
		switch code {
		case signalTerm:
			c.cancel(ErrTerminated)
		case signalCtrlC, signalCtrlBrk:
			c.cancel(ErrCtrlC)
		default:
			s.fault(w, rel, faultSchema("unknown signal code "+code))
			return
		}
		s.count(func(st *Stats) { st.Signals = append(st.Signals, code) })
		s.reply(w, http.StatusOK, envelope(nsShell+"/SignalResponse", rel, `<rsp:SignalResponse/>`))
	}
}

func receiveBody(id string, out output) string {
	var b strings.Builder
	b.Grow(base64.StdEncoding.EncodedLen(len(out.stdout)+len(out.stderr)) + 512)
	b.WriteString(`<rsp:ReceiveResponse>`)
	stream := func(name string, data []byte) {
		if len(data) == 0 && !out.done {
			return
		}
		b.WriteString(`<rsp:Stream Name="` + name + `" CommandId="` + id + `"`)
		if out.done {
			b.WriteString(` End="true"`)
		}
		b.WriteString(`>`)
		b.WriteString(base64.StdEncoding.EncodeToString(data))
		b.WriteString(`</rsp:Stream>`)
	}
	stream("stdout", out.stdout)
	stream("stderr", out.stderr)
	if out.done {
		b.WriteString(`<rsp:CommandState CommandId="` + id + `" State="` + stateDone + `"><rsp:ExitCode>` +
			strconv.Itoa(out.exitCode) + `</rsp:ExitCode></rsp:CommandState>`)
	} else {
		b.WriteString(`<rsp:CommandState CommandId="` + id + `" State="` + stateRunning + `"/>`)
	}
	b.WriteString(`</rsp:ReceiveResponse>`)
	return b.String()
}

func (sh *shell) command(id string) *command {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.commands[strings.TrimSpace(id)]
}

// close cancels every command of the shell.
func (sh *shell) close(cause error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for _, c := range sh.commands {
		c.cancel(cause)
	}
}

// decodeBase64 decodes stream content, which may be wrapped.
func decodeBase64(b []byte) ([]byte, error) {
	if bytes.ContainsAny(b, " \t\r\n") {
		b = bytes.Join(bytes.Fields(b), nil)
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
	n, err := base64.StdEncoding.Decode(out, b)
	return out[:n], err
}

func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}
