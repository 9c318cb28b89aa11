package kubetest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// The parts RunParts plays, as PartEvent.Part names them.
const (
	// PartCSRSigner stands in for kube-controller-manager's csrsigning
	// controller for the two kubelet signers and the API server client
	// signer.
	PartCSRSigner = "csr-signer"
	// PartOVNMaster stands in for the OVN-Kubernetes master's hybrid
	// overlay subnet allocation.
	PartOVNMaster = "ovn-master"
	// PartOVNIdentity stands in for OVN-Kubernetes' identity CSR approver
	// (ovnkube-identity) and the RBAC OVN-Kubernetes grants its node
	// identity: it approves or denies system:ovn-node:<node> client CSRs.
	PartOVNIdentity = "ovn-identity"
)

// HybridOverlaySubnetAnnotation is the node annotation holding the subnet
// the OVN-Kubernetes master allocated for a hybrid overlay (Windows) node.
const HybridOverlaySubnetAnnotation = "k8s.ovn.org/hybrid-overlay-node-subnet"

// DefaultHybridClusterCIDR is OpenShift's usual hybridClusterNetwork.
const DefaultHybridClusterCIDR = "10.132.0.0/14"

// PartsOptions configures RunParts.
type PartsOptions struct {
	// ClusterCIDR is the IPv4 hybrid cluster network each Windows node
	// gets a distinct /24 of (default DefaultHybridClusterCIDR).
	ClusterCIDR string
	// Nodes are node names the OVN master annotates whatever their labels;
	// nodes labelled kubernetes.io/os=windows are always annotated.
	Nodes []string
	// NoSigner, NoOVNMaster and NoOVNIdentity leave a part out, for a test
	// that plays it by hand. The signer is also left out of a cluster that
	// runs the real one (WithControllerManager).
	NoSigner, NoOVNMaster, NoOVNIdentity bool
}

// PartEvent is one thing a part did.
type PartEvent struct {
	Time   time.Time
	Part   string // PartCSRSigner, PartOVNMaster or PartOVNIdentity
	Object string // the CSR or Node name
	// Detail is the CSR's signer name, the node's subnet or the verdict.
	Detail string
}

// signedSigners are the signers whose CSRs the signer part issues: the
// kubelet's two and the API server client signer (OVN-Kubernetes' node
// identity).
var signedSigners = []string{certificatesv1.KubeAPIServerClientKubeletSignerName, certificatesv1.KubeletServingSignerName,
	certificatesv1.KubeAPIServerClientSignerName}

// PartEvents returns what the parts have done so far, oldest first.
func (c *Cluster) PartEvents() []PartEvent {
	c.partsMu.Lock()
	defer c.partsMu.Unlock()
	return slices.Clone(c.partEvents)
}

func (c *Cluster) record(e PartEvent) {
	e.Time = time.Now()
	c.partsMu.Lock()
	c.partEvents = append(c.partEvents, e)
	c.partsMu.Unlock()
}

// RunParts plays, until ctx ends, the controllers a node join waits for
// and that this test bed lacks: the CSR signer (unless kube-controller-manager
// runs, whose signer does it) (it issues every approved, unsigned CSR of
// the kubelet client and serving signers and the API server client signer,
// never one that is pending or denied), the OVN-Kubernetes master (it
// annotates each Windows node, once, with a distinct /24 of the hybrid
// cluster network) and OVN-Kubernetes' identity approver (it approves or
// denies system:ovn-node:<node> CSRs by ovnIdentityVerdict, and grants
// group system:ovn-nodes its RBAC). They are stand-ins, logged through the
// cluster's logf as such and recorded for PartEvents. Approving kubelet
// CSRs stays with the test or wsu. Only one RunParts may run at a time; it
// returns nil when ctx ends.
func (c *Cluster) RunParts(ctx context.Context, opts PartsOptions) error {
	c.partsMu.Lock()
	if c.partsRunning {
		c.partsMu.Unlock()
		return errors.New("kubetest: RunParts is already running on this cluster")
	}
	c.partsRunning = true
	c.partsMu.Unlock()
	defer func() {
		c.partsMu.Lock()
		c.partsRunning = false
		c.partsMu.Unlock()
	}()

	var ovn *ovnMaster
	if !opts.NoOVNMaster {
		cidr := opts.ClusterCIDR
		if cidr == "" {
			cidr = DefaultHybridClusterCIDR
		}
		p, err := netip.ParsePrefix(cidr)
		if err != nil || !p.Addr().Is4() || p.Bits() > 24 || p.Masked() != p {
			return fmt.Errorf("kubetest: cluster CIDR %q is not an IPv4 network of /24 or larger", cidr)
		}
		ovn = &ovnMaster{c: c, cidr: p, names: opts.Nodes, assigned: map[string]netip.Prefix{}}
		if err := c.publishOVNConfig(ctx, cidr); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactory(c.Client, 0)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer factory.Shutdown()
	csrs := factory.Certificates().V1().CertificateSigningRequests().Informer()
	if !opts.NoSigner && !c.HasControllerManager() {
		q := newQueue()
		if err := watchNames(csrs, q, nil); err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); work(ctx, q, c.signIfApproved) }()
	}
	if !opts.NoOVNIdentity {
		if err := c.ensureOVNNodeRBAC(ctx); err != nil {
			return err
		}
		q := newQueue()
		if err := watchNames(csrs, q, nil); err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); work(ctx, q, c.approveOVNIdentity) }()
	}
	if ovn != nil {
		nodes := factory.Core().V1().Nodes()
		ovn.lister = nodes.Lister()
		q := newQueue()
		if err := watchNames(nodes.Informer(), q, ovn.forget); err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); work(ctx, q, ovn.sync) }()
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	<-ctx.Done()
	return nil
}

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	// Quick retries: a conflict here resolves in milliseconds.
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](20*time.Millisecond, 2*time.Second))
}

