package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/kubetest"
)

// putCluster creates or replaces the OpenShift object named "cluster".
func putCluster(t *testing.T, dc dynamic.Interface, gvr schema.GroupVersionResource, spec map[string]any) {
	t.Helper()
	res := dc.Resource(gvr)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "Network",
		"metadata": map[string]any{"name": "cluster"}, "spec": spec,
	}}
	if cur, err := res.Get(ctx, "cluster", metav1.GetOptions{}); err == nil {
		obj.SetResourceVersion(cur.GetResourceVersion())
		_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
		require.NoError(t, err)
		return
	}
	_, err := res.Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
}

func TestClusterCheck(t *testing.T) {
	// Its own cluster: the OpenShift CRDs must not leak into other tests.
	c := kubetest.Start(t)
	m := ClusterCheck{testClusters}
	cfg := kcfg(t, c, m, nil)

	// Vanilla Kubernetes: not applicable, not an error.
	p := plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	require.Nil(t, p.Change)
	assert.Equal(t, cty.False, p.Result.GetAttr("applicable"))
	assert.Contains(t, p.Result.GetAttr("reason").AsString(), "not OpenShift")
	assert.True(t, p.Result.GetAttr("network_type").IsNull())

	require.NoError(t, c.InstallCRDFiles("testdata/openshift-network-crds.yaml"))
	dc, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)

	// OpenShift without the objects yet: the check cannot be made.
	d := requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Cannot check the cluster network", "kubeconfig")
	assert.Contains(t, d.Detail, "network.config.openshift.io/cluster")

	hybrid := map[string]any{"defaultNetwork": map[string]any{"type": "OVNKubernetes", "ovnKubernetesConfig": map[string]any{
		"hybridOverlayConfig": map[string]any{
			"hybridClusterNetwork":   []any{map[string]any{"cidr": "10.132.0.0/14", "hostPrefix": int64(23)}},
			"hybridOverlayVXLANPort": int64(9898),
		}}}}
	noHybrid := map[string]any{"defaultNetwork": map[string]any{"type": "OVNKubernetes", "ovnKubernetesConfig": map[string]any{}}}

	tests := []struct {
		name        string
		networkType string
		operator    map[string]any
		wantError   string // detail substring of the failure; "" passes
		wantReason  string
	}{
		{name: "OVN with hybrid overlay", networkType: "OVNKubernetes", operator: hybrid,
			wantReason: "OVNKubernetes with hybrid overlay network 10.132.0.0/14 (host prefix 23)"},
		{name: "OVN without hybrid overlay", networkType: "OVNKubernetes", operator: noHybrid,
			wantError: "no spec.defaultNetwork.ovnKubernetesConfig.hybridOverlayConfig.hybridClusterNetwork", wantReason: "OVNKubernetes without a hybrid overlay network"},
		{name: "OpenShift SDN", networkType: "OpenShiftSDN", operator: hybrid,
			wantError: "spec.networkType is OpenShiftSDN", wantReason: "network type is OpenShiftSDN, not OVNKubernetes"},
		{name: "no network type", operator: hybrid,
			wantError: "spec.networkType is unset", wantReason: "network type is unset, not OVNKubernetes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := map[string]any{}
			if tt.networkType != "" {
				spec["networkType"] = tt.networkType
			}
			putCluster(t, dc, networkConfigGVR, spec)
			putCluster(t, dc, networkOperatorGVR, tt.operator)

			p := plan(t, m, cfg)
			require.Nil(t, p.Change, "a check never changes anything")
			assert.Equal(t, cty.True, p.Result.GetAttr("applicable"))
			assert.Equal(t, tt.wantReason, p.Result.GetAttr("reason").AsString())
			if tt.wantError != "" {
				d := requireDiag(t, p.Diagnostics, cfg, "Cluster network cannot take Windows nodes", "kubeconfig")
				assert.Contains(t, d.Detail, tt.wantError)
				return
			}
			require.Empty(t, p.Diagnostics)
			assert.Equal(t, cty.StringVal("OVNKubernetes"), p.Result.GetAttr("network_type"))
			assert.Equal(t, cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
				"cidr": cty.StringVal("10.132.0.0/14"), "host_prefix": cty.NumberIntVal(23),
			})}), p.Result.GetAttr("hybrid_cluster_networks"))
			assert.Equal(t, cty.NumberIntVal(9898), p.Result.GetAttr("hybrid_overlay_vxlan_port"))
			assert.True(t, p.Result.GetAttr("platform").IsNull(), "no Infrastructure API: no platform")
		})
	}

	// The platform, from the Infrastructure object (the test installs its
	// CRD): platformStatus.type, else the older status.platform.
	require.NoError(t, c.InstallCRDs(schemalessCRD(kube.InfrastructureGVR, "Infrastructure")))
	assert.True(t, plan(t, m, cfg).Result.GetAttr("platform").IsNull(), "no Infrastructure object: no platform")
	createObject(t, dc, kube.InfrastructureGVR, "Infrastructure", "cluster", map[string]any{
		"status": map[string]any{"platform": "VSphere"}})
	assert.Equal(t, cty.StringVal("VSphere"), plan(t, m, cfg).Result.GetAttr("platform"), "status.platform")
	infra, err := dc.Resource(kube.InfrastructureGVR).Get(ctx, "cluster", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(infra.Object, "AWS", "status", "platformStatus", "type"))
	_, err = dc.Resource(kube.InfrastructureGVR).Update(ctx, infra, metav1.UpdateOptions{})
	require.NoError(t, err)
	assert.Equal(t, cty.StringVal("AWS"), plan(t, m, cfg).Result.GetAttr("platform"), "platformStatus.type wins")
}
