//go:build linux

// Package machineapi is a stand-in for OpenShift's Machine API and the
// cloud behind it, for tests against a real API server serving the Machine
// API's real CRDs (kubetest.InstallMachineAPI). It is not the Machine API:
// it plays, visibly and in this process, the parts of machine-api-operator
// a Windows MachineSet's life goes through, as its controllers do them
// (pkg/controller/machineset, machine, nodelink at the version
// kubetest.MachineAPIVersion names), so wsu's Machine path is tested
// against the objects a real cluster would show it:
//
//   - MachineSets (namespace openshift-machine-api): each keeps
//     spec.replicas Machines it controls, made from its template as the
//     MachineSet controller makes them (generateName NAME-, the template's
//     labels and annotations, its spec with the providerSpec copied, a
//     controller owner reference to the set); a set scaled down deletes
//     Machines (those without a Node first, then the newest);
//   - Machines: the machine controller's finalizer
//     (machine.machine.openshift.io) is added; phase Provisioning, then the
//     Cloud creates the VM: spec.providerID, status.addresses (an
//     InternalIP) and phase Provisioned, and Running once linked to its
//     Node. A Machine being deleted goes Deleting, its Node is drained
//     (cordoned, its pods evicted but DaemonSets' and mirror pods; not when
//     annotated machine.openshift.io/exclude-node-draining), the Drained
//     condition set, the VM deleted, the Node deleted, and only then is the
//     finalizer removed;
//   - nodelink: a Node is linked to the Machine of the same providerID,
//     else of a shared InternalIP (Machine status.nodeRef). The real
//     nodelink also annotates the Node machine.openshift.io/machine:
//     NAMESPACE/NAME; wsu's join writes that annotation itself (its
//     machine variable), so the stand-in leaves it to the join and a test
//     sees whether the join wrote it.
//
// Its limits, where it is not the Machine API:
//
//   - no validation (the cluster-api-cluster label, the set's selector
//     against its template), no delete policy annotations, no lifecycle
//     hooks, no MachineHealthChecks, no Failed phase, no
//     authoritativeAPI migration, no copying of the Machine's spec labels,
//     annotations or taints to its Node; a MachineSet's status carries
//     replicas and observedGeneration only;
//   - the cloud (Cloud) creates a VM at once; SimCloud's VMs are the
//     harness's simulated hosts (test/harness), handed out one per Windows
//     Machine and never reused. "Booting" one runs only the key step of
//     its user data (the windows-user-data script's authorised key is
//     authorised on the test sshd); the hosts share that sshd and its one
//     account, so a key one VM's user data authorises, every VM accepts.
//     Deleting a VM powers its simulated host off (its services end), but
//     the host stays reachable through the shared sshd, where a deleted
//     cloud VM would not be. A Linux Machine's VM is an address only (in
//     127.0.200.0/24, nothing listening), with no Node.
//
// The reconcilers run in a controller-runtime manager of their own, as the
// cluster's admin, unstructured (no typed Machine API in wsu's
// dependencies).
package machineapi

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Machine API names, as machine-api-operator spells them.
const (
	Namespace = "openshift-machine-api"
	// Finalizer is the machine controller's, held until the VM and the
	// Node are gone.
	Finalizer = "machine.machine.openshift.io"
	// ExcludeDrainAnnotation on a Machine skips the drain.
	ExcludeDrainAnnotation = "machine.openshift.io/exclude-node-draining"
	// OSIDLabel marks a Machine's OS (Windows).
	OSIDLabel = "machine.openshift.io/os-id"
)

// Machine phases.
const (
	PhaseProvisioning = "Provisioning"
	PhaseProvisioned  = "Provisioned"
	PhaseRunning      = "Running"
	PhaseDeleting     = "Deleting"
)

// The kinds, unstructured.
var (
	MachineGVK    = schema.GroupVersionKind{Group: "machine.openshift.io", Version: "v1beta1", Kind: "Machine"}
	MachineSetGVK = schema.GroupVersionKind{Group: "machine.openshift.io", Version: "v1beta1", Kind: "MachineSet"}
)