// watchNames queues the name of every object the informer sees change;
// deleted is told of deletions.
func watchNames(inf cache.SharedIndexInformer, q workqueue.TypedRateLimitingInterface[string], deleted func(name string)) error {
	name := func(obj any) string {
		if m, err := meta(obj); err == nil {
			return m.GetName()
		}
		return ""
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { q.Add(name(obj)) },
		UpdateFunc: func(_, obj any) { q.Add(name(obj)) },
		DeleteFunc: func(obj any) {
			if n := name(obj); n != "" && deleted != nil {
				deleted(n)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	return nil
}

func meta(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("kubetest: %T is not an object", obj)
	}
	return m, nil
}

// work runs sync for each queued name until ctx ends, retrying failures.
func work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) {
	go func() { <-ctx.Done(); q.ShutDown() }()
	for {
		name, quit := q.Get()
		if quit {
			return
		}
		if err := sync(ctx, name); err != nil && ctx.Err() == nil {
			q.AddRateLimited(name)
		} else {
			q.Forget(name)
		}
		q.Done(name)
	}
}

// signIfApproved issues a kubelet CSR's certificate once it is approved.
// It reads the CSR afresh and writes with that version, so a CSR is never
// signed twice.
func (c *Cluster) signIfApproved(ctx context.Context, name string) error {
	csr, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !slices.Contains(signedSigners, csr.Spec.SignerName) || len(csr.Status.Certificate) > 0 {
		return nil
	}
	for _, cond := range csr.Status.Conditions {
		if cond.Status == corev1.ConditionTrue && (cond.Type == certificatesv1.CertificateDenied || cond.Type == certificatesv1.CertificateFailed) {
			return nil
		}
	}
	if !slices.ContainsFunc(csr.Status.Conditions, func(cond certificatesv1.CertificateSigningRequestCondition) bool {
		return cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue
	}) {
		return nil
	}
	if _, err := c.sign(ctx, csr); err != nil {
		if !apierrors.IsConflict(err) {
			c.logf("kubetest: as the CSR signer: %v (retrying)", err)
		}
		return err
	}
	c.record(PartEvent{Part: PartCSRSigner, Object: name, Detail: csr.Spec.SignerName})
	return nil
}

// ovnMaster allocates hybrid overlay subnets. One worker runs sync, so
// allocation needs no lock; assigned covers patches the lister has not
// seen yet and keeps a node's subnet if its annotation is removed.
type ovnMaster struct {
	c      *Cluster
	cidr   netip.Prefix
	names  []string
	lister listerscorev1.NodeLister

	mu       sync.Mutex // assigned is also touched by forget
	assigned map[string]netip.Prefix
}

func (o *ovnMaster) forget(name string) {
	o.mu.Lock()
	delete(o.assigned, name)
	o.mu.Unlock()
}

func (o *ovnMaster) wants(n *corev1.Node) bool {
	return n.Labels[corev1.LabelOSStable] == "windows" || slices.Contains(o.names, n.Name)
}

func (o *ovnMaster) sync(ctx context.Context, name string) error {
	n, err := o.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !o.wants(n) || n.Annotations[HybridOverlaySubnetAnnotation] != "" {
		return nil
	}
	// The lister may not have seen this part's own patch yet: ask afresh
	// before annotating, so a node is annotated once.
	n, err = o.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || n.Annotations[HybridOverlaySubnetAnnotation] != "" {
		return err
	}
	subnet, err := o.allocate(name)
	if err != nil {
		o.c.logf("kubetest: as the OVN-Kubernetes master: node %s: %v", name, err)
		return err
	}
	if err := o.c.AnnotateNode(ctx, name, HybridOverlaySubnetAnnotation, subnet.String()); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	o.c.record(PartEvent{Part: PartOVNMaster, Object: name, Detail: subnet.String()})
	return nil
}

// allocate returns name's subnet: the one it had, else the lowest /24 no
// other node holds.
func (o *ovnMaster) allocate(name string) (netip.Prefix, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p, ok := o.assigned[name]; ok {
		return p, nil
	}
	used := map[netip.Prefix]bool{}
	for _, p := range o.assigned {
		used[p] = true
	}
	nodes, err := o.lister.List(labels.Everything())
	if err != nil {
		return netip.Prefix{}, err
	}
	for _, n := range nodes {
		if p, err := netip.ParsePrefix(n.Annotations[HybridOverlaySubnetAnnotation]); err == nil {
			used[p.Masked()] = true
		}
	}
	b := o.cidr.Addr().As4()
	base := binary.BigEndian.Uint32(b[:])
	for i := uint32(0); i < 1<<(24-o.cidr.Bits()); i++ {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], base+i<<8)
		p := netip.PrefixFrom(netip.AddrFrom4(a), 24)
		if !used[p] {
			o.assigned[name] = p
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("hybrid cluster network %s has no free /24 left", o.cidr)
}
