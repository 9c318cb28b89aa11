package tokenjoin

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBootstrapToken(t *testing.T) {
	id, secret, err := ParseBootstrapToken("abcdef.0123456789abcdef")
	require.NoError(t, err)
	assert.Equal(t, "abcdef", id)
	assert.Equal(t, "0123456789abcdef", secret)
	for _, bad := range []string{"", "abcdef", "abcdef.", "ABCDEF.0123456789abcdef", "abcde.0123456789abcdef",
		"abcdef.0123456789abcdeg0", "abcdef:0123456789abcdef", "abcdef.0123456789abcde_"} {
		_, _, err := ParseBootstrapToken(bad)
		require.ErrorIs(t, err, ErrBadToken, "%q", bad)
		if bad != "" {
			assert.NotContains(t, err.Error(), bad, "the error never repeats the token")
		}
	}
}

func TestParseAPIServerEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1:6443":          "10.0.0.1:6443",
		"https://10.0.0.1:6443":  "10.0.0.1:6443",
		"https://10.0.0.1:6443/": "10.0.0.1:6443",
		"api.example.com:443":    "api.example.com:443",
		"[fd00::1]:6443":         "[fd00::1]:6443",
		"https://[fd00::1]:6443": "[fd00::1]:6443",
	} {
		got, err := ParseAPIServerEndpoint(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "10.0.0.1", "https://10.0.0.1", "http://10.0.0.1:6443", "10.0.0.1:0",
		"10.0.0.1:65536", "10.0.0.1:https", ":6443", "https://10.0.0.1:6443/api", "https://u@10.0.0.1:6443", "fd00::1:6443"} {
		_, err := ParseAPIServerEndpoint(bad)
		assert.ErrorIs(t, err, ErrBadEndpoint, "%q", bad)
	}
}

func TestParseCACertHashes(t *testing.T) {
	hexHash := strings.Repeat("ab", 32)
	got, err := ParseCACertHashes([]string{"sha256:" + hexHash, "SHA256:" + strings.ToUpper(hexHash)})
	require.NoError(t, err)
	assert.Equal(t, []string{"sha256:" + hexHash, "sha256:" + hexHash}, got, "kubeadm accepts the format in any case")
	for _, bad := range []string{hexHash, "sha256:" + hexHash[:62], "sha256:" + hexHash + "ab", "sha256:" + strings.Repeat("zz", 32), "sha1:" + hexHash[:40], "sha256:"} {
		_, err := ParseCACertHashes([]string{bad})
		assert.ErrorIs(t, err, ErrBadCACertHash, "%q", bad)
	}
	empty, err := ParseCACertHashes(nil)
	require.NoError(t, err)
	assert.Empty(t, empty)
}
