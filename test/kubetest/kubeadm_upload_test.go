package kubetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// can asks the API server's authorizers (RBAC and Node) whether user in
// groups may do verb on the object.
func can(t *testing.T, c *Cluster, user string, groups []string, verb string, res authorizationv1.ResourceAttributes) bool {
	t.Helper()
	res.Verb = verb
	r, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups, ResourceAttributes: &res},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// TestKubeadmUploads checks what InitKubeadm uploads for a join and who
// may read it, as kubeadm's RBAC has it.
func TestKubeadmUploads(t *testing.T) {
	c := Start(t)
	ctx := context.Background()
	require.NoError(t, c.InitKubeadm(ctx))
	require.NoError(t, c.InitKubeadm(ctx), "idempotent")
	cms := c.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem)

	kc, err := cms.Get(ctx, KubeletConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	var kubelet map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(kc.Data["kubelet"]), &kubelet))
	assert.Equal(t, "KubeletConfiguration", kubelet["kind"])
	assert.Equal(t, []any{ClusterDNSIP}, kubelet["clusterDNS"])
	assert.Equal(t, ClusterDomain, kubelet["clusterDomain"])
	assert.Equal(t, "/etc/kubernetes/manifests", kubelet["staticPodPath"])
	assert.Equal(t, "systemd", kubelet["cgroupDriver"])
	assert.Equal(t, true, kubelet["rotateCertificates"])
	assert.Equal(t, "Webhook", kubelet["authorization"].(map[string]any)["mode"])

	kadm, err := cms.Get(ctx, KubeadmConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	var cluster struct {
		APIVersion, Kind, KubernetesVersion, ControlPlaneEndpoint string
		Networking                                                struct{ ServiceSubnet, PodSubnet, DNSDomain string }
	}
	require.NoError(t, yaml.Unmarshal([]byte(kadm.Data["ClusterConfiguration"]), &cluster))
	assert.Equal(t, "kubeadm.k8s.io/v1beta4", cluster.APIVersion)
	assert.Equal(t, ServiceSubnet, cluster.Networking.ServiceSubnet)
	assert.Equal(t, KubeadmPodSubnet, cluster.Networking.PodSubnet)
	assert.Equal(t, ClusterDomain, cluster.Networking.DNSDomain)
	assert.Regexp(t, `^v1\.\d+\.\d+`, cluster.KubernetesVersion)
	assert.Contains(t, c.Config.Host, cluster.ControlPlaneEndpoint)

	kp, err := cms.Get(ctx, KubeProxyConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Contains(t, kp.Data["config.conf"], "clusterCIDR: "+KubeadmPodSubnet)
	pcfg, err := clientcmd.Load([]byte(kp.Data["kubeconfig.conf"]))
	require.NoError(t, err)
	assert.Equal(t, c.Config.Host, pcfg.Clusters["default"].Server)
	assert.Equal(t, "/var/run/secrets/kubernetes.io/serviceaccount/token", pcfg.AuthInfos["default"].TokenFile)

	dns, err := c.Client.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, KubeDNSService, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, ClusterDNSIP, dns.Spec.ClusterIP)

	token := []string{KubeadmNodeTokenGroup, "system:bootstrappers", "system:authenticated"}
	node := []string{"system:nodes", "system:authenticated"}
	cm := func(name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Resource: "configmaps", Name: name}
	}
	for _, name := range []string{KubeletConfigMap, KubeadmConfigMap, KubeProxyConfigMap} {
		assert.True(t, can(t, c, "system:bootstrap:abcdef", token, "get", cm(name)), "a join token reads %s", name)
	}
	assert.True(t, can(t, c, "system:node:win-1", node, "get", cm(KubeletConfigMap)))
	assert.True(t, can(t, c, "system:node:win-1", node, "get", cm(KubeadmConfigMap)))
	assert.False(t, can(t, c, "system:bootstrap:abcdef", token, "get", cm("coredns")), "nothing else")
	assert.False(t, can(t, c, "system:bootstrap:abcdef", token, "list",
		authorizationv1.ResourceAttributes{Namespace: metav1.NamespaceSystem, Resource: "services"}), "a token lists no Services")

	proxy := "system:serviceaccount:kube-system:" + KubeProxyServiceAccount
	sa := []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	for _, r := range []authorizationv1.ResourceAttributes{{Resource: "services"}, {Group: "discovery.k8s.io", Resource: "endpointslices"}} {
		for _, verb := range []string{"list", "watch"} {
			assert.True(t, can(t, c, proxy, sa, verb, r), "kube-proxy may %s %s (system:node-proxier)", verb, r.Resource)
		}
	}
}
