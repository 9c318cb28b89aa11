package osnet

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
