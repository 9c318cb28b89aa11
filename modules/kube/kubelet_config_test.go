package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/test/kubetest"
)

// putKubeadmConfigMaps creates kubeadm's two ConfigMaps as kubeadm init
// uploads them.
func putKubeadmConfigMaps(t *testing.T, c *kubetest.Cluster, kubelet, clusterConfig string) {
	t.Helper()
	for name, data := range map[string]map[string]string{
		"kubelet-config": {"kubelet": kubelet},
		"kubeadm-config": {"ClusterConfiguration": clusterConfig},
	} {
		_, err := c.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
			Data:       data,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

const kubeadmClusterConfig = `apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
networking:
  dnsDomain: example.internal
  podSubnet: 10.244.0.0/16,fd00:10:244::/56
  serviceSubnet: 10.96.0.0/12
`

func TestKubeletConfig(t *testing.T) {
	// Its own cluster: kubeadm's ConfigMaps must not leak into other tests
	// (k8s_cluster_network reads kubeadm-config).
	c := kubetest.Start(t)
	m := KubeletConfig{testClusters}

	// Without kubeadm's ConfigMaps: an error at the task, naming the phase.
	cfg := kcfg(t, c, m, nil)
	p := plan(t, m, cfg)
	d := requireDiag(t, p.Diagnostics, cfg, "Missing kube-system/kubelet-config", "kubeconfig")
	assert.Contains(t, d.Detail, "kubeadm init phase upload-config kubelet")
	assert.False(t, p.Result.GetAttr("config").IsKnown())

	putKubeadmConfigMaps(t, c, kubeadmKubelet, kubeadmClusterConfig)
	_, err := c.CreateNode(ctx, "win-kc", nil)
	require.NoError(t, err)
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "win-kc", metav1.GetOptions{})
	require.NoError(t, err)
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.3.0/24", []string{"10.244.3.0/24", "fd00:10:244:3::/64"}
	_, err = c.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)

	cfg = kcfg(t, c, m, map[string]cty.Value{"node_name": cty.StringVal("win-kc")})
	p = plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	require.Nil(t, p.Change, "a read never changes anything")
	res := p.Result
	got := decode(t, res.GetAttr("config").AsString())
	assert.Equal(t, []any{"10.96.0.10"}, got["clusterDNS"], "the ConfigMap's clusterDNS")
	assert.Equal(t, "example.internal", got["clusterDomain"], "kubeadm-config's dnsDomain")
	assertWindowsKubelet(t, got)
	assert.Equal(t, true, got["serverTLSBootstrap"], "by default join approves the serving CSR")
	assert.Equal(t, strs("10.96.0.10"), res.GetAttr("cluster_dns"))
	assert.Equal(t, cty.StringVal("example.internal"), res.GetAttr("cluster_domain"))
	assert.Equal(t, strs("10.96.0.0/12"), res.GetAttr("service_cidrs"))
	assert.Equal(t, strs("10.244.0.0/16", "fd00:10:244::/56"), res.GetAttr("pod_cidrs"))
	assert.Equal(t, strs("10.244.3.0/24", "fd00:10:244:3::/64"), res.GetAttr("node_pod_cidrs"))
	assert.Contains(t, res.GetAttr("source").AsString(), "kube-system/kubelet-config")

	// Apply reads the same: plan and apply agree.
	a := apply(t, m, cfg, p.Change)
	require.Empty(t, a.Diagnostics)
	assert.True(t, a.Result.RawEquals(p.Result), "apply's result is plan's")

	// A node-only join: the kubelet signs its own serving certificate,
	// kubeadm's default, where nobody approves serving CSRs.
	cfg = kcfg(t, c, m, map[string]cty.Value{"node_name": cty.StringVal("win-kc"), "server_tls_bootstrap": cty.False})
	p = plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	assert.Equal(t, false, decode(t, p.Result.GetAttr("config").AsString())["serverTLSBootstrap"])

	// A Node not registered yet: no pod networks, no error.
	p = plan(t, m, kcfg(t, c, m, map[string]cty.Value{
		"node_name": cty.StringVal("win-later"), "cluster_dns": strs("10.96.0.53"),
	}))
	require.Empty(t, p.Diagnostics)
	assert.Equal(t, strs(), p.Result.GetAttr("node_pod_cidrs"))
	assert.Equal(t, strs("10.96.0.53"), p.Result.GetAttr("cluster_dns"), "cluster_dns replaces the cluster's")
	assert.Contains(t, p.Result.GetAttr("source").AsString(), "Node win-later not registered yet")
}

// kubeadm-config missing while kubelet-config exists: the error names it.
func TestKubeletConfigMissingClusterConfiguration(t *testing.T) {
	c := kubetest.Start(t)
	m := KubeletConfig{testClusters}
	_, err := c.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-config", Namespace: "kube-system"},
		Data:       map[string]string{"kubelet": kubeadmKubelet},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := kcfg(t, c, m, nil)
	d := requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Missing kube-system/kubeadm-config", "kubeconfig")
	assert.Contains(t, d.Detail, "kubeadm init phase upload-config kubeadm")
}

func TestKubeletConfigValidate(t *testing.T) {
	m := KubeletConfig{}
	for _, tt := range []struct {
		attr string
		val  cty.Value
		err  string
	}{
		{attr: "node_name", val: cty.StringVal("Bad_Name"), err: "Invalid node name"},
		{attr: "cluster_dns", val: strs("10.96.0.10", "dns.example"), err: "Invalid cluster_dns"},
		{attr: "client_ca_file", val: cty.StringVal(""), err: "Invalid client_ca_file"},
	} {
		cfg := cfgFor(t, m, map[string]cty.Value{tt.attr: tt.val})
		requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, tt.err, tt.attr)
	}
}
