// Package agent is the node side of wsu: Serve answers Host API requests
// from a wsu client over the agent's stdin/stdout, executing them with a
// platform backend. See docs/agent-protocol.md.
package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
)

// ServerInfo identifies the agent in its greeting and hello.
type ServerInfo struct {
	// Version is the agent's wsu version.
	Version string
	// SHA256 is the hex sha256 of the agent binary (see SelfSHA256), which
	// tells the controller whether the agent is the build it wants.
	SHA256 string
	// Platform names the backend, e.g. "windows" or "sim".
	Platform string
}

const (
	// chunkSize is the size of the data frames the agent sends.
	chunkSize = 256 << 10
	// maxInFlight bounds concurrent requests; past it a request is refused
	// rather than queued, since queueing would stall the reader.
	maxInFlight = 1024
	// maxStdin bounds a proc.run stdin stream, which the Host API takes
	// whole.
	maxStdin = 64 << 20
)

// shutdownGrace is how long Serve waits for running requests after the
// client left; a backend call that ignores its context must not keep the
// agent alive for ever. A variable so tests can shorten it.
const shutdownGrace = 10 * time.Second

// Serve runs the agent's side of the protocol on in/out until the client
// closes in (nil: a clean shutdown), ctx ends, or the connection breaks.
// Requests run concurrently, each with its own context, which a cancel frame
// or the end of the connection cancels. When Serve returns, every request
// has finished (or the grace period ran out) and nothing writes to out.
// Serve cannot interrupt a blocked read of in: if ctx ends first, it returns
// and the caller closes in.
func Serve(ctx context.Context, in io.Reader, out io.Writer, backend host.Host, info ServerInfo) error {
	br := bufio.NewReaderSize(in, 64<<10)
	mode, err := proto.AgentStart(br, out, info.Version, info.SHA256)
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent start-up: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := &server{
		ctx:         ctx,
		cancel:      cancel,
		backend:     backend,
		enc:         proto.NewEncoder(out, mode),
		calls:       map[uint64]*call{},
		writeFailed: make(chan struct{}),
	}
	if err := s.hello(info); err != nil {
		return fmt.Errorf("agent hello: %w", err)
	}

	readDone := make(chan error, 1)
	go func() { readDone <- s.readLoop(proto.NewDecoder(br, mode)) }()
	select {
	case err = <-readDone:
	case <-s.writeFailed:
		err = fmt.Errorf("agent: writing to the client: %w", s.writeErr())
	case <-ctx.Done():
		err = ctx.Err()
	}
	err = errors.Join(err, s.shutdown())
	s.stopped.Store(true)
	return err
}

// SelfSHA256 returns the hex sha256 of the running executable, for
// ServerInfo.SHA256.
func SelfSHA256() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return osfs.FileSHA256(exe)
}

type server struct {
	ctx     context.Context
	cancel  context.CancelFunc
	backend host.Host

	wmu         sync.Mutex // one writer: frames never interleave
	enc         *proto.Encoder
	werr        error
	writeFailed chan struct{} // closed when werr is set
	stopped     atomic.Bool   // Serve returned: write nothing more

	mu     sync.Mutex
	calls  map[uint64]*call
	closed bool // no new requests once shutting down
	wg     sync.WaitGroup
}

// call is a running request.
type call struct {
	cancel context.CancelFunc
	// stream holds the request's inbound data frames for its handler; nil
	// without a stream.
	stream *inStream
}

// errStreamCut is what a handler reading a stream sees when the client
// vanished mid-stream: an error, never EOF, so a half-sent file is not
// mistaken for a whole one.
var errStreamCut = errors.New("agent connection closed mid-stream")

func (s *server) hello(info ServerInfo) error {
	h := proto.Hello{
		Protocol:     proto.Protocol,
		AgentVersion: info.Version,
		AgentSHA256:  info.SHA256,
		Platform:     info.Platform,
	}
	if facts, err := s.backend.Facts(s.ctx); err != nil {
		h.FactsError = err.Error()
	} else {
		h.Facts = &facts
	}
	payload, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return s.write(proto.Frame{Kind: proto.KindHello, Payload: payload})
}

// readLoop dispatches frames until the input ends (nil) or breaks.
func (s *server) readLoop(dec *proto.Decoder) error {
	for {
		f, err := dec.Decode()
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil // the client is gone, possibly mid-frame
		}
		if err == nil {
			err = s.dispatch(f)
		}
		if err != nil {
			if errors.Is(err, proto.ErrProtocol) {
				// Framing is lost: say why on the connection, then stop.
				s.respond(0, nil, err)
			}
			return err
		}
	}
}

func (s *server) dispatch(f proto.Frame) error {
	switch f.Kind {
	case proto.KindRequest:
		return s.start(f)
	case proto.KindData:
		if len(f.Payload) > 0 {
			return s.feed(f.ID, f.Payload)
		}
	case proto.KindDataEnd:
		var err error
		if len(f.Payload) > 0 {
			err = fmt.Errorf("stream aborted by the client: %s", f.Payload)
		}
		s.endStream(f.ID, err)
	case proto.KindCancel:
		s.mu.Lock()
		if c := s.calls[f.ID]; c != nil {
			c.cancel()
			if c.stream != nil {
				c.stream.abort(context.Canceled)
			}
		}
		s.mu.Unlock()
	default:
		return fmt.Errorf("%w: unexpected %s frame from the client", proto.ErrProtocol, f.Kind)
	}
	return nil
}

