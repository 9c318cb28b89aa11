package kube

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/cluster-bootstrap/token/jws"

	"github.com/wsu-project/wsu/kube/tokenjoin"
)

// The real API server, bootstrapsigner and tokencleaner are exercised by
// modules/kube's TestDiscovery. Here a stand-in plays the faults no real
// part produces: a man in the middle serving a cluster-info the signer
// never wrote.

const (
	testTokenID     = "abcdef"
	testTokenSecret = "0123456789abcdef"
	testToken       = testTokenID + "." + testTokenSecret
)

// clusterInfoKubeconfig is a cluster-info kubeconfig as kubeadm writes
// it: one unnamed cluster, its server and CA.
func clusterInfoKubeconfig(t *testing.T, server string, ca []byte) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[""] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	b, err := clientcmd.Write(*cfg)
	require.NoError(t, err)
	return string(b)
}

// signed is cluster-info's data with the kubeconfig signed for the test
// token, as the bootstrapsigner writes it.
func signed(t *testing.T, kubeconfig string) map[string]string {
	t.Helper()
	sig, err := jws.ComputeDetachedSignature(kubeconfig, testTokenID, testTokenSecret)
	require.NoError(t, err)
	return map[string]string{"kubeconfig": kubeconfig, "jws-kubeconfig-" + testTokenID: sig}
}

// mitmServer is a stand-in for the API server at 127.0.0.1: read n (1 for
// the first read of cluster-info) gets data(n).
type mitmServer struct {
	*httptest.Server
	ca []byte // the PEM of the certificate it serves with (self-signed, a CA)

	mu    sync.Mutex
	reads int
}

func newMITMServer(t *testing.T, data func(m *mitmServer, n int) map[string]string) *mitmServer {
	t.Helper()
	m := &mitmServer{}
	m.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" || r.Header.Get("Authorization") != "" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		m.reads++
		n := m.reads
		m.mu.Unlock()
		cm := corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: "cluster-info", Namespace: "kube-public"},
			Data:       data(m, n),
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cm)
	}))
	m.StartTLS()
	t.Cleanup(m.Close)
	m.ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.Certificate().Raw})
	return m
}

func (m *mitmServer) endpoint() string { return strings.TrimPrefix(m.URL, "https://") }

func (m *mitmServer) readCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads
}

func pinOf(t *testing.T, caPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(caPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return tokenjoin.CACertHash(cert)
}

func discoverFrom(m *mitmServer, pins ...string) (*Discovery, error) {
	return Discover(context.Background(), DiscoveryRequest{
		Endpoint: m.endpoint(), Token: testToken, CACertHashes: pins,
		Timeout: 3 * time.Second, Interval: 50 * time.Millisecond,
	})
}

// requireRefusal checks the refusal's kind and input, and that the
// token's secret is nowhere in it.
func requireRefusal(t *testing.T, err error, kind error, input DiscoveryInput) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, kind)
	var de *DiscoveryError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, input, de.Input)
	assert.NotContains(t, err.Error(), testTokenSecret, "the token's secret never appears in an error")
}

// TestDiscoverStandIn: the stand-in serves what the real API server would,
// so discovery succeeds: the control for the fault cases below.
func TestDiscoverStandIn(t *testing.T) {
	// cluster-info names the control plane endpoint; the node was given
	// another address of the same API server.
	m := newMITMServer(t, func(m *mitmServer, _ int) map[string]string {
		return signed(t, clusterInfoKubeconfig(t, "https://cp.example.com:6443", m.ca))
	})
	d, err := discoverFrom(m, pinOf(t, m.ca))
	require.NoError(t, err)
	assert.Equal(t, m.URL, d.Server, "where the CA was verified")
	assert.Equal(t, "https://cp.example.com:6443", d.ClusterInfoServer)
	assert.Equal(t, pinOf(t, m.ca), d.CACertHash)
	assert.True(t, d.Pinned)
	assert.Equal(t, "system:bootstrap:"+testTokenID, d.Requester)
	assert.Equal(t, 2, m.readCount(), "an unverified read, then a verified one")
	server, ca, err := KubeconfigServer(d.BootstrapKubeconfig)
	require.NoError(t, err)
	assert.Equal(t, m.URL, server)
	assert.Equal(t, m.ca, ca)
	cfg, err := clientcmd.Load(d.BootstrapKubeconfig)
	require.NoError(t, err)
	assert.Equal(t, testToken, cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token)
}

