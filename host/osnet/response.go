package osnet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// answer is what DoHTTP keeps of an HTTP/1.x response.
type answer struct {
	status   int
	location string // of a redirect (whose body is not read)
	body     []byte // nil when empty
}

// maxFraming bounds what a response holds besides its body: the status
// line, headers, interim (1xx) responses, chunk-size lines and trailers.
const maxFraming = 64 << 10

var (
	// errMalformed is an answer that is not HTTP/1.x as RFC 9112 frames it.
	errMalformed = errors.New("malformed answer")
	// errTooLong is an answer longer than the request's limit.
	errTooLong = errors.New("answer too long")
)

// respReader reads one response: its framing bounded by left bytes, its
// body by limit. Its errors never quote the answer.
type respReader struct {
	br    *bufio.Reader
	left  int
	limit int64
}

// readResponse reads the response to a request made with method from br.
// Interim (1xx) responses are skipped; a redirect with a Location is read
// up to its head only. A body is framed by Transfer-Encoding: chunked, else
// Content-Length, else the end of the connection, and is at most limit
// bytes. Errors other than errMalformed and errTooLong are the connection's.
func readResponse(br *bufio.Reader, method string, limit int64) (answer, error) {
	r := respReader{br: br, left: maxFraming, limit: limit}
	status, h, err := r.head()
	for err == nil && status >= 100 && status < 200 {
		status, h, err = r.head()
	}
	if err != nil {
		return answer{}, err
	}
	ans := answer{status: status}
	if isRedirect(status) {
		if ans.location = h.location; ans.location != "" {
			return ans, nil
		}
	}
	switch {
	case method == "HEAD" || status == 204 || status == 304:
	case h.chunked:
		ans.body, err = r.chunked()
	case h.length >= 0:
		ans.body, err = r.exactly(h.length)
	default:
		ans.body, err = r.toEOF()
	}
	if err != nil {
		return answer{}, err
	}
	if len(ans.body) == 0 {
		ans.body = nil
	}
	return ans, nil
}

// fields are the headers the client uses. length is -1 when absent.
type fields struct {
	location string
	length   int64
	chunked  bool
}

// head reads a status line and the headers after it.
func (r *respReader) head() (int, fields, error) {
	line, err := r.line()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("the server closed the connection without an answer: %w", io.ErrUnexpectedEOF)
		}
		return 0, fields{}, err
	}
	proto, status, err := parseStatusLine(line)
	if err != nil {
		return 0, fields{}, err
	}
	f := fields{length: -1}
	for n := 1; ; n++ {
		line, err := r.line()
		switch {
		case err != nil:
			return 0, fields{}, noEOF(err)
		case line == "" && f.chunked && proto == "HTTP/1.0":
			// RFC 9112 6.1: faulty framing.
			return 0, fields{}, fmt.Errorf("%w: an HTTP/1.0 answer with a Transfer-Encoding", errMalformed)
		case line == "":
			return status, f, nil
		}
		if err := f.add(line, n); err != nil {
			return 0, fields{}, err
		}
	}
}

// parseStatusLine: HTTP/1.0 or HTTP/1.1, a three-digit status and an
// optional reason phrase.
func parseStatusLine(line string) (proto string, status int, err error) {
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	if proto != "HTTP/1.1" && proto != "HTTP/1.0" {
		return "", 0, fmt.Errorf("%w: the status line is not HTTP/1.0 or HTTP/1.1", errMalformed)
	}
	if len(code) != 3 || strings.Trim(code, "0123456789") != "" || code[0] == '0' {
		return "", 0, fmt.Errorf("%w: the status line holds no three-digit status", errMalformed)
	}
	status, _ = strconv.Atoi(code)
	return proto, status, nil
}

