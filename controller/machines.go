package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// MachineReconciler turns the Windows Machines of OpenShift's Machine API
// (machine.openshift.io/v1beta1, labelled machine.openshift.io/os-id:
// Windows, as WMCO takes them) into WindowsInstances it owns, labelled
// wsu.dev/source=machine: the path of a cloud user of WMCO, whose
// MachineSets make the Windows VMs (user data windows-user-data,
// userdatasecret.go) and whose autoscaler scales them.
//
// A Machine becomes an instance once it is Provisioned (status.phase
// Provisioned or Running) with an InternalIP address: named as the
// Machine, its address that IP, its username the platform's (capi on
// Azure, Administrator elsewhere, as WMCO) unless the Machine's
// wsu.dev/username annotation or the controller's --machine-username says
// otherwise. The instance carries the Machine (annotation wsu.dev/machine,
// namespace/name) and its providerID (wsu.dev/provider-id); its join gives
// them to the Node the way machine-api's nodelink controller links a Node
// to its Machine (spec.providerID, annotation machine.openshift.io/machine),
// so MachineHealthChecks and the cluster autoscaler see the Node as the
// Machine's. From then on the instance is kept joined like any other: a
// Running Machine whose Node lacks wsu's version annotation is configured;
// a Machine whose host's key went stale, or whose host refuses the key, is
// replaced rather than rotated (machinereplace.go).
//
// A Machine deleted or being deleted deletes its instance, whose finalizer
// drains and releases its Node under the rollout limit (the path of a BYOH
// entry taken out of the ConfigMap); the VM is the Machine API's to delete.
// A Machine without the Windows label is never read (the cache holds only
// labelled Machines), so a Linux Machine is never touched. Machines are
// watched only where the cluster serves the kind (the RESTMapper, at
// start), in a cache of their own, unstructured: no typed Machine API in
// wsu's dependencies. While WMCO's operator runs, which configures the
// Machines itself, nothing is done (wmco.go).
//
// The instances are in another namespace than the Machines, so they carry
// no owner reference (the garbage collector would take a reference across
// namespaces for a missing owner and delete them), only their labels and
// annotations.
type MachineReconciler struct {
	Client client.Client
	// Machines reads the Windows Machines (the machine cache).
	Machines client.Reader
	// Reader reads uncached (the uninstall check); nil: Client.
	Reader            client.Reader
	Events            record.EventRecorder
	InstanceNamespace string
	// Username overrides the platform's username for every Machine (its
	// own wsu.dev/username annotation wins); "": the platform's.
	Username string
	// DefaultApproval is a new instance's spec.approval.
	DefaultApproval wsuv1.Approval
	// WMCONamespace is where WMCO's operator would run; "" turns the
	// check off.
	WMCONamespace string
}

// Machine API names.
const (
	// MachineNamespace is where OpenShift's Machine API keeps Machines.
	MachineNamespace = "openshift-machine-api"
	// MachineOSIDLabel marks a Windows Machine (value Windows), as WMCO
	// reads it.
	MachineOSIDLabel = "machine.openshift.io/os-id"
	// NodeMachineAnnotation links a Node to its Machine (namespace/name),
	// as machine-api's nodelink controller writes it.
	NodeMachineAnnotation = "machine.openshift.io/machine"
	// InstanceMachineAnnotation is the Machine (namespace/name) of an
	// instance made from one.
	InstanceMachineAnnotation = "wsu.dev/machine"
	// InstanceProviderIDAnnotation is that Machine's spec.providerID.
	InstanceProviderIDAnnotation = "wsu.dev/provider-id"
	// MachineUsernameAnnotation on a Machine overrides the platform's
	// username for its host.
	MachineUsernameAnnotation = "wsu.dev/username"
)

// MachineGVK is the Machine API's Machine.
var MachineGVK = schema.GroupVersionKind{Group: "machine.openshift.io", Version: "v1beta1", Kind: "Machine"}

// The Machine reconciler's rights: read the Machines of
// openshift-machine-api (its cache lists and watches the Windows ones).
// +kubebuilder:rbac:groups=machine.openshift.io,namespace=openshift-machine-api,resources=machines,verbs=get;list;watch

func machineObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(MachineGVK)
	return u
}

// windowsMachines selects the Machines the controller reads.
func windowsMachines() labels.Selector {
	return labels.SelectorFromSet(labels.Set{MachineOSIDLabel: "Windows"})
}

