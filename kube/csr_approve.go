package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// CSR states.
const (
	CSRPending  = "pending"
	CSRApproved = "approved"
	CSRDenied   = "denied"
	CSRFailed   = "failed"
)

// ApprovalReason is the reason wsu's approvals carry, so `kubectl get csr -o
// yaml` says who approved.
const ApprovalReason = "WSUApproved"

// NodeCSR is a CSR that concerns one node.
type NodeCSR struct {
	Name  string
	Kind  string // CSRClient, CSRServing or "" (another signer)
	State string
	// Err is Validate's verdict for a pending CSR: nil when it may be
	// approved, else a *RuleError.
	Err error
}

// CSRState reads a CSR's conditions; a denial or failure outranks approval.
func CSRState(csr *certificatesv1.CertificateSigningRequest) string {
	state := CSRPending
	for _, c := range csr.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Status != "" {
			continue
		}
		switch c.Type {
		case certificatesv1.CertificateDenied:
			return CSRDenied
		case certificatesv1.CertificateFailed:
			return CSRFailed
		case certificatesv1.CertificateApproved:
			state = CSRApproved
		}
	}
	return state
}

// CSRConcernsNode is true when a CSR names the node, in its common name
// (whatever prefix precedes the name, so a misspelt prefix is still caught
// and reported) or as its requester. Other nodes' CSRs are none of this
// node's business and are left to whoever joins them.
func CSRConcernsNode(csr *certificatesv1.CertificateSigningRequest, node string) bool {
	node = strings.ToLower(node)
	if node == "" {
		return false
	}
	if csr.Spec.Username == nodeUserPrefix+node {
		return true
	}
	req, err := ParseCSRRequest(csr)
	if err != nil {
		return false
	}
	cn := req.Subject.CommonName
	return cn == node || strings.HasSuffix(cn, ":"+node)
}

// NodeExists says whether a Node of that name is registered.
func NodeExists(ctx context.Context, kc kubernetes.Interface, name string) (bool, error) {
	_, err := kc.CoreV1().Nodes().Get(ctx, strings.ToLower(name), metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading node %s: %w", name, err)
}

// NodeCSRs lists the CSRs concerning want.NodeName, sorted by creation,
// validating the pending ones. It fills in want.NodeExists from the API.
func NodeCSRs(ctx context.Context, kc kubernetes.Interface, want Expectation) ([]NodeCSR, Expectation, error) {
	exists, err := NodeExists(ctx, kc, want.NodeName)
	if err != nil {
		return nil, want, err
	}
	want.NodeExists = exists
	list, err := kc.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, want, fmt.Errorf("listing CertificateSigningRequests: %w", err)
	}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool {
		ti, tj := items[i].CreationTimestamp, items[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return items[i].Name < items[j].Name
	})
	var out []NodeCSR
	for i := range items {
		csr := &items[i]
		if !CSRConcernsNode(csr, want.NodeName) {
			continue
		}
		nc := NodeCSR{Name: csr.Name, Kind: CSRKind(csr), State: CSRState(csr)}
		if nc.State == CSRPending {
			nc.Kind, nc.Err = Validate(csr, want)
		}
		out = append(out, nc)
	}
	return out, want, nil
}

// ErrNotPending is returned by ApproveCSR for a CSR someone else decided.
var ErrNotPending = errors.New("no longer pending")

// ApproveCSR approves one CSR after reading it again and validating it
// once more, so what is approved is exactly what passed the rules.
func ApproveCSR(ctx context.Context, kc kubernetes.Interface, name string, want Expectation) error {
	csrs := kc.CertificatesV1().CertificateSigningRequests()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		csr, err := csrs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading CSR %s: %w", name, err)
		}
		if s := CSRState(csr); s != CSRPending {
			return fmt.Errorf("CSR %s: %w (%s)", name, ErrNotPending, s)
		}
		kind, err := Validate(csr, want)
		if err != nil {
			return fmt.Errorf("CSR %s: %w", name, err)
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:           certificatesv1.CertificateApproved,
			Status:         corev1.ConditionTrue,
			Reason:         ApprovalReason,
			Message:        fmt.Sprintf("Approved by wsu: the %s CSR of node %s passed every approval rule", kind, strings.ToLower(want.NodeName)),
			LastUpdateTime: metav1.Now(),
		})
		_, err = csrs.UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
		return err
	})
}