// add takes header line n (1 is the first) into f.
func (f *fields) add(line string, n int) error {
	name, value, ok := strings.Cut(line, ":")
	if !ok || !validToken(name) {
		return fmt.Errorf("%w: header line %d is not a name, a colon and a value", errMalformed, n)
	}
	value = strings.Trim(value, " \t")
	if strings.ContainsAny(value, "\r\x00") {
		return fmt.Errorf("%w: header %s: its value holds a CR or NUL", errMalformed, name)
	}
	switch strings.ToLower(name) {
	case "location":
		f.location = value
	case "transfer-encoding":
		if !strings.EqualFold(value, "chunked") {
			return fmt.Errorf("%w: header Transfer-Encoding: only chunked is understood", errMalformed)
		}
		f.chunked = true
	case "content-length":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil || n < 0 || strings.Trim(value, "0123456789") != "" || (f.length >= 0 && n != f.length) {
			return fmt.Errorf("%w: header Content-Length: not one decimal length", errMalformed)
		}
		f.length = n
	}
	return nil
}

// validToken: an RFC 9110 token (a header name).
func validToken(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// line reads one line of framing, without its CRLF (or bare LF), from the
// framing budget.
func (r *respReader) line() (string, error) {
	var b []byte
	for {
		frag, err := r.br.ReadSlice('\n')
		if len(b)+len(frag) > r.left {
			return "", fmt.Errorf("%w: its head or framing is longer than %d bytes", errTooLong, maxFraming)
		}
		b = append(b, frag...)
		switch {
		case err == nil:
			r.left -= len(b)
			b = b[:len(b)-1]
			if n := len(b); n > 0 && b[n-1] == '\r' {
				b = b[:n-1]
			}
			return string(b), nil
		case !errors.Is(err, bufio.ErrBufferFull):
			return "", err
		}
	}
}

// exactly reads a body of n bytes.
func (r *respReader) exactly(n int64) ([]byte, error) {
	if n > r.limit {
		return nil, r.tooLong()
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r.br, b)
	return b, noEOF(err)
}

// toEOF reads a body that ends with the connection.
func (r *respReader) toEOF() ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.br, r.limit+1))
	if err == nil && int64(len(b)) > r.limit {
		return nil, r.tooLong()
	}
	return b, err
}

// chunked reads a chunked body and its trailers (which are dropped).
func (r *respReader) chunked() ([]byte, error) {
	var body []byte
	for {
		line, err := r.line()
		if err != nil {
			return nil, noEOF(err)
		}
		size, err := r.chunkSize(line, r.limit-int64(len(body)))
		if err != nil {
			return nil, err
		}
		if size == 0 {
			break
		}
		n := len(body)
		body = append(body, make([]byte, size)...)
		if _, err := io.ReadFull(r.br, body[n:]); err != nil {
			return nil, noEOF(err)
		}
		if crlf, err := r.line(); err != nil || crlf != "" {
			return nil, chunkEndErr(err)
		}
	}
	for {
		line, err := r.line()
		if err != nil || line == "" {
			return body, noEOF(err)
		}
	}
}

// chunkSize parses a chunk-size line (hexadecimal, then any chunk
// extensions) of a chunk that may be at most room bytes.
func (r *respReader) chunkSize(line string, room int64) (int64, error) {
	hex, _, _ := strings.Cut(line, ";")
	hex = strings.TrimRight(hex, " \t")
	if hex == "" {
		return 0, fmt.Errorf("%w: a chunk-size line holds no size", errMalformed)
	}
	var n int64
	for _, c := range []byte(hex) {
		d := strings.IndexByte("0123456789abcdef0123456789ABCDEF", c) % 16
		if d < 0 {
			return 0, fmt.Errorf("%w: a chunk size is not hexadecimal", errMalformed)
		}
		if n = n*16 + int64(d); n > room {
			return 0, r.tooLong()
		}
	}
	return n, nil
}

// chunkEndErr: what ended a chunk was not a CRLF, or not read.
func chunkEndErr(err error) error {
	if err != nil {
		return noEOF(err)
	}
	return fmt.Errorf("%w: a chunk does not end with CRLF", errMalformed)
}

func (r *respReader) tooLong() error {
	return fmt.Errorf("%w: its body is longer than %d bytes", errTooLong, r.limit)
}

// noEOF: the connection ended before the answer did.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
