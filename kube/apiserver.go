package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// NodeAPIURL is the URL a joining node reaches the API server at: on
// OpenShift the Infrastructure's apiServerInternalURI (api-int), on kubeadm
// clusters the server kube-public/cluster-info publishes for joining
// nodes, else the URL wsu itself talks to (which, for wsu running in the
// cluster, is a service address a node outside it may not reach).
func NodeAPIURL(ctx context.Context, c *Client) (string, error) {
	u, err := internalAPIURL(ctx, c)
	if err != nil || c.Config == nil || u != c.Config.Host {
		return u, err
	}
	server, _, err := ClusterInfo(ctx, c.Kube)
	switch {
	case err == nil && server != "":
		return server, nil
	case err == nil, apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return u, nil // no cluster-info, or not ours to read
	}
	return "", err
}

// HostPort is the host:port of an https URL, with 443 when it names none.
func HostPort(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q names no host", rawURL)
	}
	if u.Port() != "" {
		return u.Host, nil
	}
	port := "443"
	if strings.EqualFold(u.Scheme, "http") {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// ClockOffset is how far the API server's clock is ahead of this
// machine's (negative: behind), read from the Date header of a GET
// /version. The header has whole seconds, so the answer is good to about
// half a second plus half the round trip, which it returns as well.
func ClockOffset(ctx context.Context, c *Client) (offset, uncertainty time.Duration, err error) {
	if c.Config == nil {
		return 0, 0, errors.New("no API server configuration")
	}
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return 0, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.Config.Host, "/")+"/version", nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := hc.Do(req)
	end := time.Now()
	if err != nil {
		return 0, 0, fmt.Errorf("GET /version: %w", err)
	}
	resp.Body.Close()
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return 0, 0, fmt.Errorf("GET /version: the answer's Date header %q: %w", resp.Header.Get("Date"), err)
	}
	rtt := end.Sub(start)
	mid := start.Add(rtt / 2)
	// The server truncated its time to the second: on average it was half
	// a second later than the header says.
	return date.Add(500 * time.Millisecond).Sub(mid), 500*time.Millisecond + rtt/2, nil
}
