package controller

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/kube"
)

// CSRReconciler approves the kubelet certificate renewals of managed nodes
// for their whole life: a pending kubelet CSR whose node is a joined
// WindowsInstance's is judged by the same rules as the join's
// k8s_csr_approve (kube.Judge, with Renewal), bound to what the admin gave
// and wsu recorded (the node name recorded at join, spec.address, the
// admin's node_ip), never to a name or address the host reports of
// itself, and refused outright when it names the cluster's own
// API (kube.RuleServingClusterNames), and approved only if every rule
// holds. A CSR for a node no
// joined instance records is never approved (nor refused: another approver
// may own it). The first client certificate of a join is the join
// playbook's to approve, not this reconciler's: its requester is the
// bootstrap identity, which the renewal rules refuse.
type CSRReconciler struct {
	Client client.Client
	// Reader confirms uncached that a joined instance's recorded Node is
	// still there; nil: Client.
	Reader    client.Reader
	Kube      kubernetes.Interface
	Events    record.EventRecorder
	Namespace string
	// HostVars and AddressHostVars are the admin's inventory variables
	// (Options): a node_ip there is an address the admin gave.
	HostVars        map[string]string
	AddressHostVars map[string]map[string]string
	// Window is how far back a pending CSR may have been created.
	Window  time.Duration
	metrics *metrics
}

// Event reasons of renewals.
const (
	ReasonCSRApproved = "CSRApproved"
	ReasonCSRRefused  = "CSRRefused"
)

// DefaultRenewalWindow is CSRReconciler.Window's default: a kubelet whose
// CSR waited longer makes a new one.
const DefaultRenewalWindow = time.Hour

// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=certificatesigningrequests/approval,verbs=update
// +kubebuilder:rbac:groups=certificates.k8s.io,resources=signers,resourceNames=kubernetes.io/kube-apiserver-client-kubelet;kubernetes.io/kubelet-serving,verbs=approve
// +kubebuilder:rbac:groups="",resources=services;endpoints,resourceNames=kubernetes,verbs=get
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,resourceNames=kubernetes,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,resourceNames=kubernetes,verbs=get

// Reconcile implements reconcile.Reconciler.
func (r *CSRReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	csr := &certificatesv1.CertificateSigningRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, csr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if kube.CSRState(csr) != kube.CSRPending || kube.CSRKind(csr) == "" {
		return ctrl.Result{}, nil
	}
	node := csrNodeName(csr)
	wi, err := r.managing(ctx, node)
	if err != nil || wi == nil {
		return ctrl.Result{}, err
	}
	if gone, err := r.nodeGone(ctx, wi); err != nil || gone != "" {
		if gone != "" {
			r.metrics.csr("refused")
			r.Events.Eventf(wi, corev1.EventTypeWarning, ReasonCSRRefused, "CSR %s (%s) for node %s not approved: %s", csr.Name, kube.CSRKind(csr), node, gone)
		}
		return ctrl.Result{}, err
	}
	want := r.expectation(ctx, wi)
	survey, err := kube.NodeCSRs(ctx, r.Kube, want)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, c := range survey.CSRs {
		if c.Name != csr.Name {
			continue
		}
		if c.Err != nil {
			r.metrics.csr("refused")
			r.Events.Eventf(wi, corev1.EventTypeWarning, ReasonCSRRefused, "CSR %s (%s) for node %s not approved: %v", c.Name, c.Kind, node, c.Err)
			return ctrl.Result{}, nil
		}
	}
	if err := kube.ApproveCSR(ctx, r.Kube, csr.Name, survey.Want); err != nil {
		log.FromContext(ctx).Info("not approved", "csr", csr.Name, "error", err.Error())
		return ctrl.Result{}, nil
	}
	r.metrics.csr("approved")
	r.Events.Eventf(wi, corev1.EventTypeNormal, ReasonCSRApproved, "approved the renewal CSR %s (%s) of node %s", csr.Name, kube.CSRKind(csr), node)
	return ctrl.Result{}, nil
}

// csrNodeName is the node a kubelet CSR names in its requester or, for a
// client CSR, its subject: "" when it names none.
func csrNodeName(csr *certificatesv1.CertificateSigningRequest) string {
	if n, ok := strings.CutPrefix(csr.Spec.Username, "system:node:"); ok {
		return n
	}
	if req, err := kube.ParseCSRRequest(csr); err == nil {
		if n, ok := strings.CutPrefix(req.Subject.CommonName, "system:node:"); ok {
			return n
		}
	}
	return ""
}

// managing returns the joined instance whose status records node, or nil.
func (r *CSRReconciler) managing(ctx context.Context, node string) (*wsuv1.WindowsInstance, error) {
	if node == "" {
		return nil, nil
	}
	list := &wsuv1.WindowsInstanceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		wi := &list.Items[i]
		if strings.EqualFold(wi.Status.NodeName, node) && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined) {
			return wi, nil
		}
	}
	return nil, nil
}

// nodeGone says why a joined instance's recorded Node cannot have its
// certificates renewed, or "": Joined is only as fresh as the instance's
// last pass, so the Node is looked at here too. A deleted Node, one
// replaced by another of its name (another UID) or none recorded: a
// certificate for that name would let its holder register the name anew.
func (r *CSRReconciler) nodeGone(ctx context.Context, wi *wsuv1.WindowsInstance) (string, error) {
	if wi.Status.NodeUID == "" {
		return fmt.Sprintf("WindowsInstance %s recorded no Node UID", wi.Name), nil
	}
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	reason, err := recordedNodeGone(ctx, r.Client, reader, wi)
	switch reason {
	case ReasonNodeDeleted:
		return fmt.Sprintf("Node %s (UID %s), which WindowsInstance %s joined, was deleted", wi.Status.NodeName, wi.Status.NodeUID, wi.Name), err
	case ReasonNodeReplaced:
		return fmt.Sprintf("Node %s is not the Node WindowsInstance %s joined (UID %s): it was replaced", wi.Status.NodeName, wi.Name, wi.Status.NodeUID), err
	}
	return "", err
}

// expectation is what the admin gave and wsu recorded, as the renewal
// rules take it: the node name recorded at join, spec.address (a DNS name
// also by the IPs it resolves to here) and the node IP the admin set
// (spec.vars.node_ip, or the controller's --host-var/--address-host-var
// node_ip). The address the host reported of itself is not among them.
func (r *CSRReconciler) expectation(ctx context.Context, wi *wsuv1.WindowsInstance) kube.Expectation {
	var addrs []string
	for _, vars := range []map[string]string{wi.Spec.Vars, r.AddressHostVars[wi.Spec.Address], r.HostVars} {
		if ip := strings.Trim(vars["node_ip"], `"`); net.ParseIP(ip) != nil {
			addrs = append(addrs, ip)
			break
		}
	}
	names := []string{strings.ToLower(wi.Status.NodeName)}
	if net.ParseIP(wi.Spec.Address) != nil {
		addrs = append(addrs, wi.Spec.Address)
	} else {
		names = append(names, wi.Spec.Address)
		addrs = append(addrs, kube.WithResolved(ctx, []string{wi.Spec.Address})[1:]...)
	}
	window := r.Window
	if window <= 0 {
		window = DefaultRenewalWindow
	}
	return kube.Expectation{
		NodeName:  wi.Status.NodeName,
		Addresses: addrs,
		Hostnames: names,
		NotBefore: time.Now().Add(-window),
		Renewal:   true,
	}
}
