package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
	"github.com/wsu-project/wsu/test/kubetest"
)

// kubeProxyRBACFile is what join needs on kubeadm for kube-proxy's own
// identity (k8s_node_identity with cluster_role = system:node-proxier).
const kubeProxyRBACFile = "../../deploy/rbac/kubeadm-kube-proxy.yaml"

// TestKubeProxyIdentity: on kubeadm the kubelet's identity may not list
// EndpointSlices, so kube-proxy gets its own, bound to system:node-proxier
// and nothing more; wsu makes it holding only its shipped roles, and may
// bind no other ClusterRole.
func TestKubeProxyIdentity(t *testing.T) {
	c := kubetest.Start(t)
	const user = "wsu-kube-proxy"
	grantFile(t, c, user, rbacFile)
	grantFile(t, c, user, kubeProxyRBACFile)
	userKC, err := c.User(user)
	require.NoError(t, err)
	h := identityHost(t)
	for _, n := range []string{"win-1", "win-2"} {
		_, err := c.CreateNode(ctx, n, nil)
		require.NoError(t, err)
	}

	// The kubelet's identity, which kube-proxy used: the Node authorizer
	// gives it Services but not EndpointSlices.
	kubelet := func(ra authorizationv1.ResourceAttributes) bool {
		return sar(t, c, "system:node:win-1", []string{"system:nodes", "system:authenticated"}, ra)
	}
	endpointSlices := func(verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: verb}
	}
	services := func(verb string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Resource: "services", Verb: verb}
	}
	assert.False(t, kubelet(endpointSlices("list")), "system:node:win-1 may not list EndpointSlices")
	assert.False(t, kubelet(endpointSlices("watch")), "nor watch them")

	now := time.Unix(0, 0) // set from the token's own claims below
	m := NodeIdentity{Clusters: testClusters, Now: func() time.Time { return now }}
	attrs := map[string]cty.Value{
		"kubeconfig": cty.StringVal(userKC), "node_name": cty.StringVal("win-1"), "namespace": cty.StringVal("kube-system"),
		"name": cty.StringVal("kube-proxy"), "cluster_role": cty.StringVal("system:node-proxier"),
		"api_server": cty.StringVal("https://127.0.0.1:6443"), "token_ttl": cty.NumberIntVal(3600),
	}
	planHost := func() modules.PlanResponse {
		return moduletest.Plan(t, m, modules.PlanRequest{Config: cfgFor(t, m, attrs), Host: h})
	}
	pr := planHost()
	require.False(t, pr.Diagnostics.HasErrors(), pr.Diagnostics.Error())
	require.NotNil(t, pr.Change)
	assert.Equal(t, modules.Create, pr.Change.Action)
	assert.Equal(t, []string{"service_account", "cluster_role_binding", "kubeconfig", "token"}, fieldNames(pr.Change), "no ClusterRole of its own")
	ar := moduletest.Apply(t, m, modules.ApplyRequest{Config: cfgFor(t, m, attrs), Host: h, Change: pr.Change})
	require.False(t, ar.Diagnostics.HasErrors(), ar.Diagnostics.Error())
	assert.Equal(t, `C:\k\kube-proxy\kubeconfig`, ar.Result.GetAttr("kubeconfig_path").AsString())
	assert.Equal(t, "kube-system/wsu-kube-proxy-win-1", ar.Result.GetAttr("service_account").AsString())

	crb, err := c.Client.RbacV1().ClusterRoleBindings().Get(ctx, "wsu:kube-proxy:win-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:node-proxier", crb.RoleRef.Name)
	require.Len(t, crb.Subjects, 1)
	assert.Equal(t, "wsu-kube-proxy-win-1", crb.Subjects[0].Name)
	_, err = c.Client.RbacV1().ClusterRoles().Get(ctx, "wsu:kube-proxy:win-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no per-node ClusterRole: %v", err)

	token, err := h.ReadFile(ctx, `C:\k\kube-proxy\token`, 0)
	require.NoError(t, err)
	for _, f := range pr.Change.Fields {
		assert.NotContains(t, f.New.GoString()+f.Old.GoString(), strings.TrimSpace(string(token)), "the plan never shows the token")
	}
	kc, err := h.ReadFile(ctx, `C:\k\kube-proxy\kubeconfig`, 0)
	require.NoError(t, err)
	assert.Contains(t, string(kc), `tokenFile: "C:\\k\\kube-proxy\\token"`)
	claims := decodeClaims(token)
	require.NotNil(t, claims)
	assert.Equal(t, "win-1", claims.Kube.Node.Name, "bound to its Node")

	// What kube-proxy does, as the token on the node.
	own := asToken(t, c.Config, token)
	_, err = own.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "lists EndpointSlices")
	w, err := own.DiscoveryV1().EndpointSlices("").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err, "watches EndpointSlices")
	w.Stop()
	_, err = own.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "lists Services")
	w, err = own.CoreV1().Services("").Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err, "watches Services")
	w.Stop()
	_, err = own.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "no Secrets: %v", err)

	// And nothing beyond system:node-proxier, by the authorizer.
	self := func(ra authorizationv1.ResourceAttributes) bool {
		r, err := own.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
	for _, verb := range []string{"list", "watch"} {
		assert.True(t, self(endpointSlices(verb)), "%s endpointslices", verb)
		assert.True(t, self(services(verb)), "%s services", verb)
	}
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Resource: "secrets", Namespace: "kube-system", Verb: "get"},
		{Resource: "secrets", Verb: "list"},
		{Resource: "configmaps", Namespace: "kube-system", Verb: "get"},
		{Resource: "pods", Namespace: "default", Verb: "create"},
		{Resource: "nodes", Name: "win-1", Verb: "patch"},
		{Resource: "nodes", Name: "win-1", Subresource: "status", Verb: "patch"},
		{Resource: "services", Namespace: "default", Verb: "create"},
		{Group: "discovery.k8s.io", Resource: "endpointslices", Namespace: "default", Verb: "delete"},
		{Resource: "serviceaccounts", Subresource: "token", Namespace: "kube-system", Name: "wsu-kube-proxy-win-1", Verb: "create"},
		{Group: "certificates.k8s.io", Resource: "certificatesigningrequests", Verb: "create"},
	} {
		assert.False(t, self(ra), "kube-proxy's identity may not %+v", ra)
	}

	// A re-run changes nothing until the token is half spent.
	now = time.Unix(claims.IssuedAt+(claims.Expires-claims.IssuedAt)*4/10, 0)
	assert.Nil(t, planHost().Change)
	now = time.Unix(claims.IssuedAt+(claims.Expires-claims.IssuedAt)*6/10, 0)
	pr = planHost()
	require.NotNil(t, pr.Change)
	assert.Equal(t, []string{"token"}, fieldNames(pr.Change))

	// wsu's roles let it bind system:node-proxier and no other ClusterRole.
	other := map[string]cty.Value{}
	for k, v := range attrs {
		other[k] = v
	}
	other["node_name"], other["cluster_role"] = cty.StringVal("win-2"), cty.StringVal("cluster-admin")
	ocfg := cfgFor(t, m, other)
	opr := moduletest.Plan(t, m, modules.PlanRequest{Config: ocfg, Host: h})
	require.NotNil(t, opr.Change)
	oar := m.Apply(ctx, modules.ApplyRequest{Config: ocfg, Host: h, Change: opr.Change})
	require.True(t, oar.Diagnostics.HasErrors(), "binding cluster-admin must be refused")
	assert.Contains(t, oar.Diagnostics.Error(), "forbidden")
	_, err = c.Client.RbacV1().ClusterRoleBindings().Get(ctx, "wsu:kube-proxy:win-2", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	// Removal takes the identity away and leaves system:node-proxier.
	attrs["state"] = cty.StringVal("absent")
	pr = planHost()
	require.NotNil(t, pr.Change)
	assert.Equal(t, modules.Delete, pr.Change.Action)
	assert.Equal(t, []string{"files", "cluster_role_binding", "service_account"}, fieldNames(pr.Change))
	ar = moduletest.Apply(t, m, modules.ApplyRequest{Config: cfgFor(t, m, attrs), Host: h, Change: pr.Change})
	require.False(t, ar.Diagnostics.HasErrors(), ar.Diagnostics.Error())
	_, err = c.Client.RbacV1().ClusterRoleBindings().Get(ctx, "wsu:kube-proxy:win-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = c.Client.CoreV1().ServiceAccounts("kube-system").Get(ctx, "wsu-kube-proxy-win-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = c.Client.RbacV1().ClusterRoles().Get(ctx, "system:node-proxier", metav1.GetOptions{})
	assert.NoError(t, err, "the bound role is not wsu's to delete")
	assert.Nil(t, planHost().Change, "removed twice changes nothing")
}

func TestNodeIdentityValidateClusterRole(t *testing.T) {
	m := NodeIdentity{Clusters: testClusters}
	base := func(role cty.Value) map[string]cty.Value {
		return map[string]cty.Value{"node_name": cty.StringVal("win-1"), "namespace": cty.StringVal("kube-system"),
			"api_server": cty.StringVal("https://10.0.0.1:6443"), "cluster_role": role}
	}
	for _, tt := range []struct {
		role cty.Value
		want []string
	}{
		{cty.StringVal("system:node-proxier"), nil},
		{cty.NullVal(cty.String), nil},
		{cty.UnknownVal(cty.String), nil},
		{cty.StringVal(""), []string{"Invalid cluster_role"}},
		{cty.StringVal("a/b"), []string{"Invalid cluster_role"}},
	} {
		assert.Equal(t, tt.want, diagSummaries(m.Validate(modules.ValidateRequest{Config: cfgFor(t, m, base(tt.role))})), tt.role.GoString())
	}
}
