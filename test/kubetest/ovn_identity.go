package kubetest

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The per-node identity OVN-Kubernetes gives node components (ovnkube-node,
// and on Windows hybrid-overlay-node): a client certificate for
// system:ovn-node:<node> in group system:ovn-nodes.
const (
	OVNNodeUserPrefix = "system:ovn-node:"
	OVNNodesGroup     = "system:ovn-nodes"
	// OVNIdentityApprovalReason is the reason the identity part approves with.
	OVNIdentityApprovalReason = "AutoApproved"
	// ovnIdentityMaxLifetime is the longest certificate it approves.
	ovnIdentityMaxLifetime = 365 * 24 * time.Hour
	ovnNodeRole            = "kubetest:ovn-node"
)

// ovnIdentityGroups are the only groups an approved requester may be in.
var ovnIdentityGroups = []string{"system:nodes", OVNNodesGroup, "system:authenticated"}

// ensureOVNNodeRBAC grants group system:ovn-nodes what a node's OVN
// component does here (as OVN-Kubernetes' deployment does, narrower): read
// and patch Nodes (the hybrid overlay's annotations), and request and
// watch CSRs to renew its certificate.
func (c *Cluster) ensureOVNNodeRBAC(ctx context.Context) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ovnNodeRole},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{certificatesv1.GroupName}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ovnNodeRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ovnNodeRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: OVNNodesGroup}},
	}
	rbac := c.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: ClusterRole %s: %w", ovnNodeRole, err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: ClusterRoleBinding %s: %w", ovnNodeRole, err)
	}
	return nil
}

// approveOVNIdentity plays OVN-Kubernetes' identity CSR approver
// (ovnkube-identity) for one CSR: a pending kubernetes.io/kube-apiserver-client
// CSR whose CN starts with system:ovn-node: is approved when it passes
// every rule of ovnIdentityVerdict, else denied; every other CSR is left
// alone.
func (c *Cluster) approveOVNIdentity(ctx context.Context, name string) error {
	csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientSignerName || len(csr.Status.Conditions) > 0 || len(csr.Status.Certificate) > 0 {
		return nil
	}
	req, err := parseCSR(csr.Spec.Request)
	if err != nil || !strings.HasPrefix(req.Subject.CommonName, OVNNodeUserPrefix) {
		return nil
	}
	cond := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateApproved,
		Status: corev1.ConditionTrue, Reason: OVNIdentityApprovalReason,
		Message: "approved by the OVN-Kubernetes identity approver (kubetest stand-in)"}
	detail := "approved"
	if why := ovnIdentityVerdict(csr, req); why != "" {
		cond.Type, cond.Reason, cond.Message, detail = certificatesv1.CertificateDenied, "CSRDenied", why, "denied: "+why
	}
	csr.Status.Conditions = append(csr.Status.Conditions, cond)
	if _, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.logf("kubetest: as the OVN-Kubernetes identity approver: CSR %s (%s) %s", name, req.Subject.CommonName, detail)
	c.record(PartEvent{Part: PartOVNIdentity, Object: name, Detail: detail})
	return nil
}

func parseCSR(request []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(request)
	if block == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	return x509.ParseCertificateRequest(block.Bytes)
}

// ovnIdentityVerdict is "" for a CSR the OVN-Kubernetes identity approver
// approves, else why not: requested by system:node:<n> or
// system:ovn-node:<n> with n a DNS subdomain, in no group outside
// system:nodes, system:ovn-nodes and system:authenticated; CN exactly
// system:ovn-node:<n>, organisation exactly [system:ovn-nodes]; usages
// exactly digital signature and client auth; expirationSeconds set and at
// most a year.
func ovnIdentityVerdict(csr *certificatesv1.CertificateSigningRequest, req *x509.CertificateRequest) string {
	user := csr.Spec.Username
	node, ok := strings.CutPrefix(user, "system:node:")
	if !ok {
		node, ok = strings.CutPrefix(user, OVNNodeUserPrefix)
	}
	usages := slices.Clone(csr.Spec.Usages)
	slices.Sort(usages)
	switch {
	case !ok || node == "":
		return fmt.Sprintf("requested by %q, not by a node (system:node:<name> or %s<name>)", user, OVNNodeUserPrefix)
	case len(validation.IsDNS1123Subdomain(node)) > 0:
		return fmt.Sprintf("node name %q is not a DNS subdomain", node)
	case slices.ContainsFunc(csr.Spec.Groups, func(g string) bool { return !slices.Contains(ovnIdentityGroups, g) }):
		return fmt.Sprintf("requester groups %q go beyond %q", csr.Spec.Groups, ovnIdentityGroups)
	case req.Subject.CommonName != OVNNodeUserPrefix+node:
		return fmt.Sprintf("common name %q is not %s%s", req.Subject.CommonName, OVNNodeUserPrefix, node)
	case !slices.Equal(req.Subject.Organization, []string{OVNNodesGroup}):
		return fmt.Sprintf("organisation %q is not exactly [%s]", req.Subject.Organization, OVNNodesGroup)
	case !slices.Equal(usages, []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth, certificatesv1.UsageDigitalSignature}):
		return fmt.Sprintf("usages %q are not exactly digital signature and client auth", csr.Spec.Usages)
	case csr.Spec.ExpirationSeconds == nil || time.Duration(*csr.Spec.ExpirationSeconds)*time.Second > ovnIdentityMaxLifetime:
		return "expirationSeconds is unset or longer than a year"
	}
	return ""
}
