package kube

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/wsu-project/wsu/test/kubetest"
)

// TestClusterNetwork adds each source to one cluster in turn, from the
// weakest to the strongest, and checks that each one takes over.
func TestClusterNetwork(t *testing.T) {
	// Its own cluster: the OpenShift CRDs must not leak into other tests.
	c := kubetest.Start(t)
	m := ClusterNetwork{testClusters}
	cfg := kcfg(t, c, m, nil)

	// Any 1.33+ API server: the default ServiceCIDR, DNS at its .10.
	sc, err := c.Client.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	require.NoError(t, err, "the API server publishes its service network")
	primary := sc.Spec.CIDRs[0]
	want10, err := tenthAddress([]string{primary})
	require.NoError(t, err)
	p := plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	require.Nil(t, p.Change, "a read never changes anything")
	assert.Equal(t, strs(sc.Spec.CIDRs...), p.Result.GetAttr("service_cidrs"))
	assert.Equal(t, strs(want10), p.Result.GetAttr("cluster_dns"))
	assert.Contains(t, p.Result.GetAttr("source").AsString(), `the ServiceCIDR "kubernetes"`)

	// A DNS Service elsewhere than .10 (kube-dns, as CoreDNS is named).
	dnsIP := mustNth(t, primary, 53)
	_, err = c.Client.CoreV1().Services("kube-system").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: "kube-system"},
		Spec:       corev1.ServiceSpec{ClusterIP: dnsIP, Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	p = plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	assert.Equal(t, strs(dnsIP), p.Result.GetAttr("cluster_dns"))

	// kubeadm's record of the cluster wins over the ServiceCIDR object.
	_, err = c.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"},
		Data: map[string]string{"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n" +
			"networking:\n  serviceSubnet: 10.96.0.0/12,fd00:10:96::/112\n  podSubnet: 10.244.0.0/16\n"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	p = plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	assert.Equal(t, strs("10.96.0.0/12", "fd00:10:96::/112"), p.Result.GetAttr("service_cidrs"))
	assert.Equal(t, strs(dnsIP), p.Result.GetAttr("cluster_dns"), "the DNS Service still names the address")
	assert.Contains(t, p.Result.GetAttr("source").AsString(), "kubeadm-config")

	// OpenShift: its network config, DNS at .10 as WMCO computes it.
	require.NoError(t, c.InstallCRDFiles("testdata/openshift-network-crds.yaml"))
	dc, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	putCluster(t, dc, networkConfigGVR, map[string]any{"serviceNetwork": []any{"172.31.0.0/16"}})
	p = plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	assert.Equal(t, strs("172.31.0.0/16"), p.Result.GetAttr("service_cidrs"))
	assert.Equal(t, strs("172.31.0.10"), p.Result.GetAttr("cluster_dns"))
	assert.Contains(t, p.Result.GetAttr("source").AsString(), "network.config.openshift.io/cluster spec.serviceNetwork")
}

func mustNth(t *testing.T, cidr string, n int) string {
	t.Helper()
	a, err := tenthAddress([]string{cidr})
	require.NoError(t, err)
	ip, err := netipAddrPlus(a, n-10)
	require.NoError(t, err)
	return ip
}

func TestTenthAddress(t *testing.T) {
	for _, tt := range []struct{ cidr, want, err string }{
		{cidr: "172.30.0.0/16", want: "172.30.0.10"},
		{cidr: "10.96.0.0/12", want: "10.96.0.10"},
		{cidr: "10.96.5.7/12", want: "10.96.0.10"},
		{cidr: "fd00:10:96::/112", want: "fd00:10:96::a"},
		{cidr: "10.0.0.0/29", err: "too small"},
		{cidr: "nonsense", err: `service network "nonsense"`},
	} {
		got, err := tenthAddress([]string{tt.cidr})
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.cidr)
			continue
		}
		require.NoError(t, err, tt.cidr)
		assert.Equal(t, tt.want, got, tt.cidr)
	}
}

// netipAddrPlus is addr moved by n addresses (n may be negative).
func netipAddrPlus(addr string, n int) (string, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "", err
	}
	for ; n > 0; n-- {
		a = a.Next()
	}
	for ; n < 0; n++ {
		a = a.Prev()
	}
	return a.String(), nil
}