// A man in the middle alters cluster-info's kubeconfig (its own server
// and CA) but cannot sign it without the token: refused, at the token.
func TestDiscoverRefusesTamperedClusterInfo(t *testing.T) {
	evil := otherCA(t)
	m := newMITMServer(t, func(m *mitmServer, _ int) map[string]string {
		data := signed(t, clusterInfoKubeconfig(t, m.URL, m.ca))
		data["kubeconfig"] = clusterInfoKubeconfig(t, "https://evil.example:6443", evil)
		return data
	})
	_, err := discoverFrom(m, pinOf(t, evil))
	requireRefusal(t, err, ErrBadSignature, InputToken)
	assert.Contains(t, err.Error(), "altered ConfigMap or a man in the middle")
	assert.Equal(t, 1, m.readCount(), "nothing after the signature fails")
}

// The first, unverified read is answered correctly, the verified one
// with a different (also signed) CA: the server changed its story.
func TestDiscoverRefusesDifferentCAOnVerifiedRead(t *testing.T) {
	other := otherCA(t)
	m := newMITMServer(t, func(m *mitmServer, n int) map[string]string {
		if n == 1 {
			return signed(t, clusterInfoKubeconfig(t, m.URL, m.ca))
		}
		return signed(t, clusterInfoKubeconfig(t, m.URL, other))
	})
	_, err := discoverFrom(m, pinOf(t, m.ca))
	requireRefusal(t, err, ErrClusterInfoChanged, InputEndpoint)
	assert.Equal(t, 2, m.readCount())
}

// cluster-info names a CA the pin matches, but the server at the
// endpoint does not hold its key: the verified read fails.
func TestDiscoverRefusesServerTheCADoesNotVerify(t *testing.T) {
	other := otherCA(t)
	m := newMITMServer(t, func(m *mitmServer, _ int) map[string]string {
		return signed(t, clusterInfoKubeconfig(t, m.URL, other))
	})
	_, err := discoverFrom(m, pinOf(t, other))
	requireRefusal(t, err, ErrServerUnverified, InputEndpoint)
}

// A pin of another key: refused at the pins, naming the key found.
func TestDiscoverRefusesWrongPin(t *testing.T) {
	m := newMITMServer(t, func(m *mitmServer, _ int) map[string]string {
		return signed(t, clusterInfoKubeconfig(t, m.URL, m.ca))
	})
	_, err := discoverFrom(m, pinOf(t, otherCA(t)))
	requireRefusal(t, err, ErrCACertHashMismatch, InputCACertHashes)
	assert.Contains(t, err.Error(), pinOf(t, m.ca))
	assert.Equal(t, 1, m.readCount())
}

// Without pins, only an explicit waiver lets the CA through, unpinned.
func TestDiscoverWithoutPins(t *testing.T) {
	m := newMITMServer(t, func(m *mitmServer, _ int) map[string]string {
		return signed(t, clusterInfoKubeconfig(t, m.URL, m.ca))
	})
	_, err := discoverFrom(m)
	requireRefusal(t, err, ErrNoCACertHashes, InputCACertHashes)
	assert.Contains(t, err.Error(), "unsafe_skip_ca_verification")
	assert.Zero(t, m.readCount(), "refused before any request")

	d, err := Discover(context.Background(), DiscoveryRequest{Endpoint: m.URL, Token: testToken, UnsafeSkipCAVerification: true})
	require.NoError(t, err)
	assert.False(t, d.Pinned)
	assert.Equal(t, pinOf(t, m.ca), d.CACertHash)
}

// A token the server has no signature for: refused once the time is up,
// at the token, saying unknown or expired.
func TestDiscoverUnsignedToken(t *testing.T) {
	m := newMITMServer(t, func(m *mitmServer, _ int) map[string]string {
		return map[string]string{"kubeconfig": clusterInfoKubeconfig(t, m.URL, m.ca)}
	})
	start := time.Now()
	_, err := Discover(context.Background(), DiscoveryRequest{Endpoint: m.endpoint(), Token: testToken,
		CACertHashes: []string{pinOf(t, m.ca)}, Timeout: 500 * time.Millisecond, Interval: 100 * time.Millisecond})
	requireRefusal(t, err, ErrTokenNotSigned, InputToken)
	assert.Contains(t, err.Error(), `token id "abcdef"`)
	assert.Contains(t, err.Error(), "unknown")
	assert.Less(t, time.Since(start), 3*time.Second, "bounded by the timeout")
	assert.Greater(t, m.readCount(), 1, "it waited for the signer")
}

