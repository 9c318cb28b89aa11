package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// CSR is the object judged.
	CSR *certificatesv1.CertificateSigningRequest
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
// node's business and are left to whoever joins them. The signature is not
// checked here: a forged request naming the node is reported too.
func CSRConcernsNode(csr *certificatesv1.CertificateSigningRequest, node string) bool {
	node = strings.ToLower(node)
	if node == "" {
		return false
	}
	if csr.Spec.Username == nodeUserPrefix+node {
		return true
	}
	req, err := parseRequest(csr)
	if err != nil {
		return false
	}
	cn := req.Subject.CommonName
	return cn == node || strings.HasSuffix(cn, ":"+node)
}

// NodeExists says whether a Node of that name is registered.
func NodeExists(ctx context.Context, kc kubernetes.Interface, name string) (bool, error) {
	n, err := GetNode(ctx, kc, name)
	return n != nil, err
}

// GetNode reads the Node of that name, nil when none is registered.
func GetNode(ctx context.Context, kc kubernetes.Interface, name string) (*corev1.Node, error) {
	n, err := kc.CoreV1().Nodes().Get(ctx, strings.ToLower(name), metav1.GetOptions{})
	switch {
	case err == nil:
		return n, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	}
	return nil, fmt.Errorf("reading node %s: %w", name, err)
}

// NodeSurvey is what the API says about one node's CSRs.
type NodeSurvey struct {
	// Want is the expectation judged by, its ClientCSR settled.
	Want Expectation
	// Node is the registered Node, nil when there is none.
	Node *corev1.Node
	// CSRs concern the node, oldest first; pending ones carry a verdict.
	CSRs []NodeCSR
}

// NodeCSRs reads the Node and the CSRs concerning want.NodeName and judges
// them.
func NodeCSRs(ctx context.Context, kc kubernetes.Interface, want Expectation) (NodeSurvey, error) {
	want, err := withCluster(ctx, want, func(ctx context.Context) (ClusterAddresses, error) { return ReadClusterAddresses(ctx, kc) })
	if err != nil {
		return NodeSurvey{Want: want}, err
	}
	node, err := GetNode(ctx, kc, want.NodeName)
	if err != nil {
		return NodeSurvey{Want: want}, err
	}
	list, err := kc.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		return NodeSurvey{Want: want, Node: node}, fmt.Errorf("listing CertificateSigningRequests: %w", err)
	}
	csrs, want := Judge(list.Items, want, node)
	return NodeSurvey{Want: want, Node: node, CSRs: csrs}, nil
}

// withCluster fills want.Cluster, when it is nil, with what read returns
// plus want.ServiceNetworks. An error leaves it nil: the caller fails,
// naming what could not be read, rather than judge serving CSRs blind.
func withCluster(ctx context.Context, want Expectation, read func(context.Context) (ClusterAddresses, error)) (Expectation, error) {
	if want.Cluster != nil {
		return want, nil
	}
	c, err := read(ctx)
	if err != nil {
		return want, fmt.Errorf("the cluster's own addresses, which no serving certificate may name: %w", err)
	}
	c.ServiceNetworks = slices.Clone(c.ServiceNetworks)
	if err := c.AddServiceNetworks(want.ServiceNetworks...); err != nil {
		return want, err
	}
	want.Cluster = &c
	return want, nil
}

// Judge picks out the CSRs concerning want.NodeName, oldest first, and
// validates the pending ones against want and node (the registered Node,
// or nil). Across them it applies rule client-once: the join's one client
// CSR is want.ClientCSR if set, else an approved client CSR of the node
// created within the window, else the first pending one that passes every
// other rule; every other client CSR is refused. It returns the verdicts
// and want with ClientCSR settled, for ApproveCSR and callers that keep
// their own record (a controller approving renewals).
func Judge(items []certificatesv1.CertificateSigningRequest, want Expectation, node *corev1.Node) ([]NodeCSR, Expectation) {
	var mine []*certificatesv1.CertificateSigningRequest
	for i := range items {
		if CSRConcernsNode(&items[i], want.NodeName) {
			mine = append(mine, &items[i])
		}
	}
	sort.SliceStable(mine, func(i, j int) bool {
		ti, tj := mine[i].CreationTimestamp, mine[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return mine[i].Name < mine[j].Name
	})
	if want.ClientCSR == "" {
		want.ClientCSR = approvedClientCSR(mine, want)
	}
	out := make([]NodeCSR, 0, len(mine))
	for _, csr := range mine {
		nc := NodeCSR{Name: csr.Name, Kind: CSRKind(csr), State: CSRState(csr), CSR: csr}
		if nc.State == CSRPending {
			nc.Kind, nc.Err = Validate(csr, want, node)
			if nc.Err == nil && nc.Kind == CSRClient {
				want.ClientCSR = csr.Name
			}
		}
		out = append(out, nc)
	}
	return out, want
}

// approvedClientCSR names the first approved client CSR for the node
// itself created within the window, or "". For a renewal only the node's
// own earlier renewals count: the join's bootstrap CSR is another
// certificate's story.
func approvedClientCSR(csrs []*certificatesv1.CertificateSigningRequest, want Expectation) string {
	for _, csr := range csrs {
		if CSRKind(csr) != CSRClient || CSRState(csr) != CSRApproved || !inWindow(csr, want.NotBefore) {
			continue
		}
		if want.Renewal && csr.Spec.Username != nodeUserPrefix+strings.ToLower(want.NodeName) {
			continue
		}
		if req, err := parseRequest(csr); err == nil && req.Subject.CommonName == nodeUserPrefix+strings.ToLower(want.NodeName) {
			return csr.Name
		}
	}
	return ""
}

// ErrNotPending is returned by ApproveCSR for a CSR someone else decided.
var ErrNotPending = errors.New("no longer pending")

// ApproveCSR approves one CSR after reading the Node and the node's CSRs
// again and judging them once more, so what is approved is exactly what
// passed the rules, client-once included.
func ApproveCSR(ctx context.Context, kc kubernetes.Interface, name string, want Expectation) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := NodeCSRs(ctx, kc, want)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(s.CSRs, func(c NodeCSR) bool { return c.Name == name })
		if i < 0 {
			return fmt.Errorf("CSR %s: not found among the CSRs of node %s", name, strings.ToLower(want.NodeName))
		}
		c := s.CSRs[i]
		if c.State != CSRPending {
			return fmt.Errorf("CSR %s: %w (%s)", name, ErrNotPending, c.State)
		}
		if c.Err != nil {
			return fmt.Errorf("CSR %s: %w", name, c.Err)
		}
		csr := c.CSR.DeepCopy()
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:           certificatesv1.CertificateApproved,
			Status:         corev1.ConditionTrue,
			Reason:         ApprovalReason,
			Message:        fmt.Sprintf("Approved by wsu: the %s CSR of node %s passed every approval rule", c.Kind, strings.ToLower(want.NodeName)),
			LastUpdateTime: metav1.Now(),
		})
		_, err = kc.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, name, csr, metav1.UpdateOptions{})
		return err
	})
}
