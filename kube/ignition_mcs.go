package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/wsu-project/wsu/version"
)

// MCSPort and MCSPath are where the Machine Config Server serves worker
// configs (api-int.<cluster>:22623/config/worker).
const (
	MCSPort = "22623"
	MCSPath = "/config/worker"
)

// DefaultIgnitionVersion is the spec 3 version asked for: the newest the
// reference tools were seen asking for that every supported MCS serves.
const DefaultIgnitionVersion = "3.2.0"

// spec2UserAgent makes the MCS answer with spec 2: it picks the spec from
// the User-Agent when no version is in the Accept header, and this is the
// Ignition 0.x release WSU sent.
const spec2UserAgent = "Ignition/0.35.0"

// maxIgnitionBody caps the download; worker configs are a few hundred KiB.
const maxIgnitionBody = 64 << 20

// MCSRequest says where and how to fetch a worker config.
type MCSRequest struct {
	// URL is a full URL (https://api-int.example.com:22623/config/worker) or
	// just a host name, to which the port and path above are added.
	URL string
	// CA is the PEM bundle the server certificate must chain to. Empty means
	// the system roots, which rarely hold a cluster's internal CA.
	CA []byte
	// Insecure skips server certificate verification. Only ever explicit.
	Insecure bool
	// SpecVersion is 2 or 3 (the default).
	SpecVersion int
	// IgnitionVersion is the spec 3 version for the Accept header.
	IgnitionVersion string
	// Timeout bounds the request; 0 means 60 seconds.
	Timeout time.Duration
}

// MCSURL normalises a URL or bare host to the worker config URL.
func MCSURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("the Machine Config Server URL is empty")
	}
	if !strings.Contains(s, "://") {
		host := s
		if _, _, err := net.SplitHostPort(s); err != nil {
			host = net.JoinHostPort(strings.Trim(s, "[]"), MCSPort)
		}
		s = "https://" + host + MCSPath
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("invalid Machine Config Server URL: %v", err)
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("the Machine Config Server URL must use https, not %q: the config holds credentials", u.Scheme)
	}
	if u.Host == "" {
		return "", errors.New("the Machine Config Server URL has no host")
	}
	if u.User != nil {
		return "", errors.New("the Machine Config Server URL must not carry credentials")
	}
	return u.String(), nil
}

var ignitionVersionRE = regexp.MustCompile(`^3\.[0-9]+\.[0-9]+$`)

// acceptHeader is what makes the MCS serve a given spec 3 version.
func acceptHeader(v string) string {
	return "application/vnd.coreos.ignition+json;version=" + v
}

// checkMCSRequest validates a request without network access.
func checkMCSRequest(req MCSRequest) (MCSRequest, error) {
	if req.SpecVersion == 0 {
		req.SpecVersion = 3
	}
	if req.SpecVersion != 2 && req.SpecVersion != 3 {
		return req, fmt.Errorf("spec version must be 2 or 3, got %d", req.SpecVersion)
	}
	if req.IgnitionVersion == "" {
		req.IgnitionVersion = DefaultIgnitionVersion
	}
	if !ignitionVersionRE.MatchString(req.IgnitionVersion) {
		return req, fmt.Errorf("ignition version %q must be a spec 3 version like %s", req.IgnitionVersion, DefaultIgnitionVersion)
	}
	if req.Timeout == 0 {
		req.Timeout = time.Minute
	}
	var err error
	req.URL, err = MCSURL(req.URL)
	return req, err
}

// mcsTLSConfig verifies the server against the CA, or the system roots.
func mcsTLSConfig(req MCSRequest) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if req.Insecure {
		cfg.InsecureSkipVerify = true
		return cfg, nil
	}
	if len(req.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(req.CA) {
			return nil, errors.New("the CA holds no PEM certificate")
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// FetchIgnitionConfig downloads the raw worker config.
func FetchIgnitionConfig(ctx context.Context, req MCSRequest) ([]byte, error) {
	req, err := checkMCSRequest(req)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := mcsTLSConfig(req)
	if err != nil {
		return nil, err
	}
	client := &http.Client{
		Timeout: req.Timeout,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     tlsCfg,
			TLSHandshakeTimeout: 15 * time.Second,
		},
		// A redirect could lead the credentials anywhere; the MCS never sends one.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	if err != nil {
		return nil, err
	}
	if req.SpecVersion == 2 {
		hr.Header.Set("User-Agent", spec2UserAgent)
	} else {
		hr.Header.Set("User-Agent", "wsu/"+version.Version)
		hr.Header.Set("Accept", acceptHeader(req.IgnitionVersion))
	}
	resp, err := client.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("fetching the worker Ignition config: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the worker Ignition config from %s: %s", req.URL, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIgnitionBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the worker Ignition config: %w", err)
	}
	if len(body) > maxIgnitionBody {
		return nil, fmt.Errorf("the worker Ignition config from %s is larger than %d MiB", req.URL, maxIgnitionBody>>20)
	}
	return body, nil
}

// FetchIgnition downloads and parses the worker config from the MCS.
func FetchIgnition(ctx context.Context, req MCSRequest) (*Ignition, error) {
	body, err := FetchIgnitionConfig(ctx, req)
	if err != nil {
		return nil, err
	}
	return ParseIgnition(body)
}
