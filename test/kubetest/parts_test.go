package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/kube"
)

func whoami(t *testing.T, cs kubernetes.Interface) authenticationv1.UserInfo {
	t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.UserInfo
}

func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// nodeCSR is a kubelet-style request and its key.
func nodeCSR(t *testing.T, node string) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
	}, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestKubeadmBootstrap checks what a kubelet's TLS bootstrap relies on: the
// cluster-info a join reads, a bootstrap token that authenticates and may
// request a certificate, and a signed node certificate that authenticates
// as the node and is confined by the Node authorizer and NodeRestriction.
func TestKubeadmBootstrap(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	require.NoError(t, c.InitKubeadm(ctx))
	require.NoError(t, c.InitKubeadm(ctx), "idempotent")

	server, ca, err := kube.ClusterInfo(ctx, c.Client)
	require.NoError(t, err)
	assert.Equal(t, c.Config.Host, server)
	assert.Equal(t, c.Config.CAData, ca)

	anon := clientset(t, rest.AnonymousClientConfig(c.Config))
	_, err = anon.CoreV1().ConfigMaps(ClusterInfoNamespace).Get(ctx, ClusterInfoName, metav1.GetOptions{})
	require.NoError(t, err, "a joining node reads cluster-info before it has credentials")
	_, err = anon.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "nothing else is public: %v", err)

	// The token and kubeconfig exactly as k8s_bootstrap_token makes them
	// in kubeadm's group (wsu's own group needs wsu's RBAC, not kubeadm's).
	tok, err := kube.CreateBootstrapToken(ctx, c.Client, kube.TokenRequest{TTL: time.Hour, Group: kube.KubeadmNodeTokenGroup})
	require.NoError(t, err)
	kc, err := kube.BootstrapKubeconfig(server, ca, tok.String())
	require.NoError(t, err)
	bcfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	require.NoError(t, err)
	boot := clientset(t, bcfg)
	u := whoami(t, boot)
	assert.Equal(t, tok.Username(), u.Username)
	assert.Contains(t, u.Groups, KubeadmNodeTokenGroup)
	assert.Contains(t, u.Groups, "system:bootstrappers")
	_, err = boot.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "a token may not list nodes: %v", err)
	_, err = boot.CoreV1().Nodes().Get(ctx, "absent", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "kubeadm:get-nodes lets it get one: %v", err)

	req, keyPEM := nodeCSR(t, "win-boot")
	csrs := boot.CertificatesV1().CertificateSigningRequests()
	csr, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "node-csr-boot"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request: req, SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "system:node-bootstrapper lets the token request a client certificate")
	assert.Equal(t, tok.Username(), csr.Spec.Username, "the API server records the requester")
	_, err = csrs.Get(ctx, csr.Name, metav1.GetOptions{})
	require.NoError(t, err, "and watch for its certificate")

	approve(t, c, csr.Name)
	certPEM, err := c.SignCSR(ctx, csr.Name)
	require.NoError(t, err)

	ncfg := rest.AnonymousClientConfig(c.Config)
	ncfg.CertData, ncfg.KeyData = certPEM, keyPEM
	node := clientset(t, ncfg)
	u = whoami(t, node)
	assert.Equal(t, "system:node:win-boot", u.Username, "the signer's certificates authenticate")
	assert.Contains(t, u.Groups, "system:nodes")

	_, err = node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-boot",
		Labels: map[string]string{"kubernetes.io/os": "windows", "node.openshift.io/os_id": "Windows"}}}, metav1.CreateOptions{})
	require.NoError(t, err, "a node registers itself")
	_, err = node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-other"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "NodeRestriction: not another node: %v", err)
	_, err = node.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-boot2"}}, metav1.CreateOptions{})
	assert.True(t, apierrors.IsForbidden(err), "nor under another name: %v", err)
	_, err = node.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "the Node authorizer keeps it from secrets: %v", err)
}

