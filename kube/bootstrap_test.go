package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/kube/tokenjoin"
)

func TestValidBootstrapGroup(t *testing.T) {
	for _, g := range []string{WSUBootstrapGroup, KubeadmNodeTokenGroup, "system:bootstrappers:a", "system:bootstrappers:site-1:win"} {
		assert.NoError(t, ValidBootstrapGroup(g), g)
	}
	for _, g := range []string{"", "system:bootstrappers:", "system:nodes", "system:bootstrappers:Wsu", "system:bootstrappers:wsu:", "system:bootstrappers:wsu-", "system:bootstrappers:w s"} {
		assert.Error(t, ValidBootstrapGroup(g), g)
	}
}

func TestTokenSecretShape(t *testing.T) {
	exp := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	s := tokenSecret(&BootstrapToken{ID: "abc123", Secret: "0123456789abcdef", Description: "d", Expiration: exp})
	assert.Equal(t, "bootstrap-token-abc123", s.Name)
	assert.Equal(t, "kube-system", s.Namespace)
	assert.Equal(t, corev1.SecretType("bootstrap.kubernetes.io/token"), s.Type)
	assert.Equal(t, map[string]string{
		"token-id": "abc123", "token-secret": "0123456789abcdef", "expiration": "2026-11-23T12:00:00Z",
		"usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
		"auth-extra-groups": "system:bootstrappers:wsu", "description": "d",
	}, s.StringData)
	assert.Equal(t, "wsu", s.Labels[ManagedByLabel])
}

func TestRandomString(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		s, err := randomString(tokenjoin.TokenSecretLen)
		require.NoError(t, err)
		require.True(t, tokenjoin.ValidTokenPart(s, tokenjoin.TokenSecretLen), s)
		seen[s] = true
	}
	assert.Len(t, seen, 200)
}

func TestTokenRequestRefusesNoTTL(t *testing.T) {
	_, err := TokenRequest{}.normalise()
	assert.ErrorContains(t, err, "must be positive")
}

func TestBootstrapKubeconfig(t *testing.T) {
	kc, err := BootstrapKubeconfig("https://api.example.com:6443", []byte("CA PEM"), "abc123.0123456789abcdef")
	require.NoError(t, err)
	cfg, err := clientcmd.Load(kc)
	require.NoError(t, err)
	ctx := cfg.Contexts[cfg.CurrentContext]
	require.NotNil(t, ctx)
	assert.Equal(t, "https://api.example.com:6443", cfg.Clusters[ctx.Cluster].Server)
	assert.Equal(t, []byte("CA PEM"), cfg.Clusters[ctx.Cluster].CertificateAuthorityData)
	assert.Equal(t, "abc123.0123456789abcdef", cfg.AuthInfos[ctx.AuthInfo].Token)

	for _, tt := range []struct{ server, ca, token, err string }{
		{"http://api", "ca", "t", "must be https"},
		{"", "ca", "t", "must be https"},
		{"https://api", "", "t", "no CA"},
		{"https://api", "ca", "", "no bootstrap token"},
	} {
		_, err := BootstrapKubeconfig(tt.server, []byte(tt.ca), tt.token)
		assert.ErrorContains(t, err, tt.err)
	}
}

// KubeconfigServer reads the current context's cluster, else the only one.
func TestKubeconfigServer(t *testing.T) {
	kc, err := BootstrapKubeconfig("https://api-int.example:6443", []byte("CA"), "id.secret")
	require.NoError(t, err)
	server, ca, err := KubeconfigServer(kc)
	require.NoError(t, err)
	assert.Equal(t, "https://api-int.example:6443", server)
	assert.Equal(t, []byte("CA"), ca)

	only := []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://one:6443\n")
	server, ca, err = KubeconfigServer(only)
	require.NoError(t, err)
	assert.Equal(t, "https://one:6443", server, "no current context: the only cluster")
	assert.Empty(t, ca)

	two := []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster:\n    server: https://a\n- name: b\n  cluster:\n    server: https://b\n")
	_, _, err = KubeconfigServer(two)
	assert.ErrorContains(t, err, "names no cluster", "two clusters and no context: which one is unknown")
	_, _, err = KubeconfigServer([]byte("{not yaml"))
	assert.Error(t, err)
}
