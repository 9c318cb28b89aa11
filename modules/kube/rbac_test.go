package kube

import (
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
	"github.com/wsu-project/wsu/test/kubetest"
)

const rbacFile = "../../deploy/rbac/wsu-cluster-role.yaml"

// azureRBACFile is what join needs on Azure only (k8s_node_identity).
const azureRBACFile = "../../deploy/rbac/azure-cloud-node-manager.yaml"

// loadRBAC reads a shipped file's ClusterRole and Roles.
func loadRBAC(t *testing.T, rbacFile string) (*rbacv1.ClusterRole, []*rbacv1.Role) {
	t.Helper()
	data, err := os.ReadFile(rbacFile)
	require.NoError(t, err)
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var cr *rbacv1.ClusterRole
	var roles []*rbacv1.Role
	for {
		var raw runtime.RawExtension
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		var meta metav1.TypeMeta
		require.NoError(t, utilyaml.Unmarshal(raw.Raw, &meta))
		switch meta.Kind {
		case "ClusterRole":
			require.Nil(t, cr, "one ClusterRole")
			cr = &rbacv1.ClusterRole{}
			require.NoError(t, utilyaml.Unmarshal(raw.Raw, cr))
		case "Role":
			r := &rbacv1.Role{}
			require.NoError(t, utilyaml.Unmarshal(raw.Raw, r))
			roles = append(roles, r)
		case "Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			// The Roles' namespace (grantFile makes it); admission
			// policies for ServiceAccounts, which this test's user is not
			// (deploy's tests try them).
		default:
			t.Fatalf("unexpected %s in %s", meta.Kind, rbacFile)
		}
	}
	require.NotNil(t, cr)
	return cr, roles
}

// grant creates the roles and binds them to user, as the file's comment
// tells an administrator to.
func grant(t *testing.T, c *kubetest.Cluster, user string) {
	t.Helper()
	for _, f := range []string{rbacFile, azureRBACFile} {
		grantFile(t, c, user, f)
	}
}

