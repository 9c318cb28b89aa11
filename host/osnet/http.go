package osnet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/wsu-project/wsu/host"
)

// DoHTTP makes req from this machine, as host.HTTPRequest describes, with
// the small HTTP/1.1 client of this package rather than net/http (which,
// with crypto/tls and HTTP/2, would grow the agent by half): plain http
// only, one connection per request (Connection: close), no proxy, at most
// host.MaxHTTPRedirects redirects to the same host and port, the whole
// exchange bounded by req.Timeout and the answer's body by req.Limit.
// A request that cannot connect, a connection that fails or ends early and
// a timeout wrap host.ErrUnreachable; an answer that is not HTTP/1.x or is
// too long is an error of its own. Errors name the method and URL, never a
// body or a header value.
func DoHTTP(parent context.Context, req host.HTTPRequest) (host.HTTPResponse, error) {
	req, err := req.Normalize()
	if err != nil {
		return host.HTTPResponse{}, err
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return host.HTTPResponse{}, fmt.Errorf("http: %w", err)
	}
	what := req.Method + " " + u.Redacted()
	ctx, cancel := context.WithTimeout(parent, req.Timeout)
	defer cancel()
	method, body := req.Method, req.Body
	for redirects := 0; ; redirects++ {
		ans, err := exchange(ctx, u, method, req.Header, body, req.Limit)
		switch {
		case parent.Err() != nil:
			return host.HTTPResponse{}, parent.Err()
		case err != nil && ctx.Err() != nil:
			return host.HTTPResponse{}, fmt.Errorf("%s: %w: no whole answer within %s: %w", what, host.ErrUnreachable, req.Timeout, ctx.Err())
		case err != nil:
			return host.HTTPResponse{}, fmt.Errorf("%s: %w", what, err)
		case !isRedirect(ans.status) || ans.location == "":
			return host.HTTPResponse{Status: ans.status, Body: ans.body}, nil
		case redirects == host.MaxHTTPRedirects:
			return host.HTTPResponse{}, fmt.Errorf("%s: %w: more than %d redirects", what, errRedirect, host.MaxHTTPRedirects)
		}
		next, err := u.Parse(ans.location)
		switch {
		case err != nil:
			return host.HTTPResponse{}, fmt.Errorf("%s: %w: its Location is not a URL", what, errRedirect)
		case next.Scheme != u.Scheme || next.Host != u.Host:
			return host.HTTPResponse{}, fmt.Errorf("%s: %w: it leads to another origin (%s://%s)", what, errRedirect, next.Scheme, next.Host)
		}
		u = next
		if ans.status != 307 && ans.status != 308 { // as browsers and net/http do
			body = nil
			if method != "HEAD" {
				method = "GET"
			}
		}
	}
}

// errRedirect is a redirect DoHTTP would not follow: the server answered.
var errRedirect = errors.New("redirect not followed")

func isRedirect(status int) bool {
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308
}

// exchange makes one request on a connection of its own and reads the
// answer (only the head of a redirect). The connection's deadline is ctx's,
// and ctx ending closes it.
func exchange(ctx context.Context, u *url.URL, method string, header map[string]string, body []byte, limit int64) (answer, error) {
	if u.Scheme != "http" {
		return answer{}, fmt.Errorf("scheme %q: only plain http", u.Scheme)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return answer{}, fmt.Errorf("%w: %w", host.ErrUnreachable, err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	_, werr := conn.Write(requestBytes(u, method, header, body))
	// A server may answer (and close) before it reads the whole body.
	ans, err := readResponse(bufio.NewReader(conn), method, limit)
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(werr, os.ErrDeadlineExceeded) {
		<-ctx.Done() // the connection's deadline is ctx's: it is ending
	}
	switch {
	case err != nil && werr != nil:
		return answer{}, fmt.Errorf("%w: sending the request: %w", host.ErrUnreachable, werr)
	case err != nil && !errors.Is(err, errMalformed) && !errors.Is(err, errTooLong):
		return answer{}, fmt.Errorf("%w: reading the answer: %w", host.ErrUnreachable, err)
	}
	return ans, err
}

// framingHeaders are the request headers the client writes itself: a
// request's own are dropped.
var framingHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Trailer", "Te", "Upgrade"}

// requestBytes is the request's head and body. Header names are
// canonicalized and sorted; a PUT or POST always carries Content-Length.
func requestBytes(u *url.URL, method string, header map[string]string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, u.RequestURI(), strings.TrimSuffix(u.Host, ":"))
	names := make([]string, 0, len(header))
	for k := range header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if ck := textproto.CanonicalMIMEHeaderKey(k); !slices.Contains(framingHeaders, ck) {
			fmt.Fprintf(&b, "%s: %s\r\n", ck, header[k])
		}
	}
	if len(body) > 0 || method == "PUT" || method == "POST" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}
