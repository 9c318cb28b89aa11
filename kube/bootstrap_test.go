package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

func TestReusableToken(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	req := TokenRequest{TTL: 24 * time.Hour, Description: DefaultTokenDescription, Now: func() time.Time { return now }}
	base := func() *corev1.Secret {
		s := tokenSecret(&BootstrapToken{ID: "abc123", Secret: "0123456789abcdef", Description: DefaultTokenDescription,
			Expiration: now.Add(20 * time.Hour)})
		// The API server turns stringData into data.
		s.Data = map[string][]byte{}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
		return s
	}
	tests := []struct {
		name string
		edit func(*corev1.Secret)
		want bool
	}{
		{"fresh", func(*corev1.Secret) {}, true},
		{"just over half left", func(s *corev1.Secret) {
			s.Data["expiration"] = []byte(now.Add(12*time.Hour + time.Second).Format(time.RFC3339))
		}, true},
		{"exactly half left", func(s *corev1.Secret) { s.Data["expiration"] = []byte(now.Add(12 * time.Hour).Format(time.RFC3339)) }, false},
		{"expired", func(s *corev1.Secret) { s.Data["expiration"] = []byte(now.Add(-time.Minute).Format(time.RFC3339)) }, false},
		{"no expiration", func(s *corev1.Secret) { delete(s.Data, "expiration") }, false},
		{"bad expiration", func(s *corev1.Secret) { s.Data["expiration"] = []byte("tomorrow") }, false},
		{"other description", func(s *corev1.Secret) { s.Data["description"] = []byte("someone else's") }, false},
		{"wrong type", func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }, false},
		{"name does not match id", func(s *corev1.Secret) { s.Name = "bootstrap-token-zzzzzz" }, false},
		{"short secret", func(s *corev1.Secret) { s.Data["token-secret"] = []byte("short") }, false},
		{"upper-case id", func(s *corev1.Secret) { s.Data["token-id"] = []byte("ABC123"); s.Name = "bootstrap-token-ABC123" }, false},
		{"authentication usage off", func(s *corev1.Secret) { s.Data["usage-bootstrap-authentication"] = []byte("false") }, false},
		{"signing usage missing", func(s *corev1.Secret) { delete(s.Data, "usage-bootstrap-signing") }, false},
		{"group changed", func(s *corev1.Secret) { s.Data["auth-extra-groups"] = []byte("system:bootstrappers:other") }, false},
		// Another group may carry more rights: kubeadm's is auto-approved.
		{"extra group", func(s *corev1.Secret) {
			s.Data["auth-extra-groups"] = []byte("system:bootstrappers:other," + DefaultBootstrapGroup)
		}, false},
		{"kubeadm's group added", func(s *corev1.Secret) {
			s.Data["auth-extra-groups"] = []byte(DefaultBootstrapGroup + "," + KubeadmNodeTokenGroup)
		}, false},
		{"an earlier wsu's kubeadm-group token", func(s *corev1.Secret) { s.Data["auth-extra-groups"] = []byte(KubeadmNodeTokenGroup) }, false},
		{"being deleted", func(s *corev1.Secret) { s.DeletionTimestamp = &metav1.Time{Time: now} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.edit(s)
			got, ok := reusable(s, req)
			assert.Equal(t, tt.want, ok)
			if ok {
				assert.Equal(t, "abc123.0123456789abcdef", got.String())
				assert.Equal(t, "system:bootstrap:abc123", got.Username())
			}
		})
	}
}

// A token asked for in kubeadm's group is reused only in that group.
func TestReusableTokenGroup(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s := tokenSecret(&BootstrapToken{ID: "abc123", Secret: "0123456789abcdef", Description: DefaultTokenDescription,
		Group: KubeadmNodeTokenGroup, Expiration: now.Add(20 * time.Hour)})
	s.Data = map[string][]byte{}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	assert.Equal(t, KubeadmNodeTokenGroup, s.StringData["auth-extra-groups"])
	kubeadm, err := TokenRequest{TTL: 24 * time.Hour, Group: KubeadmNodeTokenGroup, Now: func() time.Time { return now }}.normalise()
	require.NoError(t, err)
	got, ok := reusable(s, kubeadm)
	require.True(t, ok)
	assert.Equal(t, KubeadmNodeTokenGroup, got.Group)
	def, err := TokenRequest{TTL: 24 * time.Hour, Now: func() time.Time { return now }}.normalise()
	require.NoError(t, err)
	assert.Equal(t, WSUBootstrapGroup, def.Group)
	_, ok = reusable(s, def)
	assert.False(t, ok)
}

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
		s, err := randomString(tokenSecretLen)
		require.NoError(t, err)
		require.True(t, validTokenPart(s, tokenSecretLen), s)
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
