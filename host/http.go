package host

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// HTTPRequest is one bounded HTTP exchange made from the host (Host.DoHTTP):
// what only the node can reach, such as a cloud's instance metadata service
// at a link-local address. The exchange goes straight to the URL's host,
// never through a proxy (the machine's HTTP_PROXY is for the node's
// services, and metadata services must not be proxied), over plain HTTP/1.1
// only (the agent links no TLS: metadata services are plain HTTP on
// link-local addresses), follows redirects only to the same host and port,
// and reads at most Limit bytes of the answer. Bodies and header values never appear in errors: a request
// may carry a token (IMDSv2's) and an answer may be one.
type HTTPRequest struct {
	// Method is GET, HEAD, PUT or POST; "" is GET.
	Method string `json:"method,omitempty"`
	// URL is an absolute http URL without user information; https is
	// refused.
	URL    string            `json:"url"`
	Header map[string]string `json:"header,omitempty"`
	// Body is sent as the request's body (at most MaxHTTPBody bytes).
	Body []byte `json:"body,omitempty"`
	// Timeout bounds the whole exchange, the answer's body included; 0 is
	// DefaultHTTPTimeout, more than MaxHTTPTimeout is refused.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Limit bounds the answer's body: a longer one is an error. 0 is
	// DefaultHTTPLimit, more than MaxHTTPBody is refused.
	Limit int64 `json:"limit,omitempty"`
}

// HTTPResponse is the answer to an HTTPRequest. A status other than 2xx is
// an answer, not an error.
type HTTPResponse struct {
	Status int    `json:"status"`
	Body   []byte `json:"body,omitempty"`
}

// Bounds of an HTTPRequest. MaxHTTPBody keeps a request and its answer
// within one agent message (1 MiB, the body base64-encoded in JSON).
const (
	DefaultHTTPTimeout = 10 * time.Second
	MaxHTTPTimeout     = 5 * time.Minute
	DefaultHTTPLimit   = 64 << 10
	MaxHTTPBody        = 512 << 10
	// MaxHTTPRedirects bounds the redirects followed (each to the same
	// host and port).
	MaxHTTPRedirects = 3
)

// HTTPMethods are the methods an HTTPRequest may use.
var HTTPMethods = []string{"GET", "HEAD", "PUT", "POST"}

// Normalize fills in the defaults (method GET, DefaultHTTPTimeout,
// DefaultHTTPLimit) and checks the request, naming what is wrong without
// quoting a body or a header value.
func (r HTTPRequest) Normalize() (HTTPRequest, error) {
	if r.Method == "" {
		r.Method = "GET"
	}
	if !slices.Contains(HTTPMethods, r.Method) {
		return r, fmt.Errorf("http: method %q: want one of %s", r.Method, strings.Join(HTTPMethods, ", "))
	}
	u, err := url.Parse(r.URL)
	switch {
	case err != nil:
		return r, fmt.Errorf("http: %w", err)
	case u.Scheme == "https":
		return r, fmt.Errorf("http: URL %q: https is not supported (the agent has no TLS; metadata services are plain http): want an http URL", r.URL)
	case u.Scheme != "http":
		return r, fmt.Errorf("http: URL %q: want an http URL", r.URL)
	case u.Host == "" || u.Hostname() == "":
		return r, fmt.Errorf("http: URL %q names no host", r.URL)
	case u.User != nil:
		return r, fmt.Errorf("http: URL with user information refused: pass credentials in a header")
	}
	for k, v := range r.Header {
		if !validHeaderName(k) {
			return r, fmt.Errorf("http: header name %q is not an HTTP token", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return r, fmt.Errorf("http: header %s: value holds a line break or NUL", k)
		}
	}
	if len(r.Body) > MaxHTTPBody {
		return r, fmt.Errorf("http: request body of %d bytes, at most %d", len(r.Body), MaxHTTPBody)
	}
	switch {
	case r.Timeout < 0 || r.Timeout > MaxHTTPTimeout:
		return r, fmt.Errorf("http: timeout %s: want 0 (the default, %s) up to %s", r.Timeout, DefaultHTTPTimeout, MaxHTTPTimeout)
	case r.Timeout == 0:
		r.Timeout = DefaultHTTPTimeout
	}
	switch {
	case r.Limit < 0 || r.Limit > MaxHTTPBody:
		return r, fmt.Errorf("http: limit %d: want 0 (the default, %d) up to %d bytes", r.Limit, DefaultHTTPLimit, MaxHTTPBody)
	case r.Limit == 0:
		r.Limit = DefaultHTTPLimit
	}
	return r, nil
}

// validHeaderName: an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
