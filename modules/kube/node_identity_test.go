package kube

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
)

const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// identityHost is a simulated Windows host for the token's files.
func identityHost(t *testing.T) *sim.Host {
	t.Helper()
	h, err := sim.New(t.TempDir(), sim.Options{})
	if err != nil && strings.Contains(err.Error(), "Linux only") {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Shutdown(context.Background())) })
	return h
}

// asToken is a client authenticating with the token wsu wrote on the node.
func asToken(t *testing.T, admin *rest.Config, token []byte) kubernetes.Interface {
	t.Helper()
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = strings.TrimSpace(string(token))
	cl, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cl
}

func removeTaintPatch(t *testing.T, cl kubernetes.Interface, node string) error {
	t.Helper()
	p, _ := json.Marshal(map[string]any{"spec": map[string]any{"taints": []corev1.Taint{}}})
	_, err := cl.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, p, metav1.PatchOptions{})
	return err
}

func TestNodeIdentity(t *testing.T) {
	c := cluster(t)
	h := identityHost(t)
	for _, n := range []string{"ident-a", "ident-b"} {
		_, err := c.CreateNode(ctx, n, nil)
		require.NoError(t, err)
		p, _ := json.Marshal(map[string]any{"spec": map[string]any{"taints": []corev1.Taint{{Key: uninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}})
		_, err = c.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, p, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	now := time.Unix(0, 0) // set from the token's own claims below
	m := NodeIdentity{Clusters: testClusters, Now: func() time.Time { return now }}
	attrs := map[string]cty.Value{
		"node_name": cty.StringVal("ident-a"), "namespace": cty.StringVal("kube-system"),
		"api_server": cty.StringVal("https://127.0.0.1:6443"), "token_ttl": cty.NumberIntVal(3600),
	}
	cfg := kcfg(t, c, m, attrs)
	planHost := func() modules.PlanResponse {
		return moduletest.Plan(t, m, modules.PlanRequest{Config: cfg, Host: h})
	}

	pr := planHost()
	require.NotNil(t, pr.Change)
	assert.Equal(t, modules.Create, pr.Change.Action)
	assert.Equal(t, []string{"service_account", "cluster_role", "cluster_role_binding", "kubeconfig", "token"}, fieldNames(pr.Change))
	ar := moduletest.Apply(t, m, modules.ApplyRequest{Config: cfg, Host: h, Change: pr.Change})
	require.False(t, ar.Diagnostics.HasErrors(), ar.Diagnostics.Error())

	token, err := h.ReadFile(ctx, `C:\k\cloud-node-manager\token`, 0)
	require.NoError(t, err)
	for _, f := range pr.Change.Fields {
		assert.NotContains(t, f.New.GoString()+f.Old.GoString(), strings.TrimSpace(string(token)), "the plan never shows the token")
	}
	acl, err := h.FileACL(ctx, `C:\k\cloud-node-manager\token`)
	require.NoError(t, err)
	assert.True(t, acl.Protected, "the token file inherits nothing")
	kc, err := h.ReadFile(ctx, `C:\k\cloud-node-manager\kubeconfig`, 0)
	require.NoError(t, err)
	assert.Contains(t, string(kc), `tokenFile: "C:\\k\\cloud-node-manager\\token"`)
	assert.NotContains(t, string(kc), strings.TrimSpace(string(token)))

	// Least privilege, against the real API server's RBAC.
	own := asToken(t, c.Config, token)
	require.NoError(t, removeTaintPatch(t, own, "ident-a"), "it may change its own Node")
	err = removeTaintPatch(t, own, "ident-b")
	assert.True(t, apierrors.IsForbidden(err), "another Node is refused: %v", err)
	_, err = own.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "no list of every Node: %v", err)
	list, err := own.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=ident-a"})
	require.NoError(t, err, "its own Node, as cloud-node-manager's informer lists it")
	assert.Len(t, list.Items, 1)
	_, err = own.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=ident-b"})
	assert.True(t, apierrors.IsForbidden(err), "not another's: %v", err)
	err = own.CoreV1().Nodes().Delete(ctx, "ident-a", metav1.DeleteOptions{})
	assert.True(t, apierrors.IsForbidden(err), "no delete: %v", err)

	// Renewal follows the token's own lifetime, through the injected clock.
	claims := decodeClaims(token)
	require.NotNil(t, claims)
	life := claims.Expires - claims.IssuedAt
	now = time.Unix(claims.IssuedAt+life*4/10, 0)
	assert.Nil(t, planHost().Change, "40%% used: no change")
	now = time.Unix(claims.IssuedAt+life*6/10, 0)
	pr = planHost()
	require.NotNil(t, pr.Change, "60%% used: renew")
	assert.Equal(t, []string{"token"}, fieldNames(pr.Change))
	ar = moduletest.Apply(t, m, modules.ApplyRequest{Config: cfg, Host: h, Change: pr.Change})
	require.False(t, ar.Diagnostics.HasErrors(), ar.Diagnostics.Error())
	renewed, err := h.ReadFile(ctx, `C:\k\cloud-node-manager\token`, 0)
	require.NoError(t, err)
	assert.NotEqual(t, string(token), string(renewed))
	now = time.Unix(decodeClaims(renewed).IssuedAt, 0)
	assert.Nil(t, planHost().Change, "a re-run changes nothing")

	// Removal takes the identity away.
	attrs["state"] = cty.StringVal("absent")
	cfg = kcfg(t, c, m, attrs)
	pr = planHost()
	require.NotNil(t, pr.Change)
	assert.Equal(t, modules.Delete, pr.Change.Action)
	ar = moduletest.Apply(t, m, modules.ApplyRequest{Config: cfg, Host: h, Change: pr.Change})
	require.False(t, ar.Diagnostics.HasErrors(), ar.Diagnostics.Error())
	_, err = c.Client.CoreV1().ServiceAccounts("kube-system").Get(ctx, "wsu-cloud-node-manager-ident-a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = c.Client.RbacV1().ClusterRoles().Get(ctx, "wsu:cloud-node-manager:ident-a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	_, err = c.Client.RbacV1().ClusterRoleBindings().Get(ctx, "wsu:cloud-node-manager:ident-a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	st, err := h.Stat(ctx, `C:\k\cloud-node-manager\token`)
	require.NoError(t, err)
	assert.False(t, st.Exists)
	assert.Nil(t, planHost().Change, "removed twice changes nothing")
}

func TestNodeIdentityValidate(t *testing.T) {
	m := NodeIdentity{}
	for _, tc := range []struct {
		attr, summary string
		v             cty.Value
	}{
		{"renew_after", "Invalid renew_after", cty.NumberFloatVal(1)},
		{"token_ttl", "Invalid token_ttl", cty.NumberIntVal(60)},
		{"api_server", "Invalid api_server", cty.StringVal("http://x")},
		{"state", "Invalid state", cty.StringVal("gone")},
	} {
		cfg := cfgFor(t, m, map[string]cty.Value{"node_name": cty.StringVal("n"), "namespace": cty.StringVal("kube-system"), "api_server": cty.StringVal("https://x"), tc.attr: tc.v})
		requireDiag(t, modules.Validate(m, cfg), cfg, tc.summary, tc.attr)
	}
}

// TestNodeWaitWithoutTaint: join on Azure waits for cloud-node-manager to
// remove the uninitialized taint, not only for Ready.
func TestNodeWaitWithoutTaint(t *testing.T) {
	c := cluster(t)
	_, err := c.CreateNode(ctx, "wait-taint", nil)
	require.NoError(t, err)
	require.NoError(t, c.SetNodeReady(ctx, "wait-taint"))
	taints := func(ts ...corev1.Taint) {
		p, _ := json.Marshal(map[string]any{"spec": map[string]any{"taints": ts}})
		_, err := c.Client.CoreV1().Nodes().Patch(ctx, "wait-taint", types.MergePatchType, p, metav1.PatchOptions{})
		require.NoError(t, err)
	}
	taints(corev1.Taint{Key: uninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	m := NodeWait{testClusters}
	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("wait-taint"), "without_taint": cty.StringVal(uninitializedTaint), "timeout": cty.NumberIntVal(1), "interval": cty.NumberFloatVal(0.1)})
	pr := plan(t, m, cfg)
	require.NotNil(t, pr.Change, "Ready but still tainted: a wait")
	assert.Equal(t, cty.StringVal("tainted"), pr.Change.Fields[0].Old)
	ar := apply(t, m, cfg, pr.Change)
	requireDiag(t, ar.Diagnostics, cfg, "Timed out waiting for node wait-taint Ready=True without taint "+uninitializedTaint, "name")
	taints(corev1.Taint{Key: "os", Value: "Windows", Effect: corev1.TaintEffectNoSchedule})
	assert.Nil(t, plan(t, m, cfg).Change, "other taints do not matter")
}