func grantFile(t *testing.T, c *kubetest.Cluster, user, file string) {
	t.Helper()
	cr, roles := loadRBAC(t, file)
	rbac := c.Client.RbacV1()
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	_, err := rbac.ClusterRoles().Create(ctx, cr, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   subject,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, r := range roles {
		require.NoError(t, c.EnsureNamespace(ctx, r.Namespace))
		_, err := rbac.Roles(r.Namespace).Create(ctx, r, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = rbac.RoleBindings(r.Namespace).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.Name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
			Subjects:   subject,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, c.AwaitRBAC(ctx), "the authorizer has seen the grants")
}

// TestRBAC runs the modules as a user holding only the shipped roles.
func TestRBAC(t *testing.T) {
	c := cluster(t)
	grant(t, c, "wsu-rbac")
	userKC, err := c.User("wsu-rbac")
	require.NoError(t, err)
	as := func(t *testing.T, m modules.Module, attrs map[string]cty.Value) modules.Config {
		attrs["kubeconfig"] = cty.StringVal(userKC)
		return cfgFor(t, m, attrs)
	}

	const node, ns = "rbac-1", "rbac-1"
	drainNode(t, c, node)
	runPod(t, c, ns, "web", node, ownedBy("ReplicaSet"))

	t.Run("k8s_node_wait", func(t *testing.T) {
		converge(t, NodeWait{testClusters}, as(t, NodeWait{testClusters}, map[string]cty.Value{"name": cty.StringVal(node)}))
	})
	t.Run("k8s_node", func(t *testing.T) {
		converge(t, Node{testClusters}, as(t, Node{testClusters}, map[string]cty.Value{
			"name":   cty.StringVal(node),
			"labels": cty.MapVal(map[string]cty.Value{"node.openshift.io/os_id": cty.StringVal("Windows")}),
			"taints": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("os"), "value": cty.StringVal("Windows"), "effect": cty.StringVal("NoSchedule")})}),
		}))
	})
	t.Run("k8s_wait_annotation", func(t *testing.T) {
		require.NoError(t, c.AnnotateNode(ctx, node, "k8s.ovn.org/hybrid-overlay-node-subnet", "10.132.2.0/24"))
		converge(t, WaitAnnotation{testClusters}, as(t, WaitAnnotation{testClusters}, map[string]cty.Value{"node": cty.StringVal(node), "annotation": cty.StringVal("k8s.ovn.org/hybrid-overlay-node-subnet")}))
	})
	t.Run("k8s_node_cordon", func(t *testing.T) {
		converge(t, NodeCordon{testClusters}, as(t, NodeCordon{testClusters}, map[string]cty.Value{"name": cty.StringVal(node)}))
	})
	t.Run("k8s_node_drain", func(t *testing.T) {
		_, res := converge(t, NodeDrain{testClusters}, as(t, NodeDrain{testClusters}, map[string]cty.Value{"name": cty.StringVal(node), "grace_period": cty.NumberIntVal(0), "interval": cty.NumberFloatVal(0.05)}))
		assert.Equal(t, strs("rbac-1/web"), res.GetAttr("evicted"))
	})
	t.Run("k8s_cluster_check", func(t *testing.T) {
		converge(t, ClusterCheck{testClusters}, as(t, ClusterCheck{testClusters}, map[string]cty.Value{}))
	})
	t.Run("k8s_cluster_network", func(t *testing.T) {
		converge(t, ClusterNetwork{testClusters}, as(t, ClusterNetwork{testClusters}, map[string]cty.Value{}))
	})
	t.Run("k8s_windows_network", func(t *testing.T) {
		ns := "rbac-network"
		createDS(t, c.Client, testDaemonSet(ns, "calico-node-windows", false))
		createDS(t, c.Client, testDaemonSet(ns, "kube-proxy-windows", false))
		m := WindowsNetwork{testClusters}
		converge(t, m, as(t, m, map[string]cty.Value{"network": cty.StringVal("hostprocess"),
			"cni_daemonset": cty.StringVal(ns + "/calico-node-windows"), "kube_proxy_daemonset": cty.StringVal(ns + "/kube-proxy-windows")}))
		// ovn-hybrid reads one ConfigMap by name: refused for its absence, not by RBAC.
		cfg := as(t, m, map[string]cty.Value{"network": cty.StringVal("ovn-hybrid")})
		d := requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "The cluster does not run the network this node needs", "network")
		assert.Contains(t, d.Detail, "ovnkube-config")
	})
	t.Run("k8s_node_pods_wait", func(t *testing.T) {
		m := NodePodsWait{testClusters}
		cfg := as(t, m, map[string]cty.Value{"node_name": cty.StringVal(node), "daemonsets": strs("rbac-network/kube-proxy-windows")})
		p := plan(t, m, cfg)
		require.Empty(t, p.Diagnostics)
		require.NotNil(t, p.Change, "no pod on the node: a wait")
	})
	t.Run("k8s_kubelet_config", func(t *testing.T) {
		// The shared cluster has no kubeadm ConfigMaps: allowed to look,
		// the module finds it missing rather than forbidden.
		m := KubeletConfig{testClusters}
		cfg := as(t, m, map[string]cty.Value{"node_name": cty.StringVal(node)})
		requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Missing kube-system/kubelet-config", "kubeconfig")
	})
	t.Run("k8s_image_mirrors", func(t *testing.T) {
		converge(t, ImageMirrors{testClusters}, as(t, ImageMirrors{testClusters}, map[string]cty.Value{}))
	})
	t.Run("k8s_trusted_ca", func(t *testing.T) {
		converge(t, TrustedCA{testClusters}, as(t, TrustedCA{testClusters}, map[string]cty.Value{}))
	})
	t.Run("k8s inventory", func(t *testing.T) {
		// -i k8s://...: the ConfigMap and the key Secret, read through the
		// same shared client the CLI builds from --kubeconfig.
		ns := "openshift-windows-machine-config-operator"
		_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "windows-instances"},
			Data: map[string]string{"10.0.0.11": "username=Administrator"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
			Data: map[string][]byte{kubeinv.KeySecretKey: byohKey(t)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		cl, err := kube.NewCache(kube.Defaults{}).Get(userKC, "")
		require.NoError(t, err)
		inv, _, diags := kubeinv.Load(ctx, cl.Kube, "k8s://"+ns+"/"+"windows-instances")
		require.False(t, diags.HasErrors(), diags.Error())
		assert.Contains(t, inv.Hosts, "10.0.0.11")
	})
	t.Run("k8s_metrics_endpoint", func(t *testing.T) {
		m := MetricsEndpoint{testClusters}
		converge(t, m, as(t, m, map[string]cty.Value{"namespace": cty.StringVal("kube-system"), "node_name": cty.StringVal(node), "address": cty.StringVal("10.0.0.31")}))
		converge(t, m, as(t, m, map[string]cty.Value{"namespace": cty.StringVal("kube-system"), "node_name": cty.StringVal(node), "state": cty.StringVal("absent")}))
	})
	t.Run("k8s_node_identity", func(t *testing.T) {
		m, h := NodeIdentity{Clusters: testClusters}, identityHost(t)
		attrs := map[string]cty.Value{"namespace": cty.StringVal("wsu-cloud-node-manager"), "node_name": cty.StringVal(node), "api_server": cty.StringVal("https://127.0.0.1:6443")}
		moduletest.Converge(t, m, h, as(t, m, attrs))
		attrs["state"] = cty.StringVal("absent")
		moduletest.Converge(t, m, h, as(t, m, attrs))
	})
	t.Run("k8s_node_delete", func(t *testing.T) {
		converge(t, NodeDelete{testClusters}, as(t, NodeDelete{testClusters}, map[string]cty.Value{"name": cty.StringVal(node)}))
	})

	// Every permission docs/kubernetes.md promises, including those of the
	// Ignition, bootstrap-token and CSR modules, and a few it must not give.
	type access struct {
		verb, group, resource, subresource, ns, name string
	}
	allowed := []access{
		{verb: "get", resource: "nodes"}, {verb: "list", resource: "nodes"}, {verb: "patch", resource: "nodes"}, {verb: "delete", resource: "nodes"},
		{verb: "list", resource: "pods"}, {verb: "get", resource: "pods", ns: "any"},
		{verb: "create", resource: "pods", subresource: "eviction", ns: "any"},
		{verb: "list", group: "policy", resource: "poddisruptionbudgets", ns: "any"},
		{verb: "list", group: "apps", resource: "daemonsets"}, {verb: "get", group: "apps", resource: "daemonsets", ns: "any"},
		{verb: "get", resource: "configmaps", ns: "ovn-kubernetes", name: "ovnkube-config"},
		{verb: "get", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
		{verb: "list", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
		{verb: "watch", group: "certificates.k8s.io", resource: "certificatesigningrequests"},
		{verb: "update", group: "certificates.k8s.io", resource: "certificatesigningrequests", subresource: "approval"},
		{verb: "approve", group: "certificates.k8s.io", resource: "signers", name: "kubernetes.io/kube-apiserver-client-kubelet"},
		{verb: "approve", group: "certificates.k8s.io", resource: "signers", name: "kubernetes.io/kubelet-serving"},
		{verb: "create", resource: "secrets", ns: "kube-system"},
		{verb: "get", resource: "configmaps", ns: "kube-public", name: "cluster-info"},
		{verb: "get", resource: "secrets", ns: "openshift-machine-config-operator", name: "node-bootstrapper-token"},
		{verb: "get", resource: "configmaps", ns: "openshift-windows-machine-config-operator", name: "windows-instances"},
		{verb: "get", resource: "secrets", ns: "openshift-windows-machine-config-operator", name: "cloud-private-key"},
		{verb: "get", group: "machineconfiguration.openshift.io", resource: "machineconfigs"},
		{verb: "list", group: "machineconfiguration.openshift.io", resource: "machineconfigs"},
		{verb: "get", group: "machineconfiguration.openshift.io", resource: "controllerconfigs"},
		{verb: "get", group: "config.openshift.io", resource: "networks"},
		{verb: "get", group: "config.openshift.io", resource: "infrastructures"},
		{verb: "get", group: "operator.openshift.io", resource: "networks"},
		{verb: "get", group: "config.openshift.io", resource: "proxies"},
		{verb: "list", group: "config.openshift.io", resource: "imagedigestmirrorsets"},
		{verb: "list", group: "config.openshift.io", resource: "imagetagmirrorsets"},
		{verb: "get", resource: "configmaps", ns: "openshift-config", name: "user-ca-bundle"},
		{verb: "get", resource: "secrets", ns: "openshift-config", name: "pull-secret"},
		{verb: "get", group: "networking.k8s.io", resource: "servicecidrs", name: "kubernetes"},
		{verb: "get", resource: "services", ns: "default", name: "kubernetes"},
		{verb: "get", resource: "endpoints", ns: "default", name: "kubernetes"},
		{verb: "get", group: "discovery.k8s.io", resource: "endpointslices", ns: "default", name: "kubernetes"},
		{verb: "get", resource: "configmaps", ns: "kube-system", name: "kubeadm-config"},
		{verb: "get", resource: "configmaps", ns: "kube-system", name: "kubelet-config"},
		{verb: "get", resource: "services", ns: "kube-system", name: "kube-dns"},
		{verb: "create", resource: "services", ns: "kube-system"},
		{verb: "update", resource: "services", ns: "kube-system", name: "windows-exporter"},
		{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", ns: "kube-system"},
		{verb: "delete", group: "discovery.k8s.io", resource: "endpointslices", ns: "openshift-windows-machine-config-operator"},
		{verb: "get", resource: "secrets", ns: "openshift-windows-machine-config-operator", name: "windows-exporter-tls"},
		{verb: "create", resource: "serviceaccounts", ns: "wsu-cloud-node-manager"}, {verb: "delete", resource: "serviceaccounts", ns: "wsu-cloud-node-manager"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", ns: "wsu-cloud-node-manager"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "clusterrolebindings"},
		{verb: "patch", resource: "nodes", subresource: "status"}, {verb: "create", group: "events.k8s.io", resource: "events", ns: "default"},
	}
	denied := []access{
		{verb: "create", resource: "nodes"}, {verb: "update", resource: "nodes", subresource: "status"},
		{verb: "delete", resource: "pods", ns: "any"}, {verb: "create", resource: "pods", ns: "any"},
		{verb: "get", resource: "secrets", ns: "default"}, {verb: "get", resource: "secrets", ns: "openshift-machine-config-operator", name: "other"},
		{verb: "delete", resource: "secrets", ns: "kube-system"},
		{verb: "get", resource: "secrets", ns: "kube-system"}, {verb: "list", resource: "secrets", ns: "kube-system"},
		{verb: "watch", resource: "secrets", ns: "kube-system"},
		{verb: "get", resource: "secrets", ns: "kube-system", name: "bootstrap-token-abcdef"},
		{verb: "get", resource: "secrets", ns: "openshift-windows-machine-config-operator", name: "other"},
		{verb: "list", resource: "secrets", ns: "openshift-windows-machine-config-operator"},
		{verb: "get", resource: "secrets", ns: "kube-system", name: "windows-exporter-tls"},
		{verb: "update", resource: "configmaps", ns: "openshift-windows-machine-config-operator", name: "windows-instances"},
		{verb: "approve", group: "certificates.k8s.io", resource: "signers", name: "kubernetes.io/kube-apiserver-client"},
		{verb: "update", group: "certificates.k8s.io", resource: "certificatesigningrequests", subresource: "status"},
		{verb: "patch", group: "config.openshift.io", resource: "networks"},
		{verb: "get", resource: "configmaps", ns: "kube-system", name: "other"},
		{verb: "list", resource: "services", ns: "kube-system"},
		{verb: "get", resource: "services", ns: "default", name: "other"},
		{verb: "update", resource: "services", ns: "default", name: "kubernetes"},
		{verb: "update", group: "discovery.k8s.io", resource: "endpointslices", ns: "default", name: "kubernetes"},
		{verb: "update", group: "apps", resource: "daemonsets", ns: "any"}, {verb: "get", resource: "configmaps", ns: "ovn-kubernetes", name: "other"},
		{verb: "get", resource: "secrets", ns: "openshift-config", name: "other"},
		{verb: "list", resource: "secrets", ns: "openshift-config"},
		{verb: "update", resource: "secrets", ns: "openshift-config", name: "pull-secret"},
		{verb: "list", resource: "configmaps", ns: "openshift-config"},
		{verb: "update", resource: "configmaps", ns: "openshift-config", name: "user-ca-bundle"},
		{verb: "patch", group: "config.openshift.io", resource: "imagedigestmirrorsets"},
		{verb: "update", resource: "services", ns: "kube-system", name: "kube-dns"},
		{verb: "create", group: "discovery.k8s.io", resource: "endpointslices", ns: "default"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", ns: "default"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", ns: "kube-system"},
		{verb: "create", resource: "serviceaccounts", subresource: "token", ns: "openshift-windows-machine-config-operator"},
		{verb: "create", resource: "serviceaccounts", ns: "kube-system"},
		{verb: "bind", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "escalate", group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", ns: "kube-system"},
	}
	check := func(a access) bool {
		sar, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "wsu-rbac",
				Groups: []string{"system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.ns, Name: a.name,
				},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		return sar.Status.Allowed
	}
	for _, a := range allowed {
		assert.True(t, check(a), "wsu may %+v", a)
	}
	for _, a := range denied {
		assert.False(t, check(a), "wsu may not %+v", a)
	}
}

// TestRBACDocumented keeps docs/kubernetes.md showing the shipped file.
func TestRBACDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	require.NoError(t, err)
	for _, f := range []string{rbacFile, azureRBACFile} {
		yaml, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.True(t, strings.Contains(string(doc), string(yaml)), "docs/kubernetes.md must quote %s verbatim", f)
	}
}

// byohKey is an OpenSSH private key as BYOH keeps it in cloud-private-key.
func byohKey(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	block, err := gossh.MarshalPrivateKey(priv, "rbac test")
	require.NoError(t, err)
	return pem.EncodeToMemory(block)
}