// NewObject is an empty object of gvk.
func NewObject(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// VM is what the cloud made for a Machine.
type VM struct {
	ProviderID string
	Address    string // its InternalIP
}

// Cloud makes and deletes the VMs of Machines.
type Cloud interface {
	// Create makes m's VM (m as the Machine API holds it: its labels and
	// providerSpec); an error leaves m Provisioning and is retried.
	Create(ctx context.Context, m *unstructured.Unstructured) (VM, error)
	// Delete deletes a VM Create made.
	Delete(ctx context.Context, vm VM) error
}

// StandIn is a running stand-in; Stop ends it.
type StandIn struct {
	client client.Client
	// reader reads uncached: a MachineSet counts its Machines from the
	// API server, never from a cache that has not seen the ones it just
	// made (the real controller's "expectations").
	reader client.Reader
	cloud  Cloud

	mu  sync.Mutex
	vms map[types.UID]VM

	cancel context.CancelFunc
	done   chan error
}

// Start runs the stand-in against the cluster of cfg (the admin's).
func Start(cfg *rest.Config, cloud Cloud) (*StandIn, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: &skip}})
	if err != nil {
		return nil, fmt.Errorf("machineapi: %w", err)
	}
	s := &StandIn{client: mgr.GetClient(), reader: mgr.GetAPIReader(), cloud: cloud, vms: map[types.UID]VM{}, done: make(chan error, 1)}
	if err := s.setup(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- mgr.Start(ctx) }()
	return s, nil
}

// Stop ends the stand-in and waits for it.
func (s *StandIn) Stop() error {
	s.cancel()
	return <-s.done
}

func (s *StandIn) setup(mgr ctrl.Manager) error {
	toSet := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if ref := metav1.GetControllerOf(o); ref != nil && ref.Kind == MachineSetGVK.Kind {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}}}
		}
		return nil
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("standin-machineset").
		For(NewObject(MachineSetGVK)).Watches(NewObject(MachineGVK), toSet).
		Complete(reconcile.Func(s.reconcileSet)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("standin-machine").
		For(NewObject(MachineGVK)).Complete(reconcile.Func(s.reconcileMachine)); err != nil {
		return err
	}
	allNodes := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		nodes := &corev1.NodeList{}
		if err := mgr.GetClient().List(ctx, nodes); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, n := range nodes.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).Named("standin-nodelink").
		For(&corev1.Node{}).Watches(NewObject(MachineGVK), allNodes).
		Complete(reconcile.Func(s.reconcileNode))
}

// retry is how soon a step waiting on the cluster (a drain) is tried
// again.
const retry = time.Second

// reconcileSet keeps a MachineSet's replicas.
func (s *StandIn) reconcileSet(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	set := NewObject(MachineSetGVK)
	if err := s.client.Get(ctx, req.NamespacedName, set); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if set.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	active, err := s.setMachines(ctx, set)
	if err != nil {
		return reconcile.Result{}, err
	}
	replicas, found, _ := unstructured.NestedInt64(set.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	for i := int64(len(active)); i < replicas; i++ {
		if err := s.client.Create(ctx, newMachine(set)); err != nil {
			return reconcile.Result{}, err
		}
	}
	if excess := int64(len(active)) - replicas; excess > 0 {
		for _, m := range deletionOrder(active)[:excess] {
			if err := s.client.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
		}
	}
	return reconcile.Result{}, s.setStatus(ctx, set, len(active))
}

// setMachines are the Machines set controls that are not being deleted.
func (s *StandIn) setMachines(ctx context.Context, set *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
	if err := s.reader.List(ctx, list, client.InNamespace(set.GetNamespace())); err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for i := range list.Items {
		m := &list.Items[i]
		if ref := metav1.GetControllerOf(m); ref != nil && ref.UID == set.GetUID() && m.GetDeletionTimestamp() == nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// newMachine is a Machine of set, as the MachineSet controller makes it.
func newMachine(set *unstructured.Unstructured) *unstructured.Unstructured {
	m := NewObject(MachineGVK)
	m.SetNamespace(set.GetNamespace())
	m.SetGenerateName(set.GetName() + "-")
	labels, _, _ := unstructured.NestedStringMap(set.Object, "spec", "template", "metadata", "labels")
	annotations, _, _ := unstructured.NestedStringMap(set.Object, "spec", "template", "metadata", "annotations")
	m.SetLabels(labels)
	m.SetAnnotations(annotations)
	if spec, ok, _ := unstructured.NestedMap(set.Object, "spec", "template", "spec"); ok {
		m.Object["spec"] = spec
	}
	yes := true
	m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: MachineSetGVK.GroupVersion().String(), Kind: MachineSetGVK.Kind,
		Name: set.GetName(), UID: set.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}})
	return m
}

