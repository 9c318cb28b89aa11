package windows

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// newCA is a fresh self-signed CA: its PEM and thumbprint.
func newCA(t *testing.T, name string) (string, string) {
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
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), host.Thumbprint(der)
}

func TestCertificateValidate(t *testing.T) {
	a, _ := newCA(t, "a")
	runValidate(t, Certificate{}, []validateCase{
		{name: "a bundle", attrs: map[string]cty.Value{"bundle": cty.StringVal("# comment\n" + a)}},
		{name: "empty", attrs: map[string]cty.Value{"bundle": cty.StringVal("")}},
		{name: "a key", attrs: map[string]cty.Value{"bundle": cty.StringVal("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")},
			wantSummary: "Invalid CA bundle", wantAttr: "bundle"},
		{name: "garbage certificate", attrs: map[string]cty.Value{"bundle": cty.StringVal("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")},
			wantSummary: "Invalid CA bundle", wantAttr: "bundle"},
		{name: "truncated", attrs: map[string]cty.Value{"bundle": cty.StringVal(a + "-----BEGIN CERTIFICATE-----\nAAAA\n")},
			wantSummary: "Invalid CA bundle", wantAttr: "bundle"},
		{name: "store", attrs: map[string]cty.Value{"bundle": cty.StringVal(a), "store": cty.StringVal(`ROOT\x`)},
			wantSummary: "Invalid certificate store", wantAttr: "store"},
	})
}

func TestCertificate(t *testing.T) {
	a, ta := newCA(t, "wsu test A")
	b, tb := newCA(t, "wsu test B")
	admin, tadmin := newCA(t, "an admin's own")
	h := newHost(t)
	// An administrator trusts a CA already; it is also in the first bundle.
	adminDER, _ := pem.Decode([]byte(admin))
	require.NoError(t, h.AddCertificate(ctx, "ROOT", adminDER.Bytes))

	type step struct {
		name        string
		bundle      string
		wantFields  []string
		wantStore   []string
		wantRecord  []string
		wantAdded   []string
		wantRemoved []string
	}
	steps := []step{
		{name: "a bundle of two and the admin's", bundle: a + b + admin, wantFields: []string{ta, tb},
			wantStore: []string{ta, tb, tadmin}, wantRecord: []string{ta, tb}, wantAdded: []string{ta, tb}},
		{name: "again: nothing to do", bundle: a + b + admin,
			wantStore: []string{ta, tb, tadmin}, wantRecord: []string{ta, tb}},
		{name: "B and the admin's dropped: only B goes", bundle: a, wantFields: []string{tb},
			wantStore: []string{ta, tadmin}, wantRecord: []string{ta}, wantRemoved: []string{tb}},
		{name: "empty bundle: everything wsu added goes", bundle: "", wantFields: []string{ta},
			wantStore: []string{tadmin}, wantRemoved: []string{ta}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			cfg := cfgFor(t, Certificate{}, map[string]cty.Value{"bundle": cty.StringVal(s.bundle)})
			pr, _ := converge(t, Certificate{}, h, cfg)
			assert.ElementsMatch(t, s.wantFields, fieldNames(pr.Change))
			if pr.Change != nil {
				assert.Equal(t, `LocalMachine\ROOT`, pr.Change.Subject)
			}
			have, err := h.Certificates(ctx, "ROOT")
			require.NoError(t, err)
			assert.ElementsMatch(t, s.wantStore, have)
			rec, err := h.RegistryGet(ctx, CertTrackKey, "ROOT")
			require.NoError(t, err)
			assert.ElementsMatch(t, s.wantRecord, rec.Strings)
			assert.Equal(t, listVal(s.wantAdded), pr.Result.GetAttr("added"))
			assert.Equal(t, listVal(s.wantRemoved), pr.Result.GetAttr("removed"))
		})
	}

	t.Run("a certificate of ours removed by hand is added again", func(t *testing.T) {
		cfg := cfgFor(t, Certificate{}, map[string]cty.Value{"bundle": cty.StringVal(a)})
		converge(t, Certificate{}, h, cfg)
		require.NoError(t, h.DeleteCertificate(ctx, "ROOT", ta))
		pr, _ := converge(t, Certificate{}, h, cfg)
		assert.Equal(t, []string{ta}, fieldNames(pr.Change))
		assert.Equal(t, "CN=wsu test A", field(t, pr.Change, ta).New.AsString())
	})
	t.Run("unknown bundle", func(t *testing.T) {
		cfg := cfgFor(t, Certificate{}, map[string]cty.Value{"bundle": cty.UnknownVal(cty.String)})
		pr := plan(t, Certificate{}, h, cfg)
		require.False(t, pr.Diagnostics.HasErrors())
		assert.Equal(t, modules.Update, action(pr.Change))
	})
}
