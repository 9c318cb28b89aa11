package kubetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ovnCSR is a request for subject cn/org and its key.
func ovnCSR(t *testing.T, cn string, org ...string) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: org}}, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestOVNIdentityVerdict(t *testing.T) {
	day := int32(86400)
	year := int32(366 * 86400)
	good := func() (*certificatesv1.CertificateSigningRequest, string, []string) {
		return &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
			SignerName: certificatesv1.KubeAPIServerClientSignerName, Username: "system:node:win-1",
			Groups:            []string{"system:nodes", "system:authenticated"},
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature},
			ExpirationSeconds: &day,
		}}, "system:ovn-node:win-1", []string{OVNNodesGroup}
	}
	for name, tc := range map[string]struct {
		change func(*certificatesv1.CertificateSigningRequest, *string, *[]string)
		want   string
	}{
		"valid": {func(*certificatesv1.CertificateSigningRequest, *string, *[]string) {}, ""},
		"renewal by itself": {func(c *certificatesv1.CertificateSigningRequest, _ *string, _ *[]string) {
			c.Spec.Username = "system:ovn-node:win-1"
		}, ""},
		"requester not a node": {func(c *certificatesv1.CertificateSigningRequest, _ *string, _ *[]string) { c.Spec.Username = "admin" }, "not by a node"},
		"bootstrap token": {func(c *certificatesv1.CertificateSigningRequest, _ *string, _ *[]string) {
			c.Spec.Username = "system:bootstrap:abcdef"
		}, "not by a node"},
		"bad node name": {func(c *certificatesv1.CertificateSigningRequest, _ *string, _ *[]string) {
			c.Spec.Username = "system:node:Win_1"
		}, "not a DNS subdomain"},
		"extra group": {func(c *certificatesv1.CertificateSigningRequest, _ *string, _ *[]string) {
			c.Spec.Groups = append(c.Spec.Groups, "system:masters")
		}, "go beyond"},
		"another node's CN": {func(_ *certificatesv1.CertificateSigningRequest, cn *string, _ *[]string) {
			*cn = "system:ovn-node:win-2"
		}, "is not system:ovn-node:win-1"},
		"wrong organisation": {func(_ *certificatesv1.CertificateSigningRequest, _ *string, o *[]string) {
			*o = []string{"system:nodes"}
		}, "organisation"},
		"extra organisation": {func(_ *certificatesv1.CertificateSigningRequest, _ *string, o *[]string) {
			*o = append(*o, "system:masters")
		}, "organisation"},
		"server auth": {func(c *certificatesv1.CertificateSigningRequest, _ *string, _ *[]string) {
			c.Spec.Usages[0] = certificatesv1.UsageServerAuth
		}, "usages"},
		"no expiration": {func(c *certificatesv1.CertificateSigningRequest, _ *string, _ *[]string) {
			c.Spec.ExpirationSeconds = nil
		}, "expirationSeconds"},
		"over a year": {func(c *certificatesv1.CertificateSigningRequest, _ *string, _ *[]string) {
			c.Spec.ExpirationSeconds = &year
		}, "expirationSeconds"},
	} {
		csr, cn, org := good()
		tc.change(csr, &cn, &org)
		got := ovnIdentityVerdict(csr, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: org}})
		if tc.want == "" {
			assert.Empty(t, got, name)
		} else {
			assert.Contains(t, got, tc.want, name)
		}
	}
}

// TestOVNIdentityPart: a node's CSR for its OVN identity is approved and
// signed, and the certificate authenticates as system:ovn-node:<node> with
// the RBAC OVN-Kubernetes grants it; a CSR that breaks a rule is denied;
// other CSRs are left alone.
func TestOVNIdentityPart(t *testing.T) {
	c := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go c.RunParts(ctx, PartsOptions{NoOVNMaster: true})
	_, err := c.CreateNode(ctx, "win-id", nil)
	require.NoError(t, err)
	kc, err := c.User("system:node:win-id", "system:nodes")
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(t, err)
	csrs := clientset(t, cfg).CertificatesV1().CertificateSigningRequests()
	day := int32(86400)
	create := func(name, cn, signer string, org ...string) []byte {
		req, key := ovnCSR(t, cn, org...)
		_, err := csrs.Create(ctx, &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: signer, ExpirationSeconds: &day,
				Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}}, metav1.CreateOptions{})
		require.NoError(t, err, "the Node authorizer lets a node request certificates")
		return key
	}
	key := create("ovn-own", "system:ovn-node:win-id", certificatesv1.KubeAPIServerClientSignerName, OVNNodesGroup)
	create("ovn-other-node", "system:ovn-node:win-other", certificatesv1.KubeAPIServerClientSignerName, OVNNodesGroup)
	create("not-ovn", "someone", certificatesv1.KubeAPIServerClientSignerName)
	status := func(name string) *certificatesv1.CertificateSigningRequest {
		csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return csr
	}
	require.Eventually(t, func() bool { return len(status("ovn-own").Status.Certificate) > 0 }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return len(status("ovn-other-node").Status.Conditions) > 0 }, 20*time.Second, 20*time.Millisecond)
	denied := status("ovn-other-node").Status.Conditions[0]
	assert.Equal(t, certificatesv1.CertificateDenied, denied.Type)
	assert.Contains(t, denied.Message, "is not system:ovn-node:win-id")
	assert.Equal(t, OVNIdentityApprovalReason, status("ovn-own").Status.Conditions[0].Reason)

	ocfg := rest.AnonymousClientConfig(c.Config)
	ocfg.CertData, ocfg.KeyData = status("ovn-own").Status.Certificate, key
	own := clientset(t, ocfg)
	u := whoami(t, own)
	assert.Equal(t, "system:ovn-node:win-id", u.Username)
	assert.Contains(t, u.Groups, OVNNodesGroup)
	_, err = own.CoreV1().Nodes().Patch(ctx, "win-id", types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"k8s.ovn.org/hybrid-overlay-distributed-router-gateway-mac":"00-15-5D-00-00-01"}}}`), metav1.PatchOptions{})
	require.NoError(t, err, "the identity annotates Nodes")
	_, err = own.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "and reads no secrets: %v", err)

	time.Sleep(300 * time.Millisecond) // let the parts settle
	assert.Empty(t, status("not-ovn").Status.Conditions, "a CSR that is not for an OVN identity is left alone")
}
