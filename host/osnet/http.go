package osnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"github.com/wsu-project/wsu/host"
)

// DoHTTP makes req from this machine with net/http, as host.HTTPRequest
// describes: no proxy, no keep-alive, redirects only to the same scheme,
// host and port, the answer's body read up to req.Limit. Errors name the
// method and URL, never a body or a header value.
func DoHTTP(parent context.Context, req host.HTTPRequest) (host.HTTPResponse, error) {
	req, err := req.Normalize()
	if err != nil {
		return host.HTTPResponse{}, err
	}
	ctx, cancel := context.WithTimeout(parent, req.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
	if err != nil {
		return host.HTTPResponse{}, fmt.Errorf("http: %w", err)
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	what := req.Method + " " + hr.URL.Redacted()
	c := &http.Client{
		Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true, DialContext: (&net.Dialer{}).DialContext},
		CheckRedirect: sameOrigin,
	}
	resp, err := c.Do(hr)
	if err != nil {
		if parent.Err() != nil {
			return host.HTTPResponse{}, parent.Err()
		}
		if errors.Is(err, errRedirect) {
			return host.HTTPResponse{}, fmt.Errorf("%s: %w", what, unwrapURL(err))
		}
		return host.HTTPResponse{}, fmt.Errorf("%s: %w: %w", what, host.ErrUnreachable, unwrapURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, req.Limit+1))
	if err != nil {
		return host.HTTPResponse{}, fmt.Errorf("%s: reading the answer: %w", what, err)
	}
	if int64(len(body)) > req.Limit {
		return host.HTTPResponse{}, fmt.Errorf("%s: the answer's body is longer than %d bytes", what, req.Limit)
	}
	if len(body) == 0 {
		body = nil // none, as the agent's answer carries it
	}
	return host.HTTPResponse{Status: resp.StatusCode, Body: body}, nil
}

// errRedirect is a redirect DoHTTP would not follow: the server answered.
var errRedirect = errors.New("redirect not followed")

// sameOrigin follows a redirect only to the scheme, host and port of the
// first request, at most host.MaxHTTPRedirects times.
func sameOrigin(r *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case len(via) > host.MaxHTTPRedirects:
		return fmt.Errorf("%w: more than %d redirects", errRedirect, host.MaxHTTPRedirects)
	case r.URL.Scheme != first.Scheme || r.URL.Host != first.Host:
		return fmt.Errorf("%w: it leads to another origin (%s://%s)", errRedirect, r.URL.Scheme, r.URL.Host)
	}
	return nil
}

// unwrapURL drops net/url's "Get \"URL\": " prefix, which the caller's
// message already carries.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
