package kube

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/wsu-project/wsu/kube/tokenjoin"
)

// kubeadm's bootstrap token conventions (k8s.io/cluster-bootstrap).
const (
	BootstrapTokenNamespace    = "kube-system"
	BootstrapTokenSecretPrefix = "bootstrap-token-"
	BootstrapTokenType         = corev1.SecretType("bootstrap.kubernetes.io/token")
	// KubeadmNodeTokenGroup is the group kubeadm's node tokens join. kubeadm
	// binds it to system:node-bootstrapper and also to
	// system:certificates.k8s.io:certificatesigningrequests:nodeclient
	// (kubeadm:node-autoapprove-bootstrap), so kube-controller-manager's
	// csrapproving controller approves any client CSR its tokens make.
	KubeadmNodeTokenGroup = "system:bootstrappers:kubeadm:default-node-token"
	// WSUBootstrapGroup is the group of wsu's own tokens. deploy/rbac's
	// kubeadm-bootstrappers binds it to system:node-bootstrapper and get on
	// nodes, never to nodeclient: no controller approves its CSRs, so
	// k8s_csr_approve's rules are the gate.
	WSUBootstrapGroup = "system:bootstrappers:wsu"
	// DefaultBootstrapGroup is the group a token joins when none is asked for.
	DefaultBootstrapGroup = WSUBootstrapGroup
	// BootstrapGroupPrefix is what the API server requires of a bootstrap
	// token's auth-extra-groups.
	BootstrapGroupPrefix = "system:bootstrappers:"
	// DefaultTokenDescription marks a token as wsu's when none is given.
	DefaultTokenDescription = "wsu: joins Windows nodes"

	// ManagedByLabel marks the secrets wsu created. wsu never reads them
	// back (it may only create Secrets in kube-system): the label tells an
	// administrator whose tokens they are.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	managedByWSU   = "wsu"
)

// BootstrapToken is a kubeadm bootstrap token, "<id>.<secret>".
type BootstrapToken struct {
	ID, Secret  string
	Expiration  time.Time
	Description string
	// Group is the token's extra group; "" means DefaultBootstrapGroup.
	Group string
}

func (t BootstrapToken) group() string {
	if t.Group == "" {
		return DefaultBootstrapGroup
	}
	return t.Group
}

// String is the token as a kubeconfig carries it. It is a credential.
func (t BootstrapToken) String() string { return t.ID + "." + t.Secret }

// SecretName is the token's secret in kube-system.
func (t BootstrapToken) SecretName() string { return BootstrapTokenSecretPrefix + t.ID }

// Username is the identity the API server gives the token's holder, which a
// kubeadm join's client CSR is requested by.
func (t BootstrapToken) Username() string { return BootstrapUserPrefix + t.ID }

