package deploy

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/test/kubetest"
)

// TestAzureNodeIdentityPolicy (issue 26, finding 8): the opt-in
// deploy/rbac/azure-cloud-node-manager.yaml, bound to the controller as its
// header says, lets it write only the per-node identities
// k8s_node_identity makes, in their own namespace: real requests as the
// controller, each refused by the API server (RBAC or the file's
// ValidatingAdmissionPolicy) or allowed.
func TestAzureNodeIdentityPolicy(t *testing.T) {
	const byPolicy = "ValidatingAdmissionPolicy 'wsu-node-identities'"
	ctx := context.Background()
	c := kubetest.Start(t)
	a := newApplier(t, c.Config)
	a.applyAll(ctx, t, readRendered(t, "kubernetes"))
	data, err := os.ReadFile("rbac/azure-cloud-node-manager.yaml")
	require.NoError(t, err)
	a.applyAll(ctx, t, decodeObjects(t, data))
	ns, idNS := KubernetesNamespace, "wsu-cloud-node-manager"
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "wsu-controller", Namespace: ns}}
	_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wsu-cloud-node-manager"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wsu-cloud-node-manager"}, Subjects: subject}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.RbacV1().RoleBindings(idNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wsu-cloud-node-manager"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "wsu-cloud-node-manager"}, Subjects: subject}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.AwaitRBAC(ctx), "the authorizer has seen the bindings")
	ctl := clientFor(t, c, ns, "wsu-controller")

	nodeRole := func(name, node string) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update"}, ResourceNames: []string{node}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}, ResourceNames: []string{node}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
		}}
	}
	binding := func(name, role, sa string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: idNS}}}
	}
	token := func(namespace, sa string) error {
		_, err := ctl.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		return err
	}
	_, err = c.Client.CoreV1().ServiceAccounts(idNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}}, metav1.CreateOptions{})
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		do   func() error
		// policy: refused by the policy; forbidden: by RBAC; else allowed.
		policy, forbidden bool
	}{
		{"denied a ClusterRole of another name", func() error {
			_, err := ctl.RbacV1().ClusterRoles().Create(ctx, nodeRole("wsu-admin", "win-1"), metav1.CreateOptions{})
			return err
		}, true, false},
		{"denied a node's ClusterRole on another Node", func() error {
			_, err := ctl.RbacV1().ClusterRoles().Create(ctx, nodeRole("wsu:cloud-node-manager:win-2", "control-plane-1"), metav1.CreateOptions{})
			return err
		}, true, false},
		{"denied a ServiceAccount of another name", func() error {
			_, err := ctl.CoreV1().ServiceAccounts(idNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
			return err
		}, true, false},
		{"denied a token for another ServiceAccount of the namespace", func() error { return token(idNS, "intruder") }, true, false},
		{"denied a token for a kube-system ServiceAccount", func() error { return token("kube-system", "default") }, false, true},
		{"allowed the node's ClusterRole", func() error {
			_, err := ctl.RbacV1().ClusterRoles().Create(ctx, nodeRole("wsu:cloud-node-manager:win-1", "win-1"), metav1.CreateOptions{})
			return err
		}, false, false},
		{"denied its binding for another ServiceAccount", func() error {
			_, err := ctl.RbacV1().ClusterRoleBindings().Create(ctx, binding("wsu:cloud-node-manager:win-1", "wsu:cloud-node-manager:win-1", "intruder"), metav1.CreateOptions{})
			return err
		}, true, false},
		{"allowed the node's ServiceAccount, binding and token", func() error {
			if _, err := ctl.CoreV1().ServiceAccounts(idNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "wsu-cloud-node-manager-win-1"}}, metav1.CreateOptions{}); err != nil {
				return err
			}
			if _, err := ctl.RbacV1().ClusterRoleBindings().Create(ctx, binding("wsu:cloud-node-manager:win-1", "wsu:cloud-node-manager:win-1", "wsu-cloud-node-manager-win-1"), metav1.CreateOptions{}); err != nil {
				return err
			}
			return token(idNS, "wsu-cloud-node-manager-win-1")
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			// The API server compiles a new policy within a second or two.
			for i := 0; i < 40; i++ {
				err = tc.do()
				if !tc.policy || (err != nil && strings.Contains(err.Error(), byPolicy)) {
					break
				}
				time.Sleep(250 * time.Millisecond)
			}
			switch {
			case tc.policy:
				require.Error(t, err)
				require.Contains(t, err.Error(), byPolicy, "refused by the policy")
			case tc.forbidden:
				require.True(t, apierrors.IsForbidden(err), "refused by RBAC: %v", err)
			default:
				require.NoError(t, err)
			}
		})
	}
}
