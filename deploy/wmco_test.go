package deploy

import (
	"context"
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/wsu-project/wsu/test/kubetest"
)

// TestOpenShiftLeavesWMCOAlone (issue 26, finding 6): with real kubectl,
// `kubectl apply -k deploy/overlays/openshift` then `kubectl delete -k` of
// it leave WMCO's namespace byte for byte as it was: its labels (WMCO's pod
// runs with hostNetwork, which enforce=restricted would refuse) and every
// object in it. While installed, the only objects the overlay adds there
// are its own Roles and RoleBindings, and WMCO's are untouched.
func TestOpenShiftLeavesWMCOAlone(t *testing.T) {
	kubectl := kubetest.KubectlBinary(t) // the real kubectl
	ctx := context.Background()
	c := kubetest.Start(t)
	prepareOpenShift(ctx, t, c)
	wmcoObjects(ctx, t, c)

	before := snapshotNamespace(ctx, t, c, WMCONamespace)
	require.Contains(t, before, "ConfigMap/windows-instances")

	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kubectl %s:\n%s", strings.Join(args, " "), out)
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	run("apply", "-k", "overlays/openshift")
	during := snapshotNamespace(ctx, t, c, WMCONamespace)
	var added []string
	for k, v := range during {
		if old, ok := before[k]; ok {
			assert.Equal(t, old, v, "%s changed by apply -k", k)
		} else {
			added = append(added, k)
		}
	}
	for k := range before {
		assert.Contains(t, during, k, "apply -k removed %s", k)
	}
	sort.Strings(added)
	assert.Equal(t, []string{
		"Role/wsu-byoh-inventory", "Role/wsu-controller-byoh", "Role/wsu-metrics",
		"RoleBinding/wsu-controller-byoh", "RoleBinding/wsu-join-inventory", "RoleBinding/wsu-metrics",
	}, added, "what the overlay puts in WMCO's namespace: its own RBAC, by name")

	// --wait=false: wsu's own namespace is left Terminating (the bed runs
	// no namespace controller); WMCO's is what is checked.
	run("delete", "-k", "overlays/openshift", "--wait=false")
	after := snapshotNamespace(ctx, t, c, WMCONamespace)
	assert.Equal(t, before, after, "WMCO's namespace after apply -k and delete -k")
	ns, err := c.Client.CoreV1().Namespaces().Get(ctx, WMCONamespace, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, ns.DeletionTimestamp.IsZero(), "WMCO's namespace is not deleted")
}

// wmcoObjects gives WMCO's namespace what WMCO and its users put there:
// its labels, the BYOH inventory, WMCO's own ServiceAccount and RBAC.
func wmcoObjects(ctx context.Context, t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	cs := c.Client
	ns, err := cs.CoreV1().Namespaces().Get(ctx, WMCONamespace, metav1.GetOptions{})
	require.NoError(t, err)
	ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
	ns.Labels["openshift.io/cluster-monitoring"] = "true"
	ns.Annotations = map[string]string{"openshift.io/node-selector": ""}
	_, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().ConfigMaps(WMCONamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "windows-instances"},
		Data: map[string]string{"10.0.0.11": "username=Administrator"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createSecrets(ctx, t, c, WMCONamespace)
	_, err = cs.CoreV1().ServiceAccounts(WMCONamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "windows-machine-config-operator"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().Roles(WMCONamespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "windows-machine-config-operator"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(WMCONamespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "windows-machine-config-operator"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "windows-machine-config-operator"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "windows-machine-config-operator", Namespace: WMCONamespace}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// snapshotNamespace is the namespace object and every object in it, of
// every listable namespaced type, as the API server serves them (JSON, by
// KIND/NAME; the namespace itself under "Namespace").
func snapshotNamespace(ctx context.Context, t *testing.T, c *kubetest.Cluster, namespace string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ns, err := c.Client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	require.NoError(t, err)
	data, err := json.Marshal(ns)
	require.NoError(t, err)
	out["Namespace"] = string(data)
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	require.NoError(t, err)
	lists, err := dc.ServerPreferredNamespacedResources()
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		require.NoError(t, err)
		for _, r := range l.APIResources {
			if !contains(r.Verbs, "list") || strings.Contains(r.Name, "/") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).Namespace(namespace).List(ctx, metav1.ListOptions{})
			require.NoError(t, err, "%s", r.Name)
			for _, u := range items.Items {
				data, err := json.Marshal(u.Object)
				require.NoError(t, err)
				out[r.Kind+"/"+u.GetName()] = string(data)
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
