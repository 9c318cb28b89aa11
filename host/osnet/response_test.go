package osnet

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadResponse(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\n"
	tests := []struct {
		name, in string
		head     bool  // a HEAD request
		limit    int64 // 0: 100
		want     answer
		err      error // errMalformed, errTooLong, io.ErrUnexpectedEOF
	}{
		{name: "Content-Length", in: ok + "Content-Length: 5\r\n\r\nhello", want: answer{status: 200, body: []byte("hello")}},
		{name: "chunked with extensions and trailers", in: ok + "Transfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: " + secret + "\r\n\r\n",
			want: answer{status: 200, body: []byte("hello world")}},
		{name: "chunked, upper-case hex, bare LFs", in: "HTTP/1.1 200 OK\nTransfer-Encoding: Chunked\n\nA\n0123456789\n0\n\n",
			want: answer{status: 200, body: []byte("0123456789")}},
		{name: "chunked wins over Content-Length", in: ok + "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
			want: answer{status: 200, body: []byte("ab")}},
		{name: "to the end of the connection", in: "HTTP/1.0 200\r\n\r\n" + secret, want: answer{status: 200, body: []byte(secret)}},
		{name: "empty body is nil", in: ok + "Content-Length: 0\r\n\r\n", want: answer{status: 200}},
		{name: "HEAD has no body", in: ok + "Content-Length: 5\r\n\r\n", head: true, want: answer{status: 200}},
		{name: "204 has no body", in: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", want: answer{status: 204}},
		{name: "interim answers skipped", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\n" + ok + "Content-Length: 1\r\n\r\nx",
			want: answer{status: 200, body: []byte("x")}},
		{name: "redirect: the head only", in: "HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 9999\r\n\r\n",
			want: answer{status: 302, location: "/next"}},
		{name: "redirect without Location is an answer", in: "HTTP/1.1 302 Found\r\nContent-Length: 2\r\n\r\nhi",
			want: answer{status: 302, body: []byte("hi")}},
		{name: "at the limit", in: ok + "Content-Length: 3\r\n\r\nabc", limit: 3, want: answer{status: 200, body: []byte("abc")}},
		{name: "chunked at the limit", in: ok + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n", limit: 3,
			want: answer{status: 200, body: []byte("abc")}},

		{name: "Content-Length over the limit", in: ok + "Content-Length: 101\r\n\r\n", err: errTooLong},
		{name: "one chunk over the limit", in: ok + "Transfer-Encoding: chunked\r\n\r\n65\r\n", err: errTooLong},
		{name: "chunks over the limit", in: ok + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n2\r\ncd\r\n", limit: 3, err: errTooLong},
		{name: "a chunk size beyond int64", in: ok + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n", err: errTooLong},
		{name: "to the end, over the limit", in: ok + "\r\n" + strings.Repeat(secret, 5), err: errTooLong},
		{name: "head over the framing bound", in: ok + strings.Repeat("X-A: "+secret+"\r\n", maxFraming/20) + "\r\n", err: errTooLong},
		{name: "one endless line", in: "HTTP/1.1 200 " + strings.Repeat("x", maxFraming+1), err: errTooLong},

		{name: "not HTTP", in: "SSH-2.0-OpenSSH_9.6 " + secret + "\r\n", err: errMalformed},
		{name: "HTTP/2 status line", in: "HTTP/2 200\r\n\r\n", err: errMalformed},
		{name: "two-digit status", in: "HTTP/1.1 20 OK\r\n\r\n", err: errMalformed},
		{name: "status not digits", in: "HTTP/1.1 2x0 OK\r\n\r\n", err: errMalformed},
		{name: "status 099", in: "HTTP/1.1 099 OK\r\n\r\n", err: errMalformed},
		{name: "header without a colon", in: ok + secret + "\r\n\r\n", err: errMalformed},
		{name: "space before the colon", in: ok + "Content-Length : 1\r\n\r\nx", err: errMalformed},
		{name: "folded header", in: ok + "X-A: a\r\n " + secret + "\r\n\r\n", err: errMalformed},
		{name: "NUL in a value", in: ok + "X-A: " + secret + "\x00\r\n\r\n", err: errMalformed},
		{name: "Content-Length not a number", in: ok + "Content-Length: " + secret + "\r\n\r\n", err: errMalformed},
		{name: "Content-Length signed", in: ok + "Content-Length: +1\r\n\r\nx", err: errMalformed},
		{name: "Content-Lengths that differ", in: ok + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nxx", err: errMalformed},
		{name: "gzip transfer coding", in: ok + "Transfer-Encoding: gzip, chunked\r\n\r\n", err: errMalformed},
		{name: "HTTP/1.0 with a transfer coding", in: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", err: errMalformed},
		{name: "chunk size not hex", in: ok + "Transfer-Encoding: chunked\r\n\r\n" + secret + "\r\n", err: errMalformed},
		{name: "chunk size missing", in: ok + "Transfer-Encoding: chunked\r\n\r\n;ext\r\n", err: errMalformed},
		{name: "chunk without its CRLF", in: ok + "Transfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", err: errMalformed},

		{name: "no answer", in: "", err: io.ErrUnexpectedEOF},
		{name: "head cut short", in: ok + "Content-Length: 5\r\n", err: io.ErrUnexpectedEOF},
		{name: "body cut short", in: ok + "Content-Length: 50\r\n\r\n" + secret, err: io.ErrUnexpectedEOF},
		{name: "chunked cut short", in: ok + "Transfer-Encoding: chunked\r\n\r\n5\r\nab", err: io.ErrUnexpectedEOF},
		{name: "no last chunk", in: ok + "Transfer-Encoding: chunked\r\n\r\n2\r\nab\r\n", err: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, limit := "GET", tt.limit
			if tt.head {
				method = "HEAD"
			}
			if limit == 0 {
				limit = 100
			}
			got, err := readResponse(bufio.NewReader(strings.NewReader(tt.in)), method, limit)
			if tt.err == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.ErrorIs(t, err, tt.err)
			assert.NotContains(t, err.Error(), secret, "no body or header value in an error")
		})
	}
}

// FuzzReadResponse: whatever a server sends, the parser ends without
// panicking, keeps the body within the limit, never quotes the answer in an
// error, and where net/http reads the same bytes as well, reads the same
// status and body.
func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), false, uint16(100))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n"), false, uint16(5))
	f.Add([]byte("HTTP/1.0 200\n\nto the end"), false, uint16(10))
	f.Add([]byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nnot"), true, uint16(0))
	f.Add([]byte("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1/x\r\n\r\n"), false, uint16(1))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n"), false, uint16(100))
	f.Add([]byte("HTTP/1.1 200 OK\r\nX: "+secret+"\x00\r\n\r\n"), false, uint16(100))
	f.Fuzz(func(t *testing.T, in []byte, head bool, limit16 uint16) {
		method, limit := "GET", int64(limit16)
		if head {
			method = "HEAD"
		}
		got, err := readResponse(bufio.NewReader(strings.NewReader(string(in))), method, limit)
		if err != nil {
			if strings.Contains(string(in), secret) {
				assert.NotContains(t, err.Error(), secret)
			}
			return
		}
		assert.LessOrEqual(t, int64(len(got.body)), limit)
		assert.True(t, got.status >= 200 && got.status <= 999, "status %d", got.status)
		if got.location != "" {
			return // its body was not read
		}
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(in))), &http.Request{Method: method})
		if err != nil {
			return
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != got.status && resp.StatusCode < 200 {
			return // net/http is stricter, or returns an interim answer
		}
		assert.Equal(t, resp.StatusCode, got.status)
		assert.Equal(t, string(body), string(got.body))
	})
}
