// Package client is wsu's side of the node agent protocol: a host.Host whose
// every method is one request to a `wsu agent` process at the other end of a
// transport. See docs/agent-protocol.md.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
)

// ErrConnectionLost wraps every error caused by the agent connection
// failing: the calls in flight and all later ones return it.
var ErrConnectionLost = host.ErrConnectionLost

// ErrClosed is returned by calls after Close.
var ErrClosed = errors.New("agent client closed")

const (
	// chunkSize is the size of the data frames WriteFile sends.
	chunkSize = 256 << 10
	// maxAbortMessage keeps a data_end's error message well within a frame.
	maxAbortMessage = 4 << 10
)

// Client is a connection to one agent. It implements host.Host; its methods
// may be called concurrently.
type Client struct {
	w     io.Writer
	wmu   sync.Mutex // one writer: frames never interleave
	enc   *proto.Encoder
	hello proto.Hello
	mode  proto.Mode

	closeOnce sync.Once
	closeErr  error

	// meter counts round trips and file content sent (host.Metered).
	meter host.Meter

	mu     sync.Mutex
	calls  map[uint64]*call
	nextID uint64
	err    error         // why the connection is unusable, once it is
	dead   chan struct{} // closed when err is set
}

var (
	_ host.Host     = (*Client)(nil)
	_ host.Metered  = (*Client)(nil)
	_ host.Firewall = (*Client)(nil)

	_ host.Rebooter         = (*Client)(nil)
	_ host.OptionalFeatures = (*Client)(nil)
)

// call is a request waiting for its response.
type call struct {
	done chan struct{} // closed when resp (or err) is set
	resp proto.Response
	err  error // a malformed response
	// data collects the response's data frames, up to max bytes (0: no
	// limit).
	data bytes.Buffer
	max  int64
	// credit is how many more bytes of the request's stream the agent
	// takes (proto.StreamWindow, plus its window frames); more is signalled
	// when it grows.
	credit int64
	more   chan struct{}
}

// Dial runs the client side of the start-up on the agent's output r and
// input w, and reads the agent's hello. An agent speaking another protocol
// is a *proto.MismatchError: redeploy it. If ctx ends first, Dial closes w
// (when it is an io.Closer), which stops the agent, and returns ctx.Err().
// Close the transport to release r.
func Dial(ctx context.Context, r io.Reader, w io.Writer) (*Client, error) {
	type result struct {
		c   *Client
		dec *proto.Decoder
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, dec, err := start(r, w)
		ch <- result{c, dec, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			return nil, res.err
		}
		go res.c.readLoop(res.dec)
		return res.c, nil
	case <-ctx.Done():
		if cl, ok := w.(io.Closer); ok {
			cl.Close()
		}
		return nil, fmt.Errorf("agent start-up: %w", ctx.Err())
	}
}

// startReadBuffer is the client's read buffer: kept by every connected
// host, so small. The greeting's noise (at most 16 KiB) and base64 lines
// of any length are read in pieces, and a data frame's payload is read
// past the buffer, straight into the frame.
const startReadBuffer = 16 << 10

func start(r io.Reader, w io.Writer) (*Client, *proto.Decoder, error) {
	br := bufio.NewReaderSize(r, startReadBuffer)
	_, mode, err := proto.ClientStart(br, w)
	if err != nil {
		return nil, nil, fmt.Errorf("agent start-up: %w", err)
	}
	dec := proto.NewDecoder(br, mode)
	f, err := dec.Decode()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, fmt.Errorf("agent start-up: reading the hello: %w", err)
	}
	if f.Kind != proto.KindHello {
		return nil, nil, fmt.Errorf("agent start-up: %w: expected hello, got a %s frame", proto.ErrProtocol, f.Kind)
	}
	var h proto.Hello
	if err := json.Unmarshal(f.Payload, &h); err != nil {
		return nil, nil, fmt.Errorf("agent start-up: %w: malformed hello: %v", proto.ErrProtocol, err)
	}
	if h.Protocol != proto.Protocol {
		return nil, nil, &proto.MismatchError{AgentProtocol: h.Protocol, AgentVersion: h.AgentVersion, AgentSHA256: h.AgentSHA256}
	}
	return &Client{
		w:     w,
		enc:   proto.NewEncoder(w, mode),
		hello: h,
		mode:  mode,
		calls: map[uint64]*call{},
		dead:  make(chan struct{}),
	}, dec, nil
}

// Hello returns what the agent said about itself: protocol, version, binary
// sha256, platform and facts.
func (c *Client) Hello() proto.Hello { return c.hello }

// Mode returns the negotiated frame mode.
func (c *Client) Mode() proto.Mode { return c.mode }

// Counters reports the requests sent and the file content streamed to the
// agent (fs.write) on this connection (host.Metered).
func (c *Client) Counters() host.Counters { return c.meter.Counters() }

