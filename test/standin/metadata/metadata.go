// Package metadata is a TEST STAND-IN for the cloud instance metadata
// services a Windows node reads its name from: AWS's instance metadata
// service (IMDSv2's session token and IMDSv1) and GCP's metadata server,
// served over HTTP on 127.0.0.1 for tests that point wsu at it
// (win_instance_metadata's endpoint, join's instance_metadata_url).
//
// Its limits: it serves only the paths wsu reads (the AWS token and
// local-hostname, GCP's instance/hostname), at any address rather than
// 169.254.169.254 and metadata.google.internal; tokens are never checked
// for expiry; it does not model IMDS's hop limit or GCP's refusal of
// proxied requests beyond X-Forwarded-For.
package metadata

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
)

// Options says what the stand-in answers.
type Options struct {
	// AWSHostname is local-hostname's answer; "" answers 404.
	AWSHostname string
	// GCPHostname is instance/hostname's answer; "" answers 404.
	GCPHostname string
	// IMDSv1Only answers the token PUT with 404, as a metadata service
	// without IMDSv2 does.
	IMDSv1Only bool
	// TokenRequired refuses a read without a token (401), as an instance
	// with HttpTokens=required does.
	TokenRequired bool
}

// Server is a running stand-in; Close it.
type Server struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string
	srv *httptest.Server

	opts Options
	mu   sync.Mutex
	log  []string
}

// token is the session token the stand-in hands out.
const token = "AQAEAstand-in-token=="

// Start serves the stand-in on 127.0.0.1.
func Start(opts Options) *Server {
	s := &Server{opts: opts}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Requests lists what was asked, as "METHOD PATH" plus " token" when the
// request carried the session token.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	entry := r.Method + " " + r.URL.Path
	if r.Header.Get("X-aws-ec2-metadata-token") != "" {
		entry += " token"
	}
	s.mu.Lock()
	s.log = append(s.log, entry)
	s.mu.Unlock()
	switch {
	case r.URL.Path == "/latest/api/token" && r.Method == http.MethodPut:
		s.token(w, r)
	case r.URL.Path == "/latest/meta-data/local-hostname" && r.Method == http.MethodGet:
		switch got := r.Header.Get("X-aws-ec2-metadata-token"); {
		case got == "" && s.opts.TokenRequired, got != "" && got != token:
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		default:
			answer(w, s.opts.AWSHostname)
		}
	case r.URL.Path == "/computeMetadata/v1/instance/hostname" && r.Method == http.MethodGet:
		if r.Header.Get("Metadata-Flavor") != "Google" || r.Header.Get("X-Forwarded-For") != "" {
			http.Error(w, "Missing Metadata-Flavor:Google header.", http.StatusForbidden)
			return
		}
		w.Header().Set("Metadata-Flavor", "Google")
		answer(w, s.opts.GCPHostname)
	default:
		http.NotFound(w, r)
	}
}

// token answers IMDSv2's PUT: a TTL of 1 to 21600 seconds is required.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if s.opts.IMDSv1Only {
		http.NotFound(w, r)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
	if err != nil || ttl < 1 || ttl > 21600 {
		http.Error(w, "Bad Request", http.StatusBadRequest)
		return
	}
	w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", fmt.Sprint(ttl))
	io.WriteString(w, token)
}

func answer(w http.ResponseWriter, v string) {
	if v == "" {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	io.WriteString(w, v)
}
