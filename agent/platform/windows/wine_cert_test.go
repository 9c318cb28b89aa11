//go:build !windows

package windows_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

// testCA is a fresh self-signed CA certificate, DER.
func testCA(t *testing.T, name string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return der
}

// contains, so a failure does not print 150 thumbprints.
func contains(list []string, s string) bool { return slices.Contains(list, s) }

// TestWineCertStore drives the cert.* ops through the real agent under
// Wine's crypt32: CertOpenStore on the LocalMachine ROOT registry store,
// CertAddEncodedCertificateToStore, CertEnumCertificatesInStore and
// CertDeleteCertificateFromStore.
func TestWineCertStore(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	wsu := buildWsu(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := startAgent(ctx, t, pr, wsu)
	var cs host.CertStore = c

	a, b := testCA(t, "wsu wine test A"), testCA(t, "wsu wine test B")
	ta, tb := host.Thumbprint(a), host.Thumbprint(b)

	before, err := cs.Certificates(ctx, "ROOT")
	require.NoError(t, err)
	t.Logf("Wine's LocalMachine ROOT store holds %d certificates", len(before))
	assert.False(t, contains(before, ta))

	require.NoError(t, cs.AddCertificate(ctx, "ROOT", a))
	require.NoError(t, cs.AddCertificate(ctx, "ROOT", b))
	require.NoError(t, cs.AddCertificate(ctx, "Root", a), "adding one already there is no error (and no duplicate)")
	after, err := cs.Certificates(ctx, "ROOT")
	require.NoError(t, err)
	assert.True(t, contains(after, ta) && contains(after, tb), "both added")
	assert.Len(t, after, len(before)+2, "one entry each")

	require.NoError(t, cs.DeleteCertificate(ctx, "ROOT", ta))
	require.NoError(t, cs.DeleteCertificate(ctx, "ROOT", ta), "a missing certificate is not an error")
	left, err := cs.Certificates(ctx, "ROOT")
	require.NoError(t, err)
	assert.False(t, contains(left, ta), "A deleted")
	assert.True(t, contains(left, tb), "B kept")
	assert.Len(t, left, len(before)+1)

	// A second agent process sees the store as the first left it: the
	// store is persistent (the registry), not the process's memory.
	c2 := startAgent(ctx, t, pr, wsu)
	again, err := c2.Certificates(ctx, "ROOT")
	require.NoError(t, err)
	assert.True(t, contains(again, tb) && !contains(again, ta), "the second agent sees B and not A")

	// Refusals: not a certificate, a bad store name, a bad thumbprint.
	assert.Error(t, cs.AddCertificate(ctx, "ROOT", []byte("not DER")))
	assert.Error(t, cs.AddCertificate(ctx, `ROOT\x`, a))
	assert.Error(t, cs.DeleteCertificate(ctx, "ROOT", "abc"))
}
