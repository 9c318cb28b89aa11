package kubetest

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// What kubeadm init names the objects a node join relies on
// (cmd/kubeadm/app/phases/bootstraptoken).
const (
	// KubeadmNodeTokenGroup is the group kubeadm's node bootstrap tokens
	// join (auth-extra-groups); its RBAC lets it request node certificates.
	KubeadmNodeTokenGroup = "system:bootstrappers:kubeadm:default-node-token"
	// ClusterInfoNamespace and ClusterInfoName locate the ConfigMap a
	// joining node reads the API server and its CA from.
	ClusterInfoNamespace = "kube-public"
	ClusterInfoName      = "cluster-info"
)

// InitKubeadm leaves behind what `kubeadm init` does that a node join
// needs: the ConfigMap kube-public/cluster-info (a kubeconfig with this API
// server's URL and CA) readable anonymously, the RBAC that lets kubeadm
// node tokens request client certificates, and what kubeadm uploads for a
// join to read (see uploadKubeadmConfig): the kubelet-config and
// kubeadm-config ConfigMaps with their Roles, the kube-proxy addon's
// cluster side (ServiceAccount, RBAC, ConfigMap; not its DaemonSet), and
// the kube-dns Service (not CoreDNS itself). Bootstrap token authentication
// and the Node authorizer are on in every test cluster. It is idempotent.
func (c *Cluster) InitKubeadm(ctx context.Context) error {
	c.logf("kubetest: as kubeadm init: publishing %s/%s and the node bootstrap RBAC", ClusterInfoNamespace, ClusterInfoName)
	info := clientcmdapi.NewConfig()
	// kubeadm's cluster-info kubeconfig has one cluster with an empty name
	// and nothing else.
	info.Clusters[""] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData}
	kc, err := clientcmd.Write(*info)
	if err != nil {
		return fmt.Errorf("kubetest: cluster-info: %w", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterInfoName, Namespace: ClusterInfoNamespace},
		Data:       map[string]string{"kubeconfig": string(kc)},
	}
	cms := c.Client.CoreV1().ConfigMaps(ClusterInfoNamespace)
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubetest: publishing %s/%s: %w", ClusterInfoNamespace, ClusterInfoName, err)
	}

	tokens := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: KubeadmNodeTokenGroup}}
	nodes := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:nodes"}}
	clusterRole := func(name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	}
	rbac := c.Client.RbacV1()
	var errs []error
	apply := func(what string, create, update func() error) {
		err := create()
		if apierrors.IsAlreadyExists(err) {
			err = update()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	crbs := []*rbacv1.ClusterRoleBinding{
		// Tokens may create CSRs and watch them (system:node-bootstrapper).
		{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:kubelet-bootstrap"}, RoleRef: clusterRole("system:node-bootstrapper"), Subjects: tokens},
		// kubeadm join checks for a Node of its name.
		{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"}, RoleRef: clusterRole("kubeadm:get-nodes"), Subjects: tokens},
		// These two mean something only to kube-controller-manager's CSR
		// approver, which runs only WithKubeadmControllers: otherwise no
		// CSR is approved without a test (or wsu) approving it.
		{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-autoapprove-bootstrap"}, RoleRef: clusterRole("system:certificates.k8s.io:certificatesigningrequests:nodeclient"), Subjects: tokens},
		{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-autoapprove-certificate-rotation"}, RoleRef: clusterRole("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"), Subjects: nodes},
	}
	getNodes := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
	}
	apply("ClusterRole "+getNodes.Name,
		func() error { _, err := rbac.ClusterRoles().Create(ctx, getNodes, metav1.CreateOptions{}); return err },
		func() error { _, err := rbac.ClusterRoles().Update(ctx, getNodes, metav1.UpdateOptions{}); return err })
	for _, b := range crbs {
		apply("ClusterRoleBinding "+b.Name,
			func() error { _, err := rbac.ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); return err },
			func() error { _, err := rbac.ClusterRoleBindings().Update(ctx, b, metav1.UpdateOptions{}); return err })
	}
	// Anyone may read cluster-info: a joining node has no credentials it
	// trusts the server with before it has the CA.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:bootstrap-signer-clusterinfo", Namespace: ClusterInfoNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{ClusterInfoName}, Verbs: []string{"get"}}},
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: ClusterInfoNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:anonymous"}},
	}
	roles, rbs := rbac.Roles(ClusterInfoNamespace), rbac.RoleBindings(ClusterInfoNamespace)
	apply("Role "+role.Name,
		func() error { _, err := roles.Create(ctx, role, metav1.CreateOptions{}); return err },
		func() error { _, err := roles.Update(ctx, role, metav1.UpdateOptions{}); return err })
	apply("RoleBinding "+rb.Name,
		func() error { _, err := rbs.Create(ctx, rb, metav1.CreateOptions{}); return err },
		func() error { _, err := rbs.Update(ctx, rb, metav1.UpdateOptions{}); return err })
	if len(errs) > 0 {
		return fmt.Errorf("kubetest: kubeadm RBAC: %w", errors.Join(errs...))
	}
	return c.uploadKubeadmConfig(ctx)
}