// TokenRequest describes the token wanted.
type TokenRequest struct {
	TTL         time.Duration
	Description string // "" means DefaultTokenDescription
	// Group is the token's one extra group (auth-extra-groups); "" means
	// DefaultBootstrapGroup.
	Group string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (r TokenRequest) normalise() (TokenRequest, error) {
	if r.TTL <= 0 {
		return r, errors.New("the token TTL must be positive: a token that never expires is a standing credential")
	}
	if r.Description == "" {
		r.Description = DefaultTokenDescription
	}
	if r.Group == "" {
		r.Group = DefaultBootstrapGroup
	}
	if err := ValidBootstrapGroup(r.Group); err != nil {
		return r, err
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r, nil
}

// ValidBootstrapGroup checks a group as the API server checks a bootstrap
// token's auth-extra-groups (system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]).
func ValidBootstrapGroup(g string) error {
	rest, ok := strings.CutPrefix(g, BootstrapGroupPrefix)
	bad := !ok || rest == "" || len(rest) > 256 || strings.HasSuffix(rest, ":") || strings.HasSuffix(rest, "-")
	for _, c := range rest {
		if !strings.ContainsRune(tokenjoin.TokenAlphabet+":-", c) {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("bootstrap token group %q must be %s followed by lower-case letters, digits, ':' and '-', ending in a letter or digit", g, BootstrapGroupPrefix)
	}
	return nil
}

func randomString(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	// 252 is the largest multiple of 36 below 256: rejecting bytes above it
	// keeps the characters uniform.
	out := make([]byte, 0, n)
	for len(out) < n {
		for _, c := range b {
			if c < 252 && len(out) < n {
				out = append(out, tokenjoin.TokenAlphabet[int(c)%len(tokenjoin.TokenAlphabet)])
			}
		}
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
	}
	return string(out), nil
}

// CreateBootstrapToken creates a new token secret, expiring req.TTL from
// now. Each join gets its own: wsu never lists or reads Secrets in
// kube-system (create is all its Role grants, as anything more there
// reaches cluster-admin), and kube-controller-manager's tokencleaner
// deletes the secret once it expires.
func CreateBootstrapToken(ctx context.Context, kc kubernetes.Interface, req TokenRequest) (*BootstrapToken, error) {
	req, err := req.normalise()
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		id, err1 := randomString(tokenjoin.TokenIDLen)
		secret, err2 := randomString(tokenjoin.TokenSecretLen)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("generating a bootstrap token: %w", err)
		}
		t := &BootstrapToken{ID: id, Secret: secret, Description: req.Description, Group: req.Group,
			Expiration: req.Now().Add(req.TTL).UTC().Truncate(time.Second)}
		_, err := kc.CoreV1().Secrets(BootstrapTokenNamespace).Create(ctx, tokenSecret(t), metav1.CreateOptions{})
		switch {
		case err == nil:
			return t, nil
		case apierrors.IsAlreadyExists(err) && attempt < 3:
			continue // an id collision: 36^6 ids, so another draw settles it
		default:
			return nil, fmt.Errorf("creating bootstrap token secret %s/%s: %w", BootstrapTokenNamespace, t.SecretName(), err)
		}
	}
}

func tokenSecret(t *BootstrapToken) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      t.SecretName(),
			Namespace: BootstrapTokenNamespace,
			Labels:    map[string]string{ManagedByLabel: managedByWSU},
		},
		Type: BootstrapTokenType,
		StringData: map[string]string{
			"token-id":                       t.ID,
			"token-secret":                   t.Secret,
			"expiration":                     t.Expiration.Format(time.RFC3339),
			"usage-bootstrap-authentication": "true",
			"usage-bootstrap-signing":        "true",
			"auth-extra-groups":              t.group(),
			"description":                    t.Description,
		},
	}
}

// ClusterInfo reads the API server URL and CA bundle kubeadm publishes in
// the ConfigMap kube-public/cluster-info for joining nodes.
func ClusterInfo(ctx context.Context, kc kubernetes.Interface) (server string, ca []byte, err error) {
	cm, err := kc.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("reading ConfigMap kube-public/cluster-info (is this a kubeadm cluster?): %w", err)
	}
	raw, ok := cm.Data["kubeconfig"]
	if !ok {
		return "", nil, errors.New("ConfigMap kube-public/cluster-info has no kubeconfig key")
	}
	cfg, err := clientcmd.Load([]byte(raw))
	if err != nil {
		return "", nil, fmt.Errorf("ConfigMap kube-public/cluster-info: kubeconfig: %w", err)
	}
	if len(cfg.Clusters) != 1 {
		return "", nil, fmt.Errorf("ConfigMap kube-public/cluster-info: kubeconfig has %d clusters, want 1", len(cfg.Clusters))
	}
	for _, c := range cfg.Clusters {
		if len(c.CertificateAuthorityData) == 0 {
			return "", nil, errors.New("ConfigMap kube-public/cluster-info: kubeconfig has no certificate-authority-data")
		}
		server, ca = c.Server, c.CertificateAuthorityData
	}
	return server, ca, nil
}

// KubeconfigServer is the server URL and CA bundle of a kubeconfig's
// current context's cluster (or of its only cluster).
func KubeconfigServer(kubeconfig []byte) (server string, ca []byte, err error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return "", nil, err
	}
	c, ok := cfg.Clusters[""]
	if ctx := cfg.Contexts[cfg.CurrentContext]; ctx != nil {
		c, ok = cfg.Clusters[ctx.Cluster]
	} else if len(cfg.Clusters) == 1 {
		for _, only := range cfg.Clusters {
			c, ok = only, true
		}
	}
	if !ok || c == nil {
		return "", nil, errors.New("the kubeconfig names no cluster")
	}
	return c.Server, c.CertificateAuthorityData, nil
}

// BootstrapKubeconfig is the kubeconfig a kubelet bootstraps with: the
// server, the CA that verifies it and a bearer token.
func BootstrapKubeconfig(server string, ca []byte, token string) ([]byte, error) {
	if server == "" || !strings.HasPrefix(server, "https://") {
		return nil, fmt.Errorf("the API server URL %q must be https", server)
	}
	if len(ca) == 0 {
		return nil, errors.New("no CA to verify the API server with")
	}
	if token == "" {
		return nil, errors.New("no bootstrap token")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["kubelet"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kubelet"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "kubelet"}
	cfg.CurrentContext = "kubelet"
	return clientcmd.Write(*cfg)
}
