package kube

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/kube"
)

// TestJoinModulesNeedOnlyShippedRBAC runs k8s_ignition (machineconfig),
// k8s_bootstrap_token and k8s_csr_approve as a user holding nothing but
// deploy/rbac/wsu-cluster-role.yaml, so a permission the modules use and
// the file lacks fails here rather than in a cluster.
func TestJoinModulesNeedOnlyShippedRBAC(t *testing.T) {
	c := csrCluster(t)
	grant(t, c, "wsu-join")
	userKC, err := c.User("wsu-join")
	require.NoError(t, err)
	as := func(attrs map[string]cty.Value) map[string]cty.Value {
		attrs["kubeconfig"] = cty.StringVal(userKC)
		return attrs
	}

	t.Run("k8s_ignition machineconfig", func(t *testing.T) {
		require.NoError(t, c.InstallCRDs(
			schemalessCRD(kube.MachineConfigGVR, "MachineConfig"),
			schemalessCRD(kube.ControllerConfigGVR, "ControllerConfig"),
			schemalessCRD(kube.InfrastructureGVR, "Infrastructure"),
		))
		cl, err := kube.NewClient(c.Config, "admin")
		require.NoError(t, err)
		createObject(t, cl.Dynamic, kube.MachineConfigGVR, "MachineConfig", "rendered-worker-1", machineConfig(t, "--v=3"))
		createObject(t, cl.Dynamic, kube.ControllerConfigGVR, "ControllerConfig", "machine-config-controller", map[string]any{
			"spec": map[string]any{"kubeAPIServerServingCAData": base64.StdEncoding.EncodeToString([]byte("ca"))}})
		createObject(t, cl.Dynamic, kube.InfrastructureGVR, "Infrastructure", "cluster", map[string]any{
			"status": map[string]any{"apiServerInternalURI": "https://api-int.example.com:6443"}})
		_, err = c.Client.CoreV1().Secrets(kube.MCONamespace).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: kube.NodeBootstrapperSecret, Namespace: kube.MCONamespace},
			Data:       map[string][]byte{"token": []byte("t"), "ca.crt": []byte("ca")},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, res := converge(t, Ignition{testClusters}, cfgFor(t, Ignition{testClusters}, as(map[string]cty.Value{"source": cty.StringVal("machineconfig")})))
		assert.Equal(t, "3", res.GetAttr("kubelet_verbosity").AsString())
	})

	var requester string
	t.Run("k8s_bootstrap_token", func(t *testing.T) {
		publishClusterInfo(t, c, []byte("ca"))
		m := BootstrapToken{testClusters}
		cfg := cfgFor(t, m, as(map[string]cty.Value{}))
		p := plan(t, m, cfg)
		require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
		require.NotNil(t, p.Change, "a join that needs a token mints one")
		a := apply(t, m, cfg, p.Change)
		require.False(t, a.Diagnostics.HasErrors(), "%v", a.Diagnostics)
		requester = a.Result.GetAttr("requester").AsString()
		// A joined node's re-run: no token, nothing to do.
		converge(t, m, cfgFor(t, m, as(map[string]cty.Value{"mint": cty.False})))
	})

	t.Run("k8s_csr_approve", func(t *testing.T) {
		require.NotEmpty(t, requester)
		const node = "rbac-win"
		k := clientCSR("rbac-client", node, requester)
		k.groups = []string{kube.DefaultBootstrapGroup}
		createCSR(t, c, k)
		kubelet := playKubelet(c, node, "rbac-client", servingCSR("rbac-serving", node, "192.168.50.9"))
		m := CSRApprove{testClusters}
		cfg := cfgFor(t, m, as(map[string]cty.Value{
			"node_name":         cty.StringVal(node),
			"addresses":         strs("192.168.50.9"),
			"hostnames":         strs(node),
			"client_requesters": strs(requester),
			"timeout":           cty.NumberIntVal(20),
			"interval":          cty.NumberFloatVal(0.2),
		}))
		p := plan(t, m, cfg)
		require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
		require.NotNil(t, p.Change)
		assert.False(t, p.Change.Fields[0].New.IsKnown(), "the serving CSR is not asked for yet")
		a := apply(t, m, cfg, p.Change)
		require.NoError(t, <-kubelet)
		require.False(t, a.Diagnostics.HasErrors(), "%v", a.Diagnostics)
		assert.Equal(t, strs("rbac-client", "rbac-serving"), a.Result.GetAttr("approved"))
		again := plan(t, m, cfg)
		require.False(t, again.Diagnostics.HasErrors(), "%v", again.Diagnostics)
		assert.Nil(t, again.Change)
	})
}