// start registers a request and runs it in its own goroutine. A request the
// agent cannot run gets an error response; only a broken protocol is fatal.
func (s *server) start(f proto.Frame) error {
	if f.ID == 0 {
		return fmt.Errorf("%w: request id 0 is reserved", proto.ErrProtocol)
	}
	s.mu.Lock()
	dup := s.calls[f.ID] != nil
	s.mu.Unlock()
	if dup {
		// Any answer would be taken for the running request's.
		return fmt.Errorf("%w: request id %d is already in flight", proto.ErrProtocol, f.ID)
	}
	var req proto.Request
	if err := json.Unmarshal(f.Payload, &req); err != nil {
		s.respond(f.ID, nil, fmt.Errorf("%w: malformed request: %v", proto.ErrInvalid, err))
		return nil
	}
	h, ok := handlers[req.Op]
	if !ok {
		s.respond(f.ID, nil, fmt.Errorf("%w: unknown op %q", proto.ErrInvalid, req.Op))
		return nil
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	if len(s.calls) >= maxInFlight {
		s.mu.Unlock()
		s.respond(f.ID, nil, fmt.Errorf("%w: more than %d concurrent requests", proto.ErrInvalid, maxInFlight))
		return nil
	}
	ctx, cancel := context.WithCancel(s.ctx)
	c := &call{cancel: cancel}
	r := &request{ctx: ctx, h: s.backend, args: req.Args, send: func(p []byte) error {
		return s.write(proto.Frame{Kind: proto.KindData, ID: f.ID, Payload: p})
	}}
	if req.Stream {
		c.stream = newInStream(func(n int) {
			s.write(proto.Frame{Kind: proto.KindWindow, ID: f.ID, Payload: proto.WindowPayload(uint32(n))})
		})
		r.in = c.stream
	}
	s.calls[f.ID] = c
	s.wg.Add(1)
	s.mu.Unlock()

	go func() {
		defer s.wg.Done()
		res, err := runHandler(req.Op, h, r)
		if c.stream != nil {
			c.stream.close() // frames still on their way are dropped
		}
		cancel()
		s.mu.Lock()
		delete(s.calls, f.ID)
		s.mu.Unlock()
		s.respond(f.ID, res, err)
	}()
	return nil
}

// runHandler runs h, turning a panic into an error response: one broken
// backend call must not take the other requests and the agent down.
func runHandler(op string, h handler, r *request) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("agent: %s panicked: %v", op, p)
		}
	}()
	return h(r)
}

// feed queues a data frame on its request's stream without waiting for the
// handler (the window bounds what queues). Frames for a finished or
// cancelled request are dropped.
func (s *server) feed(id uint64, p []byte) error {
	s.mu.Lock()
	var st *inStream
	if c := s.calls[id]; c != nil {
		st = c.stream
	}
	s.mu.Unlock()
	if st == nil {
		return nil
	}
	return st.push(p)
}

// endStream ends a request's stream: EOF for err == nil, else err.
func (s *server) endStream(id uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.calls[id]; c != nil && c.stream != nil {
		if err != nil {
			c.stream.abort(err) // an aborted stream is not content
		} else {
			c.stream.end(nil)
		}
	}
}

// shutdown cuts every stream, cancels every request and waits for them.
func (s *server) shutdown() error {
	s.mu.Lock()
	s.closed = true
	for _, c := range s.calls {
		if c.stream != nil {
			c.stream.abort(errStreamCut)
		}
	}
	s.mu.Unlock()
	s.cancel()

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(shutdownGrace):
		s.mu.Lock()
		n := len(s.calls)
		s.mu.Unlock()
		return fmt.Errorf("agent: %d requests still running %s after shutdown", n, shutdownGrace)
	}
}

// respond sends a request's one response.
func (s *server) respond(id uint64, res any, err error) {
	var resp proto.Response
	if err == nil && res != nil {
		b, merr := json.Marshal(res)
		if merr != nil {
			err = fmt.Errorf("encoding the result: %w", merr)
		}
		resp.Result = b
	}
	if err != nil {
		resp = proto.Response{Error: proto.WireError(err)}
	}
	payload, _ := json.Marshal(resp) // cannot fail: plain strings and valid JSON
	if len(payload) > proto.MaxPayload {
		payload, _ = json.Marshal(proto.Response{Error: &proto.Error{
			Code:    proto.CodeInternal,
			Message: fmt.Sprintf("result of %d bytes does not fit in a frame", len(payload)),
		}})
	}
	s.write(proto.Frame{Kind: proto.KindResponse, ID: id, Payload: payload})
}

// write sends one frame. After a write error the connection is unusable:
// further writes fail at once and Serve shuts down.
func (s *server) write(f proto.Frame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.werr != nil {
		return s.werr
	}
	if s.stopped.Load() {
		return errors.New("agent stopped")
	}
	if err := s.enc.Encode(f); err != nil {
		s.werr = err
		close(s.writeFailed)
		return err
	}
	return nil
}

func (s *server) writeErr() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.werr
}
