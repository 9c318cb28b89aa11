//go:build linux

package controller_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/test/kubetest"
)

// operatorConditionCRD stands in for OLM's OperatorCondition CRD: the same
// group, version, kind and scope; spec and status as free objects.
const operatorConditionCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: operatorconditions.operators.coreos.com}
spec:
  group: operators.coreos.com
  names: {kind: OperatorCondition, listKind: OperatorConditionList, plural: operatorconditions, singular: operatorcondition}
  scope: Namespaced
  versions:
  - name: v2
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestUpgradeableOperatorCondition runs the reconciler against the real
// kube-apiserver: with an instance Upgrading, then one Removing, OLM's
// OperatorCondition says Upgradeable=False naming it, and True once every
// instance is Joined; an unchanged state writes nothing, and a condition
// OLM or another writer put there is kept.
func TestUpgradeableOperatorCondition(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	crd := filepath.Join(t.TempDir(), "operatorcondition.yaml")
	require.NoError(t, os.WriteFile(crd, []byte(operatorConditionCRD), 0o644))
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t), crd))
	require.NoError(t, cluster.EnsureNamespace(ctx, ns))
	admin := userClient(t, cluster, "bed-admin", "system:masters")

	const name = "wsu.v0.1.0"
	oc := &unstructured.Unstructured{}
	oc.SetGroupVersionKind(controller.OperatorConditionGVK)
	oc.SetNamespace(ns)
	oc.SetName(name)
	other := map[string]any{"type": "Other", "status": "True", "reason": "Set", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
	require.NoError(t, unstructured.SetNestedSlice(oc.Object, []any{other}, "spec", "conditions"))
	require.NoError(t, admin.Create(ctx, oc))

	// The controller holds what OLM grants on its OperatorCondition (get,
	// update and patch, by name) and its own list of instances; no more.
	_, err := cluster.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "wsu-olm", Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"operators.coreos.com"}, Resources: []string{"operatorconditions"}, ResourceNames: []string{name}, Verbs: []string{"get", "update", "patch"}},
			{APIGroups: []string{wsuv1.GroupVersion.Group}, Resources: []string{"windowsinstances"}, Verbs: []string{"list"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cluster.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "wsu-olm", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "wsu-olm"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "wsu-operator"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	operator := userClient(t, cluster, "wsu-operator")
	require.NoError(t, cluster.AwaitRBAC(ctx))
	r := &controller.UpgradeableReconciler{Instances: operator, Conditions: operator, Namespace: ns, Name: name}
	reconcileOnce := func() {
		t.Helper()
		_, err := r.Reconcile(ctx, reconcile.Request{})
		require.NoError(t, err)
	}
	conditions := func() ([]metav1.Condition, string) {
		t.Helper()
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(controller.OperatorConditionGVK)
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(oc), cur))
		raw, _, err := unstructured.NestedSlice(cur.Object, "spec", "conditions")
		require.NoError(t, err)
		var out []metav1.Condition
		for _, c := range raw {
			var cond metav1.Condition
			require.NoError(t, runtimeConvert(c, &cond))
			out = append(out, cond)
		}
		return out, cur.GetResourceVersion()
	}
	setPhase := func(wi *wsuv1.WindowsInstance, phase string) {
		t.Helper()
		wi.Status.Phase = phase
		require.NoError(t, admin.Status().Update(ctx, wi))
	}

	a, b := instanceNamed("win-a", nil), instanceNamed("win-b", nil)
	require.NoError(t, admin.Create(ctx, a))
	require.NoError(t, admin.Create(ctx, b))
	setPhase(a, wsuv1.PhaseJoined)
	setPhase(b, wsuv1.PhaseUpgrading)
	reconcileOnce()
	conds, _ := conditions()
	up := meta.FindStatusCondition(conds, controller.ConditionUpgradeable)
	require.NotNil(t, up, "%v", conds)
	assert.Equal(t, metav1.ConditionFalse, up.Status)
	assert.Equal(t, controller.ReasonInstancesInTransition, up.Reason)
	assert.Contains(t, up.Message, "win-b (Upgrading)")
	assert.NotContains(t, up.Message, "win-a")
	assert.NotNil(t, meta.FindStatusCondition(conds, "Other"), "another writer's condition is kept")

	setPhase(b, wsuv1.PhaseJoined)
	setPhase(a, wsuv1.PhaseRemoving)
	reconcileOnce()
	conds, _ = conditions()
	up = meta.FindStatusCondition(conds, controller.ConditionUpgradeable)
	assert.Equal(t, metav1.ConditionFalse, up.Status)
	assert.Contains(t, up.Message, "win-a (Removing)")

	setPhase(a, wsuv1.PhaseJoined)
	reconcileOnce()
	conds, rv := conditions()
	up = meta.FindStatusCondition(conds, controller.ConditionUpgradeable)
	assert.Equal(t, metav1.ConditionTrue, up.Status)
	assert.Equal(t, controller.ReasonNoInstancesInTransition, up.Reason)

	reconcileOnce()
	_, rv2 := conditions()
	assert.Equal(t, rv, rv2, "an unchanged state writes nothing")
}

// userClient is a client as a user of the bed (groups too).
func userClient(t *testing.T, cluster *kubetest.Cluster, name string, groups ...string) client.Client {
	t.Helper()
	kc, err := cluster.User(name, groups...)
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(t, err)
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

func runtimeConvert(from any, to *metav1.Condition) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}
