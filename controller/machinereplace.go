package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
)

// Cattle, not pets: a host made from a Machine (wsu.dev/source=machine,
// machines.go) is not rotated to a new key nor nursed through a lost one;
// its Machine is deleted and its MachineSet makes a new one, whose VM
// authorises the key of the user data (userdatasecret.go), as WMCO does.
// Two things replace a Machine:
//
//   - its key went stale: the key the instance logs in with (its recorded
//     fingerprint) is not the key the user data now authorises (the key
//     Secret's KEY.new while a rotation is under way, else KEY) — an admin
//     added a new key, swapped or replaced the key in place;
//   - the host refuses every key of the Secret (an SSH authentication
//     failure after the auth retry window and the other key, tryOtherKey).
//
// A BYOH host, which no MachineSet can make anew, keeps rotate-key.
//
// A replacement takes a rollout slot (rollout.go) and marks the Node out
// of service ("remove") before the Machine is deleted, so the mark counts
// against maxUnavailable until the Node is gone: Machines are replaced one
// at a time as maxUnavailable allows. The instance is annotated
// wsu.dev/forget=true first: its VM is the Machine API's to delete, so
// removing it deletes the Node without running remove on a host that may
// refuse the login. A replacement runs nothing on the host and so has no
// plan to approve: it is not held to approval: Manual (the new Machine's
// instance is, for its join).

// The instance controller may delete Machines (a replacement), and reads
// their MachineSets' replicas (machineSetShort).
// +kubebuilder:rbac:groups=machine.openshift.io,namespace=openshift-machine-api,resources=machines,verbs=delete
// +kubebuilder:rbac:groups=machine.openshift.io,namespace=openshift-machine-api,resources=machinesets,verbs=get

// Reasons of a replacement: the MachineReplaced event, and KeyRotated's
// reason while it waits for a slot or is under way.
const (
	ReasonMachineReplaced   = "MachineReplaced"
	ReasonMachineReplacing  = "MachineReplacing"
	ReasonMachineReplaceErr = "MachineReplaceFailed"
)

// isMachineInstance says whether wi was made from a Machine.
func isMachineInstance(wi *wsuv1.WindowsInstance) bool {
	_, ok := instanceMachine(wi)
	return ok
}

// userDataFP is the fingerprint of the key the user data authorises on a
// new Machine: KEY.new while a rotation is under way, else KEY.
func (k instanceKeys) userDataFP() string {
	if k.next != "" {
		return k.nextFP
	}
	return k.currentFP
}

// machineKeyStale says a Machine instance logs in with a key new Machines
// no longer get. An instance that recorded none yet is not stale.
func machineKeyStale(wi *wsuv1.WindowsInstance, keys instanceKeys) bool {
	fp := wi.Status.Identity.KeyFingerprint
	return fp != "" && fp != keys.userDataFP()
}

// machineKeys is rotateKeyIfPending for a Machine instance: a first login
// records the user data's key (the key its VM was made with); a stale key
// replaces the Machine. done: converge stops here.
func (r *InstanceReconciler) machineKeys(ctx context.Context, orig, wi *wsuv1.WindowsInstance, keys instanceKeys) (ctrl.Result, bool, error) {
	if wi.Status.Identity.KeyFingerprint == "" {
		wi.Status.Identity.KeyFingerprint = keys.userDataFP()
	}
	if !machineKeyStale(wi, keys) {
		setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionTrue, ReasonKeyInUse,
			fmt.Sprintf("logging in with %s", wi.Status.Identity.KeyFingerprint))
		return ctrl.Result{}, false, nil
	}
	res, err := r.replaceMachine(ctx, orig, wi, fmt.Sprintf("the host authorises %s, but new Machines get %s from the Secret %s",
		wi.Status.Identity.KeyFingerprint, keys.userDataFP(), keys.secret))
	return res, true, err
}

// replaceIfLoginRefused replaces the Machine of an instance whose host
// refused every key (out, after tryOtherKey). done: the pass stops here.
func (r *InstanceReconciler) replaceIfLoginRefused(ctx context.Context, orig, wi *wsuv1.WindowsInstance, out run.Outcome) (ctrl.Result, bool, error) {
	if !isMachineInstance(wi) || !loginRefused(out) {
		return ctrl.Result{}, false, nil
	}
	res, err := r.replaceMachine(ctx, orig, wi, "the host refuses the SSH key: "+run.Truncate(out.Message, 500))
	return res, true, err
}

