package controller

// OLM holds an operator's upgrade back while the operator says it is not
// Upgradeable: the condition Upgradeable=False in spec.conditions of the
// OperatorCondition (operators.coreos.com/v2) named after the CSV, whose
// name OLM puts in the Deployment's OPERATOR_CONDITION_NAME. wsu says so
// while any instance of its namespace is Upgrading or Removing, so a new
// controller never replaces one mid-rollout; True otherwise. OLM grants the
// operator's ServiceAccount get, update and patch on that one object (a
// Role it makes, by name), and the controller needs nothing more: the
// object is read and written directly, never cached or listed. Without
// OPERATOR_CONDITION_NAME (kustomize, Helm) nothing of this runs.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// OperatorConditionGVK is OLM's OperatorCondition.
var OperatorConditionGVK = schema.GroupVersionKind{Group: "operators.coreos.com", Version: "v2", Kind: "OperatorCondition"}

// ConditionUpgradeable is OLM's condition type, and its reasons here.
const (
	ConditionUpgradeable          = "Upgradeable"
	ReasonInstancesInTransition   = "InstancesInTransition"
	ReasonNoInstancesInTransition = "NoInstancesInTransition"
	OperatorConditionNameEnv      = "OPERATOR_CONDITION_NAME"
)

// UpgradeableReconciler writes Upgradeable into the OperatorCondition
// Namespace/Name from the instances of Namespace.
type UpgradeableReconciler struct {
	// Instances lists the WindowsInstances (the manager's cache).
	Instances client.Reader
	// Conditions gets and updates the OperatorCondition (unstructured:
	// read from the API server, not cached).
	Conditions client.Client
	Namespace  string
	Name       string
}

// Reconcile sets the condition; one key stands for the whole namespace.
func (r *UpgradeableReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var list wsuv1.WindowsInstanceList
	if err := r.Instances.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	oc := &unstructured.Unstructured{}
	oc.SetGroupVersionKind(OperatorConditionGVK)
	if err := r.Conditions.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Name}, oc); err != nil {
		return reconcile.Result{}, fmt.Errorf("OperatorCondition %s/%s: %w", r.Namespace, r.Name, err)
	}
	raw, _, err := unstructured.NestedSlice(oc.Object, "spec", "conditions")
	if err != nil {
		return reconcile.Result{}, err
	}
	var conds []metav1.Condition
	if err := convert(raw, &conds); err != nil {
		return reconcile.Result{}, err
	}
	if !meta.SetStatusCondition(&conds, upgradeable(list.Items)) {
		return reconcile.Result{}, nil
	}
	var out []any
	if err := convert(conds, &out); err != nil {
		return reconcile.Result{}, err
	}
	if err := unstructured.SetNestedSlice(oc.Object, out, "spec", "conditions"); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.Conditions.Update(ctx, oc)
}

func convert(from, to any) error {
	data, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, to)
}

// upgradeable is False, naming them, while instances upgrade or are
// removed.
func upgradeable(items []wsuv1.WindowsInstance) metav1.Condition {
	var busy []string
	for _, wi := range items {
		if wi.Status.Phase == wsuv1.PhaseUpgrading || wi.Status.Phase == wsuv1.PhaseRemoving {
			busy = append(busy, wi.Name+" ("+wi.Status.Phase+")")
		}
	}
	if len(busy) == 0 {
		return metav1.Condition{Type: ConditionUpgradeable, Status: metav1.ConditionTrue,
			Reason: ReasonNoInstancesInTransition, Message: "no WindowsInstance is upgrading or being removed"}
	}
	sort.Strings(busy)
	return metav1.Condition{Type: ConditionUpgradeable, Status: metav1.ConditionFalse,
		Reason:  ReasonInstancesInTransition,
		Message: "WindowsInstances upgrading or being removed: " + strings.Join(busy, ", ")}
}

// setupUpgradeable reports Upgradeable when OLM named an OperatorCondition:
// every change of an instance reconciles the one key.
func setupUpgradeable(mgr ctrl.Manager, o Options) error {
	if o.OperatorCondition == "" {
		return nil
	}
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.Namespace, Name: o.OperatorCondition}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("upgradeable").
		Watches(&wsuv1.WindowsInstance{}, handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
			return []reconcile.Request{key}
		})).
		Complete(&UpgradeableReconciler{Instances: mgr.GetClient(), Conditions: mgr.GetClient(), Namespace: o.Namespace, Name: o.OperatorCondition})
}
