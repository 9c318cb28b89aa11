package proto

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sampleFrames holds a valid frame of every kind, edge sizes included.
func sampleFrames() []Frame {
	return []Frame{
		{Kind: KindHello, ID: 0, Payload: []byte(`{"protocol":1,"agent_version":"1.0","agent_sha256":"ab","platform":"sim"}`)},
		{Kind: KindRequest, ID: 1, Payload: []byte(`{"op":"fs.stat","args":{"path":"/tmp"}}`)},
		{Kind: KindResponse, ID: 1, Payload: []byte(`{"error":{"code":"not_found","message":"no"}}`)},
		{Kind: KindData, ID: 7, Payload: bytes.Repeat([]byte{0, '\n', '\r', 0xff}, 64)},
		{Kind: KindDataEnd, ID: 7},
		{Kind: KindDataEnd, ID: 8, Payload: []byte("client aborted")},
		{Kind: KindCancel, ID: 1<<64 - 1},
		{Kind: KindWindow, ID: 7, Payload: WindowPayload(256 << 10)},
		{Kind: KindData, ID: 9, Payload: bytes.Repeat([]byte{0xa5}, MaxPayload)},
	}
}

func encodeAll(t testing.TB, mode Mode, frames ...Frame) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := NewEncoder(&buf, mode)
	for _, f := range frames {
		require.NoError(t, enc.Encode(f))
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, mode := range []Mode{ModeBinary, ModeBase64} {
		t.Run(mode.String(), func(t *testing.T) {
			frames := sampleFrames()
			dec := NewDecoder(bytes.NewReader(encodeAll(t, mode, frames...)), mode)
			for _, want := range frames {
				got, err := dec.Decode()
				require.NoError(t, err)
				assert.Equal(t, want, got)
			}
			_, err := dec.Decode()
			assert.Equal(t, io.EOF, err)
		})
	}
}

func TestBase64Line(t *testing.T) {
	raw := encodeAll(t, ModeBase64, Frame{Kind: KindCancel, ID: 3})
	assert.Equal(t, "AAAACQYAAAAAAAAAAw==\n", string(raw))
	// CRs before the newline and blank lines between frames are tolerated.
	crlf := strings.ReplaceAll(string(raw), "\n", "\r\r\n")
	dec := NewDecoder(strings.NewReader("\r\n\n"+crlf+crlf), ModeBase64)
	for range 2 {
		f, err := dec.Decode()
		require.NoError(t, err)
		assert.Equal(t, Frame{Kind: KindCancel, ID: 3}, f)
	}
}

func TestEncodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
	}{
		{"payload too large", Frame{Kind: KindData, ID: 1, Payload: make([]byte, MaxPayload+1)}},
		{"kind zero", Frame{Kind: 0}},
		{"unknown kind", Frame{Kind: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := NewEncoder(&buf, ModeBinary).Encode(tt.f)
			assert.ErrorIs(t, err, ErrProtocol)
			assert.Zero(t, buf.Len(), "nothing written")
		})
	}
}

func header(n uint32, kind byte, id uint64) []byte {
	b := []byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), kind}
	for i := 7; i >= 0; i-- {
		b = append(b, byte(id>>(8*i)))
	}
	return b
}

func TestDecodeMalformed(t *testing.T) {
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) + "\n" }
	tests := []struct {
		name  string
		mode  Mode
		input string
		want  error // ErrProtocol, io.ErrUnexpectedEOF or io.EOF
	}{
		{"empty", ModeBinary, "", io.EOF},
		{"cut length", ModeBinary, "\x00\x00", io.ErrUnexpectedEOF},
		{"length below header", ModeBinary, string(header(8, 2, 1)), ErrProtocol},
		{"length above max", ModeBinary, string(header(headerLen+MaxPayload+1, 4, 1)), ErrProtocol},
		{"length max uint32", ModeBinary, "\xff\xff\xff\xff", ErrProtocol},
		{"unknown kind", ModeBinary, string(header(9, 9, 1)), ErrProtocol},
		{"kind zero", ModeBinary, string(header(9, 0, 1)), ErrProtocol},
		{"cut header", ModeBinary, string(header(9, 2, 1)[:8]), io.ErrUnexpectedEOF},
		{"cut payload", ModeBinary, string(header(20, 4, 1)) + "abc", io.ErrUnexpectedEOF},
		{"b64 not base64", ModeBase64, "!!!!\n", ErrProtocol},
		{"b64 short frame", ModeBase64, b64([]byte{0, 0, 0, 9, 2}), ErrProtocol},
		{"b64 length mismatch", ModeBase64, b64(append(header(10, 2, 1), 'x', 'y')), ErrProtocol},
		{"b64 unknown kind", ModeBase64, b64(header(9, 42, 1)), ErrProtocol},
		{"b64 cut line", ModeBase64, "AAAACQYAAAAAAAAAAw", io.ErrUnexpectedEOF},
		{"b64 endless line", ModeBase64, strings.Repeat("A", maxLine+1), ErrProtocol},
		{"b64 only blank lines", ModeBase64, "\n\r\n\n", io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewDecoder(strings.NewReader(tt.input), tt.mode).Decode()
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

// A reader error that is not EOF reaches the caller as it is.
func TestDecodeReadError(t *testing.T) {
	boom := errors.New("boom")
	for mode, partial := range map[Mode]string{ModeBinary: "\x00\x00\x00", ModeBase64: "AAAA"} {
		r := io.MultiReader(strings.NewReader(partial), iotestErr{boom})
		_, err := NewDecoder(r, mode).Decode()
		assert.ErrorIs(t, err, boom, mode.String())
	}
}

type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

func TestCodes(t *testing.T) {
	tests := []struct {
		code Code
		err  error
	}{
		{CodeNotSupported, errWrap("svc", notSupported())},
		{CodeNotFound, errWrap("open", notExist())},
		{CodeInvalid, ErrInvalid},
		{CodeCancelled, errWrap("run", contextCanceled())},
		{CodeInternal, errors.New("disk on fire")},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			we := WireError(tt.err)
			assert.Equal(t, tt.code, we.Code)
			back := we.Err()
			assert.Equal(t, tt.err.Error(), back.Error(), "message survives")
			if tt.code != CodeInternal {
				assert.ErrorIs(t, back, errors.Unwrap(back))
				assert.Equal(t, tt.code, CodeOf(back), "a relayed error keeps its code")
			} else {
				assert.NoError(t, errors.Unwrap(back))
			}
		})
	}
}

// TestEncodeInWritesWhatEncodeWrites: a frame sent from a buffer with room
// for its header is byte for byte the frame Encode writes, in both modes,
// with one Write.
func TestEncodeInWritesWhatEncodeWrites(t *testing.T) {
	for _, mode := range []Mode{ModeBinary, ModeBase64} {
		for _, f := range sampleFrames() {
			want := encodeAll(t, mode, f)
			w := &countingWriter{}
			b := append(make([]byte, FrameRoom), f.Payload...)
			require.NoError(t, NewEncoder(w, mode).EncodeIn(f.Kind, f.ID, b))
			assert.Equal(t, want, w.Bytes(), "%s frame, %d bytes, mode %v", f.Kind, len(f.Payload), mode)
			assert.Equal(t, 1, w.writes, "writes of one frame")
		}
	}
	err := NewEncoder(io.Discard, ModeBinary).EncodeIn(KindData, 1, make([]byte, FrameRoom-1))
	assert.ErrorIs(t, err, ErrProtocol, "a buffer without room for the header")
}

type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) { w.writes++; return w.Buffer.Write(p) }