// setupMachines registers the Machine reconciler when the cluster serves
// Machines.
func setupMachines(mgr ctrl.Manager, o Options) error {
	ok, err := served(mgr.GetRESTMapper(), MachineGVK)
	if err != nil || !ok {
		return err
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{machineObject(): {
			Namespaces: map[string]cache.Config{o.MachineNamespace: {}}, Label: windowsMachines()}}})
	if err != nil {
		return fmt.Errorf("controller: machine cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return err
	}
	r := &MachineReconciler{Client: mgr.GetClient(), Machines: c, Reader: mgr.GetAPIReader(), Events: eventRecorder(mgr),
		InstanceNamespace: o.Namespace, Username: o.MachineUsername, DefaultApproval: o.DefaultApproval}
	if o.checksWMCO() {
		r.WMCONamespace = o.BYOHNamespace
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("machines").
		WatchesRawSource(source.Kind[client.Object](c, machineObject(), &handler.EnqueueRequestForObject{})).
		Watches(&wsuv1.WindowsInstance{}, machineInstanceToMachine()).
		Complete(r)
}

// machineInstanceToMachine wakes a Machine's reconcile when its instance
// changes or goes (and, at start, for every instance: a Machine deleted
// while the controller was down is found gone).
func machineInstanceToMachine() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		key, ok := instanceMachine(obj)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: key}}
	})
}

// instanceMachine is the Machine of an instance made from one.
func instanceMachine(obj client.Object) (types.NamespacedName, bool) {
	if obj.GetLabels()[wsuv1.SourceLabel] != wsuv1.SourceMachine {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(obj.GetAnnotations()[InstanceMachineAnnotation], "/")
	if !ok || ns == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// Reconcile implements reconcile.Reconciler for one Machine.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.WMCONamespace != "" {
		if running, err := wmcoRunning(ctx, r.Client, r.WMCONamespace); running || err != nil {
			return ctrl.Result{}, err
		}
	}
	m := machineObject()
	err := r.Machines.Get(ctx, req.NamespacedName, m)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.release(ctx, req.NamespacedName, machineGone)
	case err != nil:
		return ctrl.Result{}, err
	case m.GetDeletionTimestamp() != nil:
		return ctrl.Result{}, r.release(ctx, req.NamespacedName, machineDeleting)
	case m.GetLabels()[MachineOSIDLabel] != "Windows":
		return ctrl.Result{}, nil
	}
	want, ready := r.instance(m)
	if !ready {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.ensure(ctx, m, want)
}

// provisionedPhases are the Machine phases whose VM exists with its
// addresses.
var provisionedPhases = []string{"Provisioned", "Running"}

// instance is the WindowsInstance of Machine m; ready is false until m is
// provisioned with an InternalIP.
func (r *MachineReconciler) instance(m *unstructured.Unstructured) (*wsuv1.WindowsInstance, bool) {
	phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
	address := machineAddress(m)
	if !slices.Contains(provisionedPhases, phase) || address == "" {
		return nil, false
	}
	providerID, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
	return &wsuv1.WindowsInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: m.GetName(), Namespace: r.InstanceNamespace,
			Labels: map[string]string{wsuv1.SourceLabel: wsuv1.SourceMachine},
			Annotations: map[string]string{
				InstanceMachineAnnotation:    m.GetNamespace() + "/" + m.GetName(),
				InstanceProviderIDAnnotation: providerID,
			},
		},
		Spec: wsuv1.WindowsInstanceSpec{Address: address, Username: r.username(m)},
	}, true
}

// machineAddress is m's first InternalIP.
func machineAddress(m *unstructured.Unstructured) string {
	addrs, _, _ := unstructured.NestedSlice(m.Object, "status", "addresses")
	for _, a := range addrs {
		am, ok := a.(map[string]any)
		if ok && am["type"] == string(corev1.NodeInternalIP) {
			if s, ok := am["address"].(string); ok && s != "" {
				return s
			}
		}
	}
	return ""
}

// Usernames of the platforms' Windows images, as WMCO logs in.
const (
	AzureUsername   = "capi"
	DefaultUsername = "Administrator"
)

// username is the account of m's host: its annotation, else the
// controller's, else its platform's.
func (r *MachineReconciler) username(m *unstructured.Unstructured) string {
	if u := m.GetAnnotations()[MachineUsernameAnnotation]; u != "" {
		return u
	}
	if r.Username != "" {
		return r.Username
	}
	if machinePlatform(m) == "Azure" {
		return AzureUsername
	}
	return DefaultUsername
}

// machinePlatform is m's cloud, from its providerSpec's kind
// (AzureMachineProviderSpec, AWSMachineProviderConfig, ...), else its
// providerID's scheme (azure://...).
func machinePlatform(m *unstructured.Unstructured) string {
	kind, _, _ := unstructured.NestedString(m.Object, "spec", "providerSpec", "value", "kind")
	providerID, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
	if strings.HasPrefix(kind, "Azure") || strings.HasPrefix(providerID, "azure://") {
		return "Azure"
	}
	return ""
}