// replaceMachine deletes wi's Machine under the rollout limit (why says
// what made it stale), after marking its Node out of service and its
// instance to be forgotten.
func (r *InstanceReconciler) replaceMachine(ctx context.Context, orig, wi *wsuv1.WindowsInstance, why string) (ctrl.Result, error) {
	machine, _ := instanceMachine(wi)
	if c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated); c != nil && c.Reason == ReasonMachineReplacing {
		return ctrl.Result{}, nil // deleted already; its instance goes with it (machines.go)
	}
	short, err := r.machineSetShort(ctx, machine)
	if err != nil {
		return ctrl.Result{}, err
	}
	if short != "" {
		setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionFalse, ReasonRolloutWait,
			fmt.Sprintf("the Machine %s is replaced once its MachineSet is back in service (%s): %s", machine, short, why))
		return r.done(ctx, orig, wi, wi.Status.Phase, r.Options.NodeReadyCheck)
	}
	ok, err := r.takeSlot(ctx, wi) // rollout.go
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ok {
		setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionFalse, ReasonRolloutWait,
			fmt.Sprintf("the Machine %s is replaced once maxUnavailable allows: %s", machine, why))
		return r.done(ctx, orig, wi, wi.Status.Phase, r.slotRecheck())
	}
	defer r.rollouts.release(wi)
	if err := r.markNode(ctx, wi, unavailableRemove); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.forgetOnRemoval(ctx, wi); err != nil {
		return ctrl.Result{}, err
	}
	m := machineObject()
	m.SetNamespace(machine.Namespace)
	m.SetName(machine.Name)
	if err := r.Client.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
		r.event(wi, corev1.EventTypeWarning, ReasonMachineReplaceErr, "deleting the Machine %s: %v", machine, err)
		return ctrl.Result{}, err
	}
	log.FromContext(ctx).Info("replacing the Machine", "machine", machine.String(), "why", why)
	r.event(wi, corev1.EventTypeNormal, ReasonMachineReplaced, "deleted the Machine %s for its MachineSet to make anew: %s", machine, why)
	setCondition(wi, wsuv1.ConditionKeyRotated, metav1.ConditionFalse, ReasonMachineReplacing,
		fmt.Sprintf("the Machine %s was deleted for its MachineSet to make anew: %s", machine, why))
	return r.done(ctx, orig, wi, wi.Status.Phase, 0)
}

// MachineSetGVK is the Machine API's MachineSet.
var MachineSetGVK = schema.GroupVersionKind{Group: "machine.openshift.io", Version: "v1beta1", Kind: "MachineSet"}

// machineSetShort says why machine's MachineSet cannot lose a Machine to
// a replacement now, "" when it can: as WMCO, a set's Machine is replaced
// only while its other Machines out of service — the set's replicas
// (but this one) not in service: not yet made, being deleted, or whose
// instance is not Joined with its Node Ready — are fewer than
// maxUnavailable (scaled to the replicas). So a replaced Machine's
// successor joins before the next one goes, and a set never has more
// than maxUnavailable Machines out of service for a key change. A
// Machine no MachineSet controls is not held. Read uncached: the
// manager's cache holds neither MachineSets nor Linux Machines.
func (r *InstanceReconciler) machineSetShort(ctx context.Context, machine types.NamespacedName) (string, error) {
	m := machineObject()
	if err := r.apiReader().Get(ctx, machine, m); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	ref := metav1.GetControllerOf(m)
	if ref == nil || ref.Kind != MachineSetGVK.Kind {
		return "", nil
	}
	set := &unstructured.Unstructured{}
	set.SetGroupVersionKind(MachineSetGVK)
	if err := r.apiReader().Get(ctx, types.NamespacedName{Namespace: machine.Namespace, Name: ref.Name}, set); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	replicas, found, _ := unstructured.NestedInt64(set.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	inService, err := r.machinesInService(ctx, machine, ref.UID)
	if err != nil {
		return "", err
	}
	limit, err := scaledMaxUnavailable(r.Options.MaxUnavailable, int(replicas))
	if err != nil {
		return "", err
	}
	if out := int(replicas) - 1 - inService; out >= max(limit, 1) {
		return fmt.Sprintf("%d of its other Machines out of service, maxUnavailable %d", out, max(limit, 1)), nil
	}
	return "", nil
}

// machinesInService counts the Machines of the MachineSet set but
// machine that are not being deleted and whose instance is Joined with
// its Node Ready.
func (r *InstanceReconciler) machinesInService(ctx context.Context, machine types.NamespacedName, set types.UID) (int, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(MachineGVK.GroupVersion().WithKind("MachineList"))
	if err := r.apiReader().List(ctx, list, client.InNamespace(machine.Namespace), client.MatchingLabelsSelector{Selector: windowsMachines()}); err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		m := &list.Items[i]
		ref := metav1.GetControllerOf(m)
		if m.GetName() == machine.Name || ref == nil || ref.UID != set || m.GetDeletionTimestamp() != nil {
			continue
		}
		wi := &wsuv1.WindowsInstance{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Options.Namespace, Name: m.GetName()}, wi)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined) && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady) {
			n++
		}
	}
	return n, nil
}

// forgetOnRemoval annotates wi wsu.dev/forget=true: its removal deletes
// the Node without running remove on the host.
func (r *InstanceReconciler) forgetOnRemoval(ctx context.Context, wi *wsuv1.WindowsInstance) error {
	if wi.Annotations[wsuv1.ForgetAnnotation] == "true" {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+wsuv1.ForgetAnnotation+`":"true"}}}`))
	cur := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Namespace: wi.Namespace, Name: wi.Name}}
	return r.Client.Patch(ctx, cur, patch)
}