// Bad input is refused before any request, and never echoes the token.
func TestDiscoverChecksInputFirst(t *testing.T) {
	m := newMITMServer(t, func(*mitmServer, int) map[string]string { return nil })
	good := pinOf(t, m.ca)
	tests := []struct {
		name  string
		req   DiscoveryRequest
		kind  error
		input DiscoveryInput
	}{
		{"bad pin", DiscoveryRequest{Token: testToken, CACertHashes: []string{good, "sha256:abc"}}, ErrBadCACertHash, InputCACertHashes},
		{"md5 pin", DiscoveryRequest{Token: testToken, CACertHashes: []string{"md5:" + strings.TrimPrefix(good, "sha256:")}}, ErrBadCACertHash, InputCACertHashes},
		{"token without secret", DiscoveryRequest{Token: testTokenID, CACertHashes: []string{good}}, ErrBadToken, InputToken},
		{"upper-case token", DiscoveryRequest{Token: strings.ToUpper(testToken), CACertHashes: []string{good}}, ErrBadToken, InputToken},
		{"short secret", DiscoveryRequest{Token: testToken[:len(testToken)-1], CACertHashes: []string{good}}, ErrBadToken, InputToken},
		{"http endpoint", DiscoveryRequest{Endpoint: "http://" + m.endpoint(), Token: testToken, CACertHashes: []string{good}}, ErrBadEndpoint, InputEndpoint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.req.Endpoint == "" {
				tt.req.Endpoint = m.endpoint()
			}
			_, err := Discover(context.Background(), tt.req)
			requireRefusal(t, err, tt.kind, tt.input)
			assert.NotContains(t, err.Error(), testTokenSecret[:8])
		})
	}
	assert.Zero(t, m.readCount())
}

// The pin is kubeadm's: sha256 over the DER SubjectPublicKeyInfo, the
// value `openssl x509 -pubkey | openssl pkey -pubin -outform der |
// sha256sum` prints, not a hash of the whole certificate.
func TestCACertHashIsOverThePublicKey(t *testing.T) {
	caPEM := otherCA(t)
	block, _ := pem.Decode(caPEM)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	pub, err := x509.MarshalPKIXPublicKey(cert.PublicKey)
	require.NoError(t, err)
	assert.Equal(t, cert.RawSubjectPublicKeyInfo, pub)
	sum := sha256.Sum256(pub)
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), tokenjoin.CACertHash(cert))
	whole := sha256.Sum256(cert.Raw)
	assert.NotEqual(t, "sha256:"+hex.EncodeToString(whole[:]), tokenjoin.CACertHash(cert))
}

// A run cancelled while discovery waits for the signature stops at once
// and says so.
func TestDiscoverCancelled(t *testing.T) {
	m := newMITMServer(t, func(m *mitmServer, _ int) map[string]string {
		return map[string]string{"kubeconfig": clusterInfoKubeconfig(t, m.URL, m.ca)}
	})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	_, err := Discover(ctx, DiscoveryRequest{Endpoint: m.endpoint(), Token: testToken,
		CACertHashes: []string{pinOf(t, m.ca)}, Timeout: time.Minute, Interval: 100 * time.Millisecond})
	requireRefusal(t, err, ErrTokenNotSigned, InputToken)
	assert.Contains(t, err.Error(), "(cancelled)")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// Nothing listening: it keeps trying until the timeout, then says where
// it could not read from, at the endpoint.
func TestDiscoverUnreachable(t *testing.T) {
	_, err := Discover(context.Background(), DiscoveryRequest{Endpoint: "127.0.0.1:1", Token: testToken,
		CACertHashes: []string{"sha256:" + strings.Repeat("ab", 32)}, Timeout: 500 * time.Millisecond, Interval: 100 * time.Millisecond})
	requireRefusal(t, err, ErrUnreachable, InputEndpoint)
	assert.Contains(t, err.Error(), "https://127.0.0.1:1")
	assert.Contains(t, err.Error(), "gave up after 500ms")
}