// ensure creates m's instance, or brings an existing one's address,
// username and Machine annotations in line; the rest of its spec is the
// admin's.
func (r *MachineReconciler) ensure(ctx context.Context, m *unstructured.Unstructured, want *wsuv1.WindowsInstance) error {
	cur := &wsuv1.WindowsInstance{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		want.Spec.Approval = r.DefaultApproval
		return client.IgnoreAlreadyExists(r.Client.Create(ctx, want))
	}
	if err != nil {
		return err
	}
	if cur.Labels[wsuv1.SourceLabel] != wsuv1.SourceMachine || cur.Annotations[InstanceMachineAnnotation] != want.Annotations[InstanceMachineAnnotation] {
		if r.Events != nil {
			r.Events.Eventf(m, corev1.EventTypeWarning, ReasonMachineConflict,
				"a WindowsInstance %s/%s not made from this Machine exists; the Machine is left alone", cur.Namespace, cur.Name)
		}
		return nil
	}
	if cur.Spec.Address == want.Spec.Address && cur.Spec.Username == want.Spec.Username &&
		cur.Annotations[InstanceProviderIDAnnotation] == want.Annotations[InstanceProviderIDAnnotation] {
		return nil
	}
	orig := cur.DeepCopy()
	cur.Spec.Address, cur.Spec.Username = want.Spec.Address, want.Spec.Username
	cur.Annotations[InstanceProviderIDAnnotation] = want.Annotations[InstanceProviderIDAnnotation]
	return r.Client.Patch(ctx, cur, client.MergeFrom(orig))
}

// ReasonMachineConflict: a Machine's name is taken by an instance of
// another source.
const ReasonMachineConflict = "MachineConflict"

// Why a Machine's instance is released.
const (
	machineGone     = "is gone"
	machineDeleting = "is being deleted"
)

// release deletes the instance of a Machine that is gone or going (its
// finalizer drains and releases the Node), unless wsu is being
// uninstalled. Once the Machine is gone its VM is too (the machine
// controller lets a Machine go only after its VM and Node), so an
// instance whose remove failed is forgotten (forgetGone).
func (r *MachineReconciler) release(ctx context.Context, machine types.NamespacedName, why string) error {
	wi := &wsuv1.WindowsInstance{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.InstanceNamespace, Name: machine.Name}, wi)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if got, ok := instanceMachine(wi); !ok || got != machine {
		return nil
	}
	if !wi.DeletionTimestamp.IsZero() {
		if why == machineGone {
			return r.forgetGone(ctx, wi)
		}
		return nil
	}
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	if gone, reason, err := uninstalling(ctx, reader, r.InstanceNamespace); gone || err != nil {
		if gone {
			log.FromContext(ctx).Info("wsu is being uninstalled: the Machine's instance is left alone", "why", reason)
		}
		return err
	}
	log.FromContext(ctx).Info("the Machine "+why+": removing its instance", "instance", wi.Name)
	return client.IgnoreNotFound(r.Client.Delete(ctx, wi))
}

// forgetGone annotates wsu.dev/forget=true the instance of a Machine
// that is gone once the instance's remove has failed: its host went with
// the Machine's VM, so remove could never reach it (it would retry for
// ever); the instance's finalizer then lets it go without remove,
// deleting its Node by UID if that is still there. A remove not yet
// tried is left to run (a host still up is deconfigured).
func (r *MachineReconciler) forgetGone(ctx context.Context, wi *wsuv1.WindowsInstance) error {
	failed := wi.Status.Phase == wsuv1.PhaseRemoving && wi.Status.Failures > 0
	if !failed || wi.Annotations[wsuv1.ForgetAnnotation] == "true" || !slices.Contains(wi.Finalizers, wsuv1.Finalizer) {
		return nil
	}
	log.FromContext(ctx).Info("the Machine is gone with its VM: its instance's removal is forgotten", "instance", wi.Name)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+wsuv1.ForgetAnnotation+`":"true"}}}`))
	return client.IgnoreNotFound(r.Client.Patch(ctx, wi, patch))
}

// machineVars are the join's variables that link the Node of an instance
// made from a Machine to that Machine, as machine-api's nodelink
// controller does: its providerID and its namespace/name.
func machineVars(wi *wsuv1.WindowsInstance, playbook string) []string {
	key, ok := instanceMachine(wi)
	if !ok || playbook != "wsu:join.hcl" {
		return nil
	}
	vars := []string{"machine=" + key.String()}
	if id := wi.Annotations[InstanceProviderIDAnnotation]; id != "" {
		vars = append(vars, "provider_id="+id)
	}
	return vars
}