// Close closes the writer, which makes the agent finish and exit. Calls in
// flight return ErrClosed.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	c.closeOnce.Do(func() {
		if cl, ok := c.w.(io.Closer); ok {
			c.closeErr = cl.Close()
		}
	})
	return c.closeErr
}

// fail makes the connection unusable, for the first reason given.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	if err != ErrClosed {
		err = fmt.Errorf("%w: agent connection lost: %w", ErrConnectionLost, err)
	}
	c.err = err
	close(c.dead)
}

// Lost reports whether the connection died (host.Lossy): the engine then
// reconnects and runs the interrupted task again.
func (c *Client) Lost() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil && errors.Is(c.err, ErrConnectionLost)
}

// send writes one frame; a write error loses the connection.
func (c *Client) send(f proto.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.enc.Encode(f); err != nil {
		if errors.Is(err, proto.ErrProtocol) {
			return err // refused before writing: the connection is fine
		}
		c.fail(fmt.Errorf("writing: %w", err))
		return c.connErr()
	}
	return nil
}

// roomyFrame is a frame of upload's: b is proto.FrameRoom bytes of room,
// then the payload.
type roomyFrame struct {
	kind proto.Kind
	b    []byte
}

// sendIn is send for a frame in a buffer with room for its header.
func (c *Client) sendIn(kind proto.Kind, id uint64, b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.enc.EncodeIn(kind, id, b); err != nil {
		if errors.Is(err, proto.ErrProtocol) {
			return err
		}
		c.fail(fmt.Errorf("writing: %w", err))
		return c.connErr()
	}
	return nil
}

func (c *Client) connErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// readLoop demultiplexes the agent's frames to the calls waiting for them.
// After the connection failed it keeps draining, so the agent never blocks
// on a full pipe while it shuts down.
func (c *Client) readLoop(dec *proto.Decoder) {
	for {
		f, err := dec.Decode()
		if err != nil {
			if err == io.EOF {
				err = errors.New("the agent closed the connection")
			}
			c.fail(err)
			return
		}
		switch f.Kind {
		case proto.KindResponse:
			if f.ID == 0 {
				c.fail(fmt.Errorf("the agent reported: %s", connError(f.Payload)))
				continue
			}
			c.mu.Lock()
			cl := c.calls[f.ID]
			delete(c.calls, f.ID)
			c.mu.Unlock()
			if cl == nil {
				continue // the caller gave up on it
			}
			if err := json.Unmarshal(f.Payload, &cl.resp); err != nil {
				cl.err = fmt.Errorf("%w: malformed response: %v", proto.ErrProtocol, err)
			}
			close(cl.done)
		case proto.KindData:
			c.mu.Lock()
			cl := c.calls[f.ID]
			c.mu.Unlock()
			if cl == nil || cl.err != nil {
				continue
			}
			if cl.max > 0 && int64(cl.data.Len()+len(f.Payload)) > cl.max {
				cl.err = fmt.Errorf("%w: the agent sent more than the %d bytes expected", proto.ErrProtocol, cl.max)
				continue
			}
			cl.data.Write(f.Payload)
		case proto.KindDataEnd:
			// The response ends an agent → client stream; nothing to do.
		case proto.KindWindow:
			n, err := proto.ParseWindow(f.Payload)
			if err != nil {
				c.fail(err)
				continue
			}
			c.mu.Lock()
			cl := c.calls[f.ID]
			if cl != nil {
				cl.credit += int64(n)
			}
			c.mu.Unlock()
			if cl != nil {
				select {
				case cl.more <- struct{}{}:
				default:
				}
			}
		default:
			c.fail(fmt.Errorf("%w: unexpected %s frame from the agent", proto.ErrProtocol, f.Kind))
		}
	}
}

func connError(payload []byte) string {
	var resp proto.Response
	if json.Unmarshal(payload, &resp) == nil && resp.Error != nil {
		return resp.Error.Message
	}
	return fmt.Sprintf("%q", payload)
}

