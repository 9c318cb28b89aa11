package kubetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rbacSyncs numbers AwaitRBAC's sentinels within a process.
var rbacSyncs atomic.Int64

// AwaitRBAC returns once the API server's RBAC authorizer has seen every
// Role, ClusterRole, RoleBinding and ClusterRoleBinding created before the
// call. The authorizer reads them from its own informers, a moment after a
// create returns, so a request made at once may be judged without them: a
// test that binds a role and acts on it must wait for this first.
//
// It creates one sentinel of each kind, granting a user of its own a verb
// on a resource nothing uses, and waits until a SubjectAccessReview allows
// both grants: an informer delivers a kind's objects in the order they were
// written, so once the sentinels are seen so is everything before them.
func (c *Cluster) AwaitRBAC(ctx context.Context) error {
	n := rbacSyncs.Add(1)
	name := fmt.Sprintf("kubetest-rbac-sync-%d", n)
	user := "kubetest:rbac-sync:" + fmt.Sprint(n)
	// Each kind grants its own verb, so each answer comes from one kind.
	clusterRule := []rbacv1.PolicyRule{{APIGroups: []string{"kubetest.invalid"}, Resources: []string{"syncs"}, Verbs: []string{"get"}}}
	nsRule := []rbacv1.PolicyRule{{APIGroups: []string{"kubetest.invalid"}, Resources: []string{"syncs"}, Verbs: []string{"list"}}}
	subject := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	rbac := c.Client.RbacV1()
	meta := metav1.ObjectMeta{Name: name}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: meta, Rules: clusterRule}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	nsMeta := metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}
	if _, err := rbac.Roles(metav1.NamespaceDefault).Create(ctx, &rbacv1.Role{ObjectMeta: nsMeta, Rules: nsRule}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if _, err := rbac.RoleBindings(metav1.NamespaceDefault).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: nsMeta, Subjects: subject,
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if err := c.awaitAllowed(ctx, user, "", "get"); err != nil {
		return err
	}
	return c.awaitAllowed(ctx, user, metav1.NamespaceDefault, "list")
}

// awaitAllowed waits until user may verb syncs in ns ("" cluster-wide).
func (c *Cluster) awaitAllowed(ctx context.Context, user, ns, verb string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		sar, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: verb, Group: "kubetest.invalid", Resource: "syncs"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("kubetest: waiting for the RBAC authorizer: %w", err)
		}
		if sar.Status.Allowed {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kubetest: the RBAC authorizer did not see new bindings within 30s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