func approve(t *testing.T, c *Cluster, name string) {
	t.Helper()
	ctx := context.Background()
	csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "Test", Message: "approved by the test"})
	_, err = c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func deny(t *testing.T, c *Cluster, name string) {
	t.Helper()
	ctx := context.Background()
	csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "Test", Message: "denied by the test"})
	_, err = c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func TestParts(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	csrs := c.Client.CertificatesV1().CertificateSigningRequests()
	create := func(name, signer string) {
		t.Helper()
		req, _ := nodeCSR(t, "win-parts")
		usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
		if signer == certificatesv1.KubeletServingSignerName {
			usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
		}
		_, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: signer, Usages: usages},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	cert := func(name string) []byte {
		csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return csr.Status.Certificate
	}
	// Before the parts run: one approved already, one denied, one for a
	// signer that is not the kubelet's.
	create("early-approved", certificatesv1.KubeAPIServerClientKubeletSignerName)
	approve(t, c, "early-approved")
	create("denied", certificatesv1.KubeAPIServerClientKubeletSignerName)
	deny(t, c, "denied")
	create("other-signer", "example.com/other")
	approve(t, c, "other-signer")
	create("pending", certificatesv1.KubeAPIServerClientKubeletSignerName)
	// Nodes: two Windows ones, one of them already holding a subnet; a
	// Linux one; one named in the options.
	_, err := c.CreateNode(ctx, "win-a", map[string]string{"kubernetes.io/os": "windows"})
	require.NoError(t, err)
	_, err = c.CreateNode(ctx, "win-pre", map[string]string{"kubernetes.io/os": "windows"})
	require.NoError(t, err)
	require.NoError(t, c.AnnotateNode(ctx, "win-pre", HybridOverlaySubnetAnnotation, "10.132.0.0/24"))
	_, err = c.CreateNode(ctx, "linux-1", map[string]string{"kubernetes.io/os": "linux"})
	require.NoError(t, err)
	_, err = c.CreateNode(ctx, "named", nil)
	require.NoError(t, err)

	require.ErrorContains(t, c.RunParts(ctx, PartsOptions{ClusterCIDR: "10.132.0.0/25"}), "/24 or larger")

	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- c.RunParts(pctx, PartsOptions{Nodes: []string{"named"}}) }()

	require.Eventually(t, func() bool { return len(cert("early-approved")) > 0 }, 10*time.Second, 20*time.Millisecond)
	t.Logf("the signer issued an approved CSR %s after starting", time.Since(started).Round(time.Millisecond))
	require.ErrorContains(t, c.RunParts(ctx, PartsOptions{}), "already running")

	// A CSR approved while the parts run, for either kubelet signer.
	create("serving", certificatesv1.KubeletServingSignerName)
	approve(t, c, "serving")
	require.Eventually(t, func() bool { return len(cert("serving")) > 0 }, 10*time.Second, 20*time.Millisecond)
	assert.Empty(t, cert("pending"), "a pending CSR is not signed")
	approve(t, c, "pending")
	require.Eventually(t, func() bool { return len(cert("pending")) > 0 }, 10*time.Second, 20*time.Millisecond)

	// A Windows node registering now gets a subnet too.
	_, err = c.CreateNode(ctx, "win-b", map[string]string{"kubernetes.io/os": "windows"})
	require.NoError(t, err)
	subnets := map[string]string{}
	require.Eventually(t, func() bool {
		for _, n := range []string{"win-a", "win-b", "named"} {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			require.NoError(t, err)
			subnets[n] = node.Annotations[HybridOverlaySubnetAnnotation]
			if subnets[n] == "" {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
	cluster := netip.MustParsePrefix(DefaultHybridClusterCIDR)
	seen := map[string]bool{"10.132.0.0/24": true} // win-pre's
	for n, s := range subnets {
		p, err := netip.ParsePrefix(s)
		require.NoError(t, err, n)
		assert.Equal(t, 24, p.Bits(), n)
		assert.True(t, cluster.Contains(p.Addr()), "%s: %s is in %s", n, s, cluster)
		assert.False(t, seen[s], "%s: %s is given once", n, s)
		seen[s] = true
	}

	// Let the parts settle, then check what they did not do.
	time.Sleep(300 * time.Millisecond)
	assert.Empty(t, cert("denied"), "a denied CSR is never signed")
	assert.Empty(t, cert("other-signer"), "another signer's CSR is not the kubelet signer's to issue")
	for n, want := range map[string]string{"win-pre": "10.132.0.0/24", "linux-1": ""} {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, node.Annotations[HybridOverlaySubnetAnnotation], n)
	}

	var signed, annotated []string
	for _, e := range c.PartEvents() {
		switch e.Part {
		case PartCSRSigner:
			signed = append(signed, e.Object)
		case PartOVNMaster:
			annotated = append(annotated, e.Object+"="+e.Detail)
		}
	}
	slices.Sort(signed)
	assert.Equal(t, []string{"early-approved", "pending", "serving"}, signed, "each approved kubelet CSR signed once")
	assert.Len(t, annotated, 3, "each node annotated once: %v", annotated)

	cancel()
	stopAt := time.Now()
	select {
	case err := <-done:
		require.NoError(t, err)
		t.Logf("parts stopped in %s", time.Since(stopAt).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("RunParts did not return after its context ended")
	}
}
