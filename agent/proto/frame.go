// Package proto is the wire format between wsu and its node agent: a short
// text start-up that detects transports which mangle bytes, then
// length-prefixed frames, raw or one base64 line each.
package proto

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Protocol is the protocol version. It changes on every incompatible change;
// the client refuses an agent speaking another one. 3 added window frames
// (flow control of inbound streams), net.dial and fs.native_path; 4 added
// svc.dependents; 5 added fs.acl.get and fs.acl.set; 6 added
// cert.list, cert.add, cert.delete, sys.reboot, feature.get, feature.enable,
// sys.time, fs.free, fw.rule.get, fw.rule.set and fw.rule.delete; 7 added
// net.http.
const Protocol = 7

// StreamWindow is how many bytes of a request's inbound stream the client
// may send beyond what the agent has granted back in window frames. The
// agent queues up to this much per stream instead of blocking its reader,
// so a handler that stops reading stalls only its own stream: the agent
// still reads every other frame, cancels included.
const StreamWindow = 2 << 20

// MaxPayload bounds a frame's payload; a longer frame is a protocol error.
const MaxPayload = 1 << 20

// headerLen is the part of a frame after the length field and before the
// payload: kind (1) and request id (8).
const headerLen = 9

// maxLine bounds a base64 frame line, CRs included, so a missing newline
// cannot make the decoder buffer without end.
var maxLine = base64.StdEncoding.EncodedLen(4+headerLen+MaxPayload) + 16

// ErrProtocol marks a violation of the wire format; the connection cannot be
// trusted after one.
var ErrProtocol = errors.New("agent protocol error")

func protoErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

// Kind is a frame's type.
type Kind uint8

const (
	// KindHello: agent → client once, right after MODE; JSON Hello.
	KindHello Kind = 1
	// KindRequest: client → agent; JSON Request.
	KindRequest Kind = 2
	// KindResponse: agent → client, exactly one per request; JSON Response.
	KindResponse Kind = 3
	// KindData: a raw chunk of the stream belonging to a request.
	KindData Kind = 4
	// KindDataEnd: the end of a request's stream; a non-empty payload is an
	// error message that aborts it.
	KindDataEnd Kind = 5
	// KindCancel: client → agent; cancel the request with this id.
	KindCancel Kind = 6
	// KindWindow: agent → client; the handler has read this many more bytes
	// of the request's inbound stream (a 4-byte big-endian count), which
	// the client may send in addition.
	KindWindow Kind = 7
)

func (k Kind) valid() bool { return k >= KindHello && k <= KindWindow }

// WindowPayload encodes a window frame's grant.
func WindowPayload(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// ParseWindow decodes a window frame's grant.
func ParseWindow(p []byte) (uint32, error) {
	if len(p) != 4 {
		return 0, protoErr("window frame payload of %d bytes, want 4", len(p))
	}
	return binary.BigEndian.Uint32(p), nil
}

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindRequest:
		return "request"
	case KindResponse:
		return "response"
	case KindData:
		return "data"
	case KindDataEnd:
		return "data_end"
	case KindCancel:
		return "cancel"
	case KindWindow:
		return "window"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Frame is one protocol unit. ID 0 is the connection itself (hello, and the
// agent's report of a fatal protocol error); requests use ids from 1.
type Frame struct {
	Kind    Kind
	ID      uint64
	Payload []byte
}

// Mode is how frames travel, as negotiated at start-up.
type Mode int

const (
	// ModeBinary sends frames as they are.
	ModeBinary Mode = iota
	// ModeBase64 sends each frame as one line of standard base64, for
	// transports that are not 8-bit clean.
	ModeBase64
)

func (m Mode) String() string {
	if m == ModeBase64 {
		return "base64"
	}
	return "binary"
}

// Encoder writes frames. It is not safe for concurrent use: callers
// serialise, so frames never interleave.
type Encoder struct {
	w    io.Writer
	mode Mode
	buf  []byte
	line []byte
}

// NewEncoder returns an encoder writing to w in mode.
func NewEncoder(w io.Writer, mode Mode) *Encoder {
	return &Encoder{w: w, mode: mode}
}

// AppendFrame appends f's binary encoding to b.
func AppendFrame(b []byte, f Frame) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(headerLen+len(f.Payload)))
	b = append(b, byte(f.Kind))
	b = binary.BigEndian.AppendUint64(b, f.ID)
	return append(b, f.Payload...)
}

// FrameRoom is the room a frame's length and header take before its
// payload: a payload read into b[FrameRoom:] is sent by EncodeIn without
// being copied.
const FrameRoom = 4 + headerLen

// EncodeIn writes the frame of kind and id whose payload is b[FrameRoom:],
// writing its length and header into b[:FrameRoom]: in binary mode with a
// single Write and no copy, so a sender streaming large payloads keeps no
// frame-sized buffer of the encoder's. In base64 mode it is Encode.
func (e *Encoder) EncodeIn(kind Kind, id uint64, b []byte) error {
	if len(b) < FrameRoom {
		return protoErr("frame buffer of %d bytes has no room for the header", len(b))
	}
	f := Frame{Kind: kind, ID: id, Payload: b[FrameRoom:]}
	if e.mode == ModeBase64 || !kind.valid() || len(f.Payload) > MaxPayload {
		return e.Encode(f)
	}
	AppendFrame(b[:0], Frame{Kind: kind, ID: id})
	binary.BigEndian.PutUint32(b, uint32(headerLen+len(f.Payload)))
	_, err := e.w.Write(b)
	return err
}

