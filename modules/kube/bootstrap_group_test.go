package kube

import (
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
	"github.com/zclconf/go-cty/cty"
	authnv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
	"github.com/wsu-project/wsu/test/kubetest"
)

// sar asks the API server's authorizer what kube-controller-manager's
// csrapproving controller asks (sarapprove.go), or any other question, about
// a user and its groups.
func sar(t *testing.T, c *kubetest.Cluster, user string, groups []string, ra authorizationv1.ResourceAttributes) bool {
	t.Helper()
	r, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &ra},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

var (
	createCSRs = authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Verb: "create"}
	// What csrapproving requires of a client CSR's requester to approve it.
	nodeClient = authorizationv1.ResourceAttributes{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "nodeclient", Verb: "create"}
)

// tokenFor makes a token with k8s_bootstrap_token and returns a client
// authenticating with it.
func tokenFor(t *testing.T, c *kubetest.Cluster, group, description string) (kubernetes.Interface, cty.Value) {
	t.Helper()
	m := BootstrapToken{testClusters}
	cfg := kcfg(t, c, m, map[string]cty.Value{"group": cty.StringVal(group), "description": cty.StringVal(description)})
	pr := moduletest.Plan(t, m, modules.PlanRequest{Config: cfg})
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	ar := moduletest.Apply(t, m, modules.ApplyRequest{Config: cfg, Change: pr.Change})
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.Equal(t, group, ar.Result.GetAttr("group").AsString())
	return asToken(t, c.Config, []byte(ar.Result.GetAttr("token").AsString())), ar.Result
}

// On a kubeadm cluster (kubeadm's RBAC and wsu's installed), a wsu token may
// create CSRs but kube-controller-manager's approver would not approve its
// client CSR: its requester may not create certificatesigningrequests/
// nodeclient. A kubeadm node token may: its CSRs are approved before any
// rule of wsu's looks at them.
func TestBootstrapTokenGroupIsNotAutoApproved(t *testing.T) {
	c := kubetest.Start(t)
	require.NoError(t, c.InitKubeadm(ctx))
	require.NoError(t, c.InstallWSUBootstrappers(ctx))
	require.NoError(t, c.InstallWSUBootstrappers(ctx), "idempotent")

	wsu, res := tokenFor(t, c, kube.WSUBootstrapGroup, "wsu: group test")
	who, err := wsu.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, res.GetAttr("requester").AsString(), who.Status.UserInfo.Username)
	assert.ElementsMatch(t, []string{kube.WSUBootstrapGroup, "system:bootstrappers", "system:authenticated"}, who.Status.UserInfo.Groups,
		"the token is in wsu's group only, not kubeadm's")

	// The RBAC authorizer sees new bindings a moment after they are made.
	groups := []string{kube.WSUBootstrapGroup, "system:bootstrappers", "system:authenticated"}
	getNode := authorizationv1.ResourceAttributes{Resource: "nodes", Verb: "get", Name: "win-group"}
	require.Eventually(t, func() bool {
		return sar(t, c, who.Status.UserInfo.Username, groups, createCSRs) && sar(t, c, who.Status.UserInfo.Username, groups, getNode)
	}, 10*time.Second, 100*time.Millisecond, "wsu's bootstrap RBAC takes effect")

	// The token itself may create a CSR, as the kubelet's bootstrap does.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:win-group", Organization: []string{"system:nodes"}}}, key)
	require.NoError(t, err)
	csr, err := wsu.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "wsu-group-client"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     clientUsages,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "a wsu token creates its client CSR")
	assert.NotContains(t, csr.Spec.Groups, kube.KubeadmNodeTokenGroup)
	_, err = wsu.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
	require.NoError(t, err, "and reads it back, waiting for its certificate")

	// csrapproving's question, asked about the CSR's own requester.
	assert.True(t, sar(t, c, csr.Spec.Username, csr.Spec.Groups, createCSRs))
	assert.False(t, sar(t, c, csr.Spec.Username, csr.Spec.Groups, nodeClient),
		"csrapproving would not approve a wsu token's client CSR: k8s_csr_approve is the gate")
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "selfnodeclient", Verb: "create"},
		{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Subresource: "approval", Verb: "update"},
		{Resource: "nodes", Verb: "list"},
		{Resource: "nodes", Verb: "create"},
		{Resource: "secrets", Namespace: "kube-system", Verb: "get"},
		{Resource: "configmaps", Namespace: "kube-system", Name: "kubeadm-config", Verb: "get"},
	} {
		assert.False(t, sar(t, c, csr.Spec.Username, csr.Spec.Groups, ra), "a wsu token may not %+v", ra)
	}
	assert.True(t, sar(t, c, csr.Spec.Username, csr.Spec.Groups, getNode),
		"it may check whether its Node exists")

	// kubeadm's own group, which a token can still be made in, is
	// auto-approved.
	_, kres := tokenFor(t, c, kube.KubeadmNodeTokenGroup, "wsu: kubeadm group test")
	kuser := kres.GetAttr("requester").AsString()
	kgroups := []string{kube.KubeadmNodeTokenGroup, "system:bootstrappers", "system:authenticated"}
	assert.True(t, sar(t, c, kuser, kgroups, createCSRs))
	assert.True(t, sar(t, c, kuser, kgroups, nodeClient), "kubeadm's token group is what csrapproving approves")
}
