package osnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

// secret stands for a token: it must never appear in an error.
const secret = "AQAEAtoken-of-the-node"

func TestDoHTTP(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "elsewhere") }))
	defer other.Close()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			io.WriteString(w, r.Method+" "+r.Header.Get("X-Token")+" "+string(body))
		case "/big":
			io.WriteString(w, strings.Repeat(secret, 10))
		case "/moved":
			http.Redirect(w, r, "/echo", http.StatusFound)
		case "/away":
			http.Redirect(w, r, other.URL+"/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/hops/3", "/hops/2", "/hops/1":
			http.Redirect(w, r, fmt.Sprint(r.URL.Path[len("/hops/")]-'1'), http.StatusFound)
		case "/hops/0":
			http.Redirect(w, r, "/echo", http.StatusFound)
		case "/307":
			http.Redirect(w, r, "/echo", http.StatusTemporaryRedirect)
		case "/303":
			http.Redirect(w, r, "/echo", http.StatusSeeOther)
		case "/slow":
			<-release
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for /slow
	// The machine's proxy is for the node's services: DoHTTP goes direct.
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	t.Setenv("NO_PROXY", "")
	closed := closedURL(t)

	tests := []struct {
		name        string
		req         host.HTTPRequest
		want        host.HTTPResponse
		errContains string
		unreachable bool
	}{
		{name: "GET with a header", req: host.HTTPRequest{URL: srv.URL + "/echo", Header: map[string]string{"X-Token": secret}},
			want: host.HTTPResponse{Status: 200, Body: []byte("GET " + secret + " ")}},
		{name: "PUT with a body", req: host.HTTPRequest{Method: "PUT", URL: srv.URL + "/echo", Body: []byte("b")},
			want: host.HTTPResponse{Status: 200, Body: []byte("PUT  b")}},
		{name: "a status is an answer", req: host.HTTPRequest{URL: srv.URL + "/none"},
			want: host.HTTPResponse{Status: 404, Body: []byte("404 page not found\n")}},
		{name: "HEAD has no body", req: host.HTTPRequest{Method: "HEAD", URL: srv.URL + "/echo"}, want: host.HTTPResponse{Status: 200}},
		{name: "redirect on the same origin", req: host.HTTPRequest{URL: srv.URL + "/moved"},
			want: host.HTTPResponse{Status: 200, Body: []byte("GET  ")}},
		{name: "3 redirects", req: host.HTTPRequest{URL: srv.URL + "/hops/2"}, want: host.HTTPResponse{Status: 200, Body: []byte("GET  ")}},
		{name: "4 redirects", req: host.HTTPRequest{URL: srv.URL + "/hops/3"}, errContains: "more than 3 redirects"},
		{name: "307 keeps the method and body", req: host.HTTPRequest{Method: "PUT", URL: srv.URL + "/307", Body: []byte("b")},
			want: host.HTTPResponse{Status: 200, Body: []byte("PUT  b")}},
		{name: "303 is a GET", req: host.HTTPRequest{Method: "PUT", URL: srv.URL + "/303", Body: []byte("b")},
			want: host.HTTPResponse{Status: 200, Body: []byte("GET  ")}},
		{name: "redirect to another origin", req: host.HTTPRequest{URL: srv.URL + "/away"}, errContains: "another origin"},
		{name: "redirect loop", req: host.HTTPRequest{URL: srv.URL + "/loop"}, errContains: "more than 3 redirects"},
		{name: "answer over the limit", req: host.HTTPRequest{URL: srv.URL + "/big", Limit: 100}, errContains: "longer than 100 bytes"},
		{name: "answer at the limit", req: host.HTTPRequest{URL: srv.URL + "/big", Limit: int64(10 * len(secret))},
			want: host.HTTPResponse{Status: 200, Body: []byte(strings.Repeat(secret, 10))}},
		{name: "timeout", req: host.HTTPRequest{URL: srv.URL + "/slow", Timeout: 50 * time.Millisecond}, unreachable: true},
		{name: "closed port", req: host.HTTPRequest{URL: closed, Header: map[string]string{"X-Token": secret}}, unreachable: true},
		{name: "bad method", req: host.HTTPRequest{Method: "DELETE", URL: srv.URL}, errContains: "method"},
		{name: "credentials in the URL", req: host.HTTPRequest{URL: "http://user:" + secret + "@127.0.0.1/"}, errContains: "user information"},
		{name: "not http", req: host.HTTPRequest{URL: "file:///etc/passwd"}, errContains: "want an http URL"},
		{name: "https", req: host.HTTPRequest{URL: "https://127.0.0.1/"}, errContains: "https is not supported"},
		{name: "header value with a line break", req: host.HTTPRequest{URL: srv.URL, Header: map[string]string{"X-Token": secret + "\r\nX: y"}}, errContains: "line break"},
		{name: "limit too large", req: host.HTTPRequest{URL: srv.URL, Limit: host.MaxHTTPBody + 1}, errContains: "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DoHTTP(context.Background(), tt.req)
			if tt.errContains == "" && !tt.unreachable {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err)
			assert.NotContains(t, err.Error(), secret, "no body or header value in an error")
			assert.Contains(t, err.Error(), tt.errContains)
			assert.Equal(t, tt.unreachable, errorsIsUnreachable(err), "unreachable: %v", err)
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := DoHTTP(ctx, host.HTTPRequest{URL: srv.URL + "/echo"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, errorsIsUnreachable(err), "the caller gave up: no answer about the server")
}

func errorsIsUnreachable(err error) bool { return err != nil && errors.Is(err, host.ErrUnreachable) }

// closedURL is an http URL on 127.0.0.1 where nothing listens.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr + "/"
}

// TestDoHTTPRaw: answers net/http's server would not give, from a server
// on 127.0.0.1 that writes them as they are.
func TestDoHTTPRaw(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\n"
	tests := []struct {
		name, answer string
		want         host.HTTPResponse
		errContains  string
		unreachable  bool
	}{
		{name: "chunked", answer: ok + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", want: host.HTTPResponse{Status: 200, Body: []byte("abc")}},
		{name: "chunked over the limit", answer: ok + "Transfer-Encoding: chunked\r\n\r\n40\r\n" + strings.Repeat("x", 64) + "\r\n0\r\n\r\n", errContains: "longer than 10 bytes"},
		{name: "Content-Length over the limit", answer: ok + "Content-Length: 11\r\n\r\n" + secret[:11], errContains: "longer than 10 bytes"},
		{name: "malformed status line", answer: "HTTP/1.1 2OO " + secret + "\r\n\r\n", errContains: "malformed answer"},
		{name: "malformed header", answer: ok + "X-Token " + secret + "\r\n\r\n", errContains: "malformed answer"},
		{name: "closed without an answer", answer: "", unreachable: true, errContains: "without an answer"},
		{name: "stalls in the head", answer: ok + "X-A: b\r\n", unreachable: true, errContains: "deadline exceeded"},
		{name: "stalls in the body", answer: ok + "Content-Length: 10\r\n\r\nabc", unreachable: true, errContains: "deadline exceeded"},
		{name: "stalls in a chunk", answer: ok + "Transfer-Encoding: chunked\r\n\r\n5\r\nab", unreachable: true, errContains: "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := rawServer(t, tt.answer, strings.HasPrefix(tt.name, "stalls"))
			got, err := DoHTTP(context.Background(), host.HTTPRequest{URL: url, Limit: 10, Timeout: 100 * time.Millisecond,
				Header: map[string]string{"X-Token": secret}})
			if tt.errContains == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
				return
			}
			require.Error(t, err)
			assert.NotContains(t, err.Error(), secret, "no body or header value in an error")
			assert.Contains(t, err.Error(), tt.errContains)
			assert.Equal(t, tt.unreachable, errorsIsUnreachable(err), "unreachable: %v", err)
		})
	}
}

// rawServer is an http URL on 127.0.0.1 whose server reads a request's
// head, writes answer, and closes the connection, or holds it open until
// the test ends if stall.
func rawServer(t *testing.T, answer string, stall bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				for line := "x"; line != "\r\n"; {
					if line, err = br.ReadString('\n'); err != nil {
						return
					}
				}
				io.WriteString(conn, answer)
				if stall {
					<-done
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/"
}

func TestRequestBytes(t *testing.T) {
	u, err := url.Parse("http://169.254.169.254:80/latest/api/token?x=1#frag")
	require.NoError(t, err)
	got := requestBytes(u, "PUT", map[string]string{"x-aws-ec2-metadata-token-ttl-seconds": "60", "host": "evil", "Connection": "keep-alive", "content-length": "9"}, nil)
	assert.Equal(t, "PUT /latest/api/token?x=1 HTTP/1.1\r\nHost: 169.254.169.254:80\r\n"+
		"X-Aws-Ec2-Metadata-Token-Ttl-Seconds: 60\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", string(got))
	u, err = url.Parse("http://[::1]")
	require.NoError(t, err)
	assert.Equal(t, "GET / HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n", string(requestBytes(u, "GET", nil, nil)))
}