// Encode writes f with a single Write, so a frame is never split by another
// writer sharing the transport.
func (e *Encoder) Encode(f Frame) error {
	if !f.Kind.valid() {
		return protoErr("cannot send %s frame", f.Kind)
	}
	if len(f.Payload) > MaxPayload {
		return protoErr("%s frame payload of %d bytes exceeds %d", f.Kind, len(f.Payload), MaxPayload)
	}
	e.buf = AppendFrame(e.buf[:0], f)
	out := e.buf
	if e.mode == ModeBase64 {
		n := base64.StdEncoding.EncodedLen(len(e.buf))
		if cap(e.line) < n+1 {
			e.line = make([]byte, n+1)
		}
		e.line = e.line[:n+1]
		base64.StdEncoding.Encode(e.line, e.buf)
		e.line[n] = '\n'
		out = e.line
	}
	_, err := e.w.Write(out)
	return err
}

// Decoder reads frames. A clean end of input between frames is io.EOF, a
// cut inside one io.ErrUnexpectedEOF; malformed input is ErrProtocol.
type Decoder struct {
	r    *bufio.Reader
	mode Mode
	line []byte
}

// NewDecoder returns a decoder reading r in mode. A *bufio.Reader is used as
// it is, so bytes it buffered during start-up are not lost.
func NewDecoder(r io.Reader, mode Mode) *Decoder {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &Decoder{r: br, mode: mode}
}

// Decode reads the next frame. The payload is freshly allocated and belongs
// to the caller.
func (d *Decoder) Decode() (Frame, error) {
	if d.mode == ModeBase64 {
		return d.decodeLine()
	}
	var hdr [4 + headerLen]byte
	if _, err := io.ReadFull(d.r, hdr[:4]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < headerLen {
		return Frame{}, protoErr("frame length %d is shorter than its header", n)
	}
	if n-headerLen > MaxPayload {
		return Frame{}, protoErr("frame payload of %d bytes exceeds %d", n-headerLen, MaxPayload)
	}
	if _, err := io.ReadFull(d.r, hdr[4:]); err != nil {
		return Frame{}, unexpected(err)
	}
	f := Frame{Kind: Kind(hdr[4]), ID: binary.BigEndian.Uint64(hdr[5:])}
	if !f.Kind.valid() {
		return Frame{}, protoErr("unknown frame kind %d", hdr[4])
	}
	if size := n - headerLen; size > 0 {
		f.Payload = make([]byte, size)
		if _, err := io.ReadFull(d.r, f.Payload); err != nil {
			return Frame{}, unexpected(err)
		}
	}
	return f, nil
}

func (d *Decoder) decodeLine() (Frame, error) {
	for {
		line, err := readLine(d.r, d.line[:0], maxLine)
		d.line = line[:0]
		if err != nil {
			return Frame{}, err
		}
		line = trimEOL(line)
		if len(line) == 0 {
			continue // a blank line carries nothing; some transports add them
		}
		raw := make([]byte, base64.StdEncoding.DecodedLen(len(line)))
		n, err := base64.StdEncoding.Decode(raw, line)
		if err != nil {
			return Frame{}, protoErr("bad base64 frame line: %v", err)
		}
		return parseFrame(raw[:n])
	}
}

// parseFrame decodes one complete binary frame.
func parseFrame(raw []byte) (Frame, error) {
	if len(raw) < 4+headerLen {
		return Frame{}, protoErr("frame of %d bytes is shorter than its header", len(raw))
	}
	n := binary.BigEndian.Uint32(raw)
	if uint64(n) != uint64(len(raw)-4) {
		return Frame{}, protoErr("frame length field %d does not match its %d bytes", n, len(raw)-4)
	}
	if len(raw)-4-headerLen > MaxPayload {
		return Frame{}, protoErr("frame payload of %d bytes exceeds %d", len(raw)-4-headerLen, MaxPayload)
	}
	f := Frame{Kind: Kind(raw[4]), ID: binary.BigEndian.Uint64(raw[5:])}
	if !f.Kind.valid() {
		return Frame{}, protoErr("unknown frame kind %d", raw[4])
	}
	if len(raw) > 4+headerLen {
		f.Payload = raw[4+headerLen:]
	}
	return f, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

var errLineTooLong = fmt.Errorf("%w: line too long", ErrProtocol)

// readLine appends the next line, '\n' included, to buf. It fails with
// errLineTooLong past max bytes, io.EOF at a clean end of input and
// io.ErrUnexpectedEOF when input ends inside a line.
func readLine(r *bufio.Reader, buf []byte, max int) ([]byte, error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > max {
			return buf, errLineTooLong
		}
		buf = append(buf, chunk...)
		switch {
		case err == nil:
			return buf, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(buf) == 0:
			return buf, io.EOF
		default:
			return buf, unexpected(err)
		}
	}
}

// trimEOL drops the '\n' and any CRs before it: a transport may turn "\n"
// into "\r\n".
func trimEOL(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
	}
	for n := len(line); n > 0 && line[n-1] == '\r'; n-- {
		line = line[:n-1]
	}
	return line
}
