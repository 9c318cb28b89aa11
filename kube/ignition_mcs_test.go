package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeMCS serves worker configs the way the Machine Config Server picks
// them: a spec version in Accept wins, else an Ignition 0.x User-Agent gets
// spec 2.
type fakeMCS struct {
	*httptest.Server
	ca []byte

	mu   sync.Mutex
	seen []http.Header
	body map[string][]byte // spec version → config
}

func newFakeMCS(t *testing.T) *fakeMCS {
	m := &fakeMCS{body: map[string][]byte{
		"2.2.0": readFixture(t, "spec2.2.json"),
		"3.1.0": readFixture(t, "spec3.1.json"),
		"3.2.0": readFixture(t, "spec3.2.json"),
	}}
	m.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.seen = append(m.seen, r.Header.Clone())
		m.mu.Unlock()
		if r.URL.Path != MCSPath {
			http.NotFound(w, r)
			return
		}
		version := "3.2.0"
		if _, v, ok := strings.Cut(r.Header.Get("Accept"), "version="); ok {
			version = v
		} else if strings.HasPrefix(r.Header.Get("User-Agent"), "Ignition/0.") {
			version = "2.2.0"
		}
		body, ok := m.body[version]
		if !ok {
			http.Error(w, "unsupported version", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(m.Close)
	m.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.Certificate().Raw})
	return m
}

func (m *fakeMCS) lastHeader() http.Header {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[len(m.seen)-1]
}

// otherCA is a CA that did not sign the test server's certificate.
func otherCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestFetchIgnitionChoosesSpecByHeaders(t *testing.T) {
	mcs := newFakeMCS(t)
	tests := []struct {
		name        string
		spec        int
		ignVersion  string
		wantVersion string
		wantAccept  string
		wantUA      string
		wantCloud   string
	}{
		{"spec 2", 2, "", "2.2.0", "", "Ignition/0.35.0", "aws"},
		{"spec 3 default", 3, "", "3.2.0", "application/vnd.coreos.ignition+json;version=3.2.0", "wsu/", "external"},
		{"spec 3.1", 3, "3.1.0", "3.1.0", "application/vnd.coreos.ignition+json;version=3.1.0", "wsu/", "vsphere"},
		{"spec unset means 3", 0, "", "3.2.0", "application/vnd.coreos.ignition+json;version=3.2.0", "wsu/", "external"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FetchIgnition(context.Background(), MCSRequest{
				URL: mcs.URL + MCSPath, CA: mcs.ca, SpecVersion: tt.spec, IgnitionVersion: tt.ignVersion,
			})
			require.NoError(t, err)
			h := mcs.lastHeader()
			assert.Equal(t, tt.wantAccept, h.Get("Accept"))
			assert.True(t, strings.HasPrefix(h.Get("User-Agent"), tt.wantUA), h.Get("User-Agent"))
			assert.Equal(t, tt.wantVersion, got.Version)
			assert.Equal(t, tt.wantCloud, got.CloudProvider)
			assert.Equal(t, readFixture(t, "want-kubeconfig"), got.BootstrapKubeconfig)
			assert.Equal(t, readFixture(t, "want-kubelet-ca.crt"), got.KubeletCA)
		})
	}
}

func TestFetchIgnitionTLS(t *testing.T) {
	mcs := newFakeMCS(t)
	tests := []struct {
		name    string
		req     MCSRequest
		wantErr string
	}{
		{"right CA", MCSRequest{CA: mcs.ca}, ""},
		{"wrong CA", MCSRequest{CA: otherCA(t)}, "certificate signed by unknown authority"},
		{"system roots", MCSRequest{}, "certificate signed by unknown authority"},
		{"CA not PEM", MCSRequest{CA: []byte("not a certificate")}, "no PEM certificate"},
		{"explicit insecure", MCSRequest{Insecure: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.URL = mcs.URL + MCSPath
			got, err := FetchIgnition(context.Background(), tt.req)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, "3.2.0", got.Version)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestFetchIgnitionServerAnswers(t *testing.T) {
	mcs := newFakeMCS(t)
	mcs.body["3.2.0"] = []byte("<html>not ignition</html>")

	_, err := FetchIgnition(context.Background(), MCSRequest{URL: mcs.URL + MCSPath, CA: mcs.ca})
	require.ErrorIs(t, err, ErrIgnitionNotJSON)

	_, err = FetchIgnition(context.Background(), MCSRequest{URL: mcs.URL + MCSPath, CA: mcs.ca, IgnitionVersion: "3.9.0"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "400 Bad Request")

	_, err = FetchIgnition(context.Background(), MCSRequest{URL: mcs.URL + "/config/master-typo", CA: mcs.ca})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
}

func TestCheckMCSRequest(t *testing.T) {
	tests := []struct {
		name    string
		req     MCSRequest
		wantURL string
		wantErr string
	}{
		{"host only", MCSRequest{URL: "api-int.c.example.com"}, "https://api-int.c.example.com:22623/config/worker", ""},
		{"host and port", MCSRequest{URL: "api-int.c.example.com:8443"}, "https://api-int.c.example.com:8443/config/worker", ""},
		{"IPv6", MCSRequest{URL: "fd00::1"}, "https://[fd00::1]:22623/config/worker", ""},
		{"full URL kept", MCSRequest{URL: "https://10.0.0.1:22623/config/worker"}, "https://10.0.0.1:22623/config/worker", ""},
		{"http refused", MCSRequest{URL: "http://10.0.0.1:22623/config/worker"}, "", "must use https"},
		{"credentials refused", MCSRequest{URL: "https://u:p@10.0.0.1/config/worker"}, "", "must not carry credentials"},
		{"empty", MCSRequest{}, "", "empty"},
		{"spec 1", MCSRequest{URL: "h", SpecVersion: 1}, "", "2 or 3"},
		{"ignition version not 3", MCSRequest{URL: "h", IgnitionVersion: "2.2.0"}, "", "spec 3 version"},
		{"ignition version header injection", MCSRequest{URL: "h", IgnitionVersion: "3.2.0\r\nX: y"}, "", "spec 3 version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkMCSRequest(tt.req)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantURL, got.URL)
		})
	}
}