// deletionOrder puts the Machines a scale-down deletes first: those not
// linked to a Node, then the newest.
func deletionOrder(ms []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := slices.Clone(ms)
	sort.SliceStable(out, func(i, j int) bool {
		li, lj := hasNode(out[i]), hasNode(out[j])
		if li != lj {
			return !li
		}
		return out[j].GetCreationTimestamp().Time.Before(out[i].GetCreationTimestamp().Time)
	})
	return out
}

func hasNode(m *unstructured.Unstructured) bool {
	name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
	return name != ""
}

func (s *StandIn) setStatus(ctx context.Context, set *unstructured.Unstructured, replicas int) error {
	cur, _, _ := unstructured.NestedInt64(set.Object, "status", "replicas")
	gen, _, _ := unstructured.NestedInt64(set.Object, "status", "observedGeneration")
	if cur == int64(replicas) && gen == set.GetGeneration() {
		return nil
	}
	_ = unstructured.SetNestedField(set.Object, int64(replicas), "status", "replicas")
	_ = unstructured.SetNestedField(set.Object, set.GetGeneration(), "status", "observedGeneration")
	return client.IgnoreNotFound(s.client.Status().Update(ctx, set))
}

// reconcileMachine is the machine controller: provisioning, and deletion
// under its finalizer.
func (s *StandIn) reconcileMachine(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	m := NewObject(MachineGVK)
	if err := s.client.Get(ctx, req.NamespacedName, m); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if m.GetDeletionTimestamp() != nil {
		return s.deleteMachine(ctx, m)
	}
	if !slices.Contains(m.GetFinalizers(), Finalizer) {
		m.SetFinalizers(append(m.GetFinalizers(), Finalizer))
		return reconcile.Result{}, s.client.Update(ctx, m)
	}
	phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
	if phase == "" {
		return reconcile.Result{}, s.setPhase(ctx, m, PhaseProvisioning)
	}
	if done, err := s.provision(ctx, m); !done || err != nil {
		return reconcile.Result{}, err
	}
	want := PhaseProvisioned
	if hasNode(m) {
		want = PhaseRunning
	}
	if phase == want {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, s.setPhase(ctx, m, want)
}

func (s *StandIn) vm(uid types.UID) (VM, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vm, ok := s.vms[uid]
	return vm, ok
}

// provision has the cloud make m's VM once, then gives m its
// providerID and address (phase Provisioned); done: m has both.
func (s *StandIn) provision(ctx context.Context, m *unstructured.Unstructured) (done bool, err error) {
	vm, made := s.vm(m.GetUID())
	if !made {
		if vm, err = s.cloud.Create(ctx, m); err != nil {
			return false, fmt.Errorf("machineapi: creating the VM of %s: %w", m.GetName(), err)
		}
		s.mu.Lock()
		s.vms[m.GetUID()] = vm
		s.mu.Unlock()
	}
	if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != vm.ProviderID {
		_ = unstructured.SetNestedField(m.Object, vm.ProviderID, "spec", "providerID")
		return false, client.IgnoreNotFound(s.client.Update(ctx, m))
	}
	if machineInternalIP(m) == vm.Address {
		return true, nil
	}
	_ = unstructured.SetNestedSlice(m.Object, []any{
		map[string]any{"type": string(corev1.NodeInternalIP), "address": vm.Address},
		map[string]any{"type": string(corev1.NodeInternalDNS), "address": m.GetName()},
	}, "status", "addresses")
	return false, s.setPhase(ctx, m, PhaseProvisioned)
}

func (s *StandIn) setPhase(ctx context.Context, m *unstructured.Unstructured, phase string) error {
	_ = unstructured.SetNestedField(m.Object, phase, "status", "phase")
	return client.IgnoreNotFound(s.client.Status().Update(ctx, m))
}

// deleteMachine is the machine controller's deletion: phase Deleting, the
// Node drained (the drain controller), the VM deleted, then the Node, then
// the finalizer removed.
func (s *StandIn) deleteMachine(ctx context.Context, m *unstructured.Unstructured) (reconcile.Result, error) {
	if !slices.Contains(m.GetFinalizers(), Finalizer) {
		return reconcile.Result{}, nil
	}
	if phase, _, _ := unstructured.NestedString(m.Object, "status", "phase"); phase != PhaseDeleting {
		return reconcile.Result{}, s.setPhase(ctx, m, PhaseDeleting)
	}
	node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
	if !drained(m) {
		_, exclude := m.GetAnnotations()[ExcludeDrainAnnotation]
		if node != "" && !exclude {
			if left, err := s.drain(ctx, node); err != nil || left > 0 {
				return reconcile.Result{RequeueAfter: retry}, err
			}
		}
		return reconcile.Result{}, s.setDrained(ctx, m)
	}
	if vm, ok := s.vm(m.GetUID()); ok {
		if err := s.cloud.Delete(ctx, vm); err != nil {
			return reconcile.Result{}, err
		}
		s.mu.Lock()
		delete(s.vms, m.GetUID())
		s.mu.Unlock()
	}
	if node != "" {
		err := s.client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		if client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	m.SetFinalizers(slices.DeleteFunc(m.GetFinalizers(), func(f string) bool { return f == Finalizer }))
	return reconcile.Result{}, client.IgnoreNotFound(s.client.Update(ctx, m))
}

// MachineDrained is the condition the drain controller sets.
const MachineDrained = "Drained"

func drained(m *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(m.Object, "status", "conditions")
	return slices.ContainsFunc(conds, func(c any) bool {
		cm, ok := c.(map[string]any)
		return ok && cm["type"] == MachineDrained && cm["status"] == string(corev1.ConditionTrue)
	})
}

func (s *StandIn) setDrained(ctx context.Context, m *unstructured.Unstructured) error {
	conds, _, _ := unstructured.NestedSlice(m.Object, "status", "conditions")
	conds = append(conds, map[string]any{"type": MachineDrained, "status": string(corev1.ConditionTrue),
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "message": "Drain finished successfully"})
	_ = unstructured.SetNestedSlice(m.Object, conds, "status", "conditions")
	return client.IgnoreNotFound(s.client.Status().Update(ctx, m))
}

// drain cordons node and evicts its pods but DaemonSets' and mirror
// pods; left is how many are still there.
func (s *StandIn) drain(ctx context.Context, node string) (left int, err error) {
	n := &corev1.Node{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
		return 0, client.IgnoreNotFound(err)
	}
	if !n.Spec.Unschedulable {
		orig := n.DeepCopy()
		n.Spec.Unschedulable = true
		if err := s.client.Patch(ctx, n, client.MergeFrom(orig)); err != nil {
			return 0, client.IgnoreNotFound(err)
		}
	}
	pods := &corev1.PodList{}
	if err := s.client.List(ctx, pods); err != nil {
		return 0, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName != node || daemonOrMirror(p) {
			continue
		}
		left++
		if p.DeletionTimestamp != nil {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		if err := s.client.SubResource("eviction").Create(ctx, p, ev); client.IgnoreNotFound(err) != nil && !apierrors.IsTooManyRequests(err) {
			return left, err
		}
	}
	return left, nil
}

func daemonOrMirror(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "DaemonSet"
}

// reconcileNode is nodelink: the Node's Machine gets its nodeRef.
func (s *StandIn) reconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	n := &corev1.Node{}
	if err := s.client.Get(ctx, req.NamespacedName, n); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if n.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	m, err := s.machineOf(ctx, n)
	if err != nil || m == nil {
		return reconcile.Result{}, err
	}
	if uid, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "uid"); uid != string(n.UID) {
		_ = unstructured.SetNestedMap(m.Object, map[string]any{"kind": "Node", "name": n.Name, "uid": string(n.UID)}, "status", "nodeRef")
		if err := s.client.Status().Update(ctx, m); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return reconcile.Result{}, nil
}

// machineOf is n's Machine: the one of its providerID, else of one of its
// InternalIPs; nil when none.
func (s *StandIn) machineOf(ctx context.Context, n *corev1.Node) (*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
	if err := s.client.List(ctx, list, client.InNamespace(Namespace)); err != nil {
		return nil, err
	}
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	var byIP *unstructured.Unstructured
	for i := range list.Items {
		m := &list.Items[i]
		if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id != "" && id == n.Spec.ProviderID {
			return m, nil
		}
		if byIP == nil && slices.Contains(ips, machineInternalIP(m)) {
			byIP = m
		}
	}
	return byIP, nil
}

func machineInternalIP(m *unstructured.Unstructured) string {
	addrs, _, _ := unstructured.NestedSlice(m.Object, "status", "addresses")
	for _, a := range addrs {
		if am, ok := a.(map[string]any); ok && am["type"] == string(corev1.NodeInternalIP) {
			s, _ := am["address"].(string)
			return s
		}
	}
	return ""
}