// roundTrip sends one request and waits for its response, unmarshalling the
// result into result (if not nil). upload, if not nil, is sent as the
// request's stream; the response's data frames are returned, at most
// maxData bytes (0: no limit).
func (c *Client) roundTrip(ctx context.Context, op string, args any, upload io.Reader, maxData int64, result any) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := proto.Request{Op: op, Stream: upload != nil}
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		req.Args = b
	}
	payload, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(payload) > proto.MaxPayload {
		return nil, fmt.Errorf("%s: %w: request of %d bytes does not fit in a frame", op, proto.ErrInvalid, len(payload))
	}

	cl := &call{done: make(chan struct{}), max: maxData, credit: proto.StreamWindow, more: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.nextID++
	id := c.nextID
	c.calls[id] = cl
	c.mu.Unlock()

	if err := c.send(proto.Frame{Kind: proto.KindRequest, ID: id, Payload: payload}); err != nil {
		c.forget(id)
		return nil, err
	}
	c.meter.RPC(op)
	own := host.ContextMeter(ctx)
	if own != nil {
		own.RPC(op)
	}
	if upload != nil {
		// Only file content is payload; process stdin is not.
		var sent func(int64)
		if op == proto.OpWrite {
			sent = func(n int64) {
				c.meter.Sent(n)
				if own != nil {
					own.Sent(n)
				}
			}
		}
		if err := c.upload(ctx, id, cl, upload, sent); err != nil {
			c.forget(id)
			if ctx.Err() != nil {
				go c.send(proto.Frame{Kind: proto.KindCancel, ID: id})
				return nil, ctx.Err()
			}
			return nil, err
		}
	}

	select {
	case <-cl.done:
	case <-ctx.Done():
		c.forget(id)
		// The agent still answers; the reader drops the response.
		go c.send(proto.Frame{Kind: proto.KindCancel, ID: id})
		return nil, ctx.Err()
	case <-c.dead:
		select {
		case <-cl.done: // answered before the connection went
		default:
			return nil, c.connErr()
		}
	}
	// Close promises ErrClosed to the calls in flight: the agent's answer
	// to the cut (its stream ended mid-way) may race in first.
	if err := c.connErr(); err == ErrClosed {
		return nil, err
	}
	if cl.err != nil {
		return nil, cl.err
	}
	if cl.resp.Error != nil {
		return nil, cl.resp.Error.Err()
	}
	if result != nil && len(cl.resp.Result) > 0 {
		if err := json.Unmarshal(cl.resp.Result, result); err != nil {
			return nil, fmt.Errorf("%s: %w: malformed result: %v", op, proto.ErrProtocol, err)
		}
	}
	return cl.data.Bytes(), nil
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
}

// upload sends r as the request's data frames and a data_end. A goroutine
// writes the frames while this one reads the next chunk, with two buffers
// in rotation; so r is never read after upload returns, even when it
// returns early on cancellation, and memory stays at two chunks. It sends
// no more than the agent's window allows, so the agent, which queues
// rather than blocks, is never flooded, and a stream the agent stopped
// reading waits here, where the context still ends it.
// It returns early, with no error, if the agent already answered (it
// failed); a read error from r aborts the stream and is returned. sent, if
// not nil, is told the size of each data frame written.
func (c *Client) upload(ctx context.Context, id uint64, cl *call, r io.Reader, sent func(int64)) error {
	// Each chunk has the frame header's room before it, so it is sent
	// as it was read (proto.Encoder.EncodeIn), not copied into a frame.
	free := make(chan []byte, 2)
	free <- make([]byte, proto.FrameRoom+chunkSize)
	free <- make([]byte, proto.FrameRoom+chunkSize)
	queue := make(chan roomyFrame, 3) // two chunks and the data_end: never blocks
	defer close(queue)
	var stopped atomic.Bool // drop what is still queued
	go func() {
		for f := range queue {
			if !stopped.Load() {
				if err := c.sendIn(f.kind, id, f.b); err != nil {
					stopped.Store(true) // the connection failed; the caller sees c.dead
				} else if f.kind == proto.KindData && sent != nil {
					sent(int64(len(f.b) - proto.FrameRoom))
				}
			}
			if f.kind == proto.KindData {
				free <- f.b[:cap(f.b)]
			}
		}
	}()
	giveUp := func() { stopped.Store(true) }

	for {
		var buf []byte
		select {
		case buf = <-free:
		case <-ctx.Done():
			giveUp()
			return ctx.Err()
		case <-cl.done:
			giveUp()
			return nil
		case <-c.dead:
			giveUp()
			return c.connErr()
		}
		var credit int64
		for {
			c.mu.Lock()
			credit = cl.credit
			c.mu.Unlock()
			if credit > 0 {
				break
			}
			select {
			case <-cl.more:
			case <-ctx.Done():
				giveUp()
				return ctx.Err()
			case <-cl.done:
				giveUp()
				return nil
			case <-c.dead:
				giveUp()
				return c.connErr()
			}
		}
		buf = buf[:proto.FrameRoom+min(chunkSize, credit)]
		n, err := io.ReadFull(r, buf[proto.FrameRoom:])
		if n > 0 {
			c.mu.Lock()
			cl.credit -= int64(n)
			c.mu.Unlock()
		}
		if n > 0 {
			queue <- roomyFrame{proto.KindData, buf[:proto.FrameRoom+n]}
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			queue <- roomyFrame{proto.KindDataEnd, make([]byte, proto.FrameRoom)}
			return nil
		case err != nil:
			msg := err.Error()
			if len(msg) > maxAbortMessage {
				msg = msg[:maxAbortMessage]
			}
			queue <- roomyFrame{proto.KindDataEnd, append(make([]byte, proto.FrameRoom, proto.FrameRoom+len(msg)), msg...)}
			return fmt.Errorf("reading the content: %w", err)
		}
		if ctx.Err() != nil {
			giveUp()
			return ctx.Err()
		}
	}
}

func isRemote(err error) bool {
	var re *proto.RemoteError
	return errors.As(err, &re)
}
