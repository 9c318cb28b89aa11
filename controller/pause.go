package controller

import (
	"context"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// The global pause: an admin stops every run of the controller — joins,
// drift plans, upgrades, key rotations, removals — without stopping it,
// by setting key `paused: "true"` in the ConfigMap wsu-controller of the
// controller's namespace:
//
//	kubectl -n NS create configmap wsu-controller --from-literal=paused=true
//	kubectl -n NS patch configmap wsu-controller -p '{"data":{"paused":"false"}}'
//
// A ConfigMap rather than a flag, so it flips at run time, and one the
// controller already reads and watches in its namespace, so it needs no
// new right (a per-instance spec.paused is a pause of one instance only).
// While paused every instance shows phase Paused and nothing runs; the
// watches go on, and a change of the ConfigMap wakes every instance, so
// the controller resumes at once when the key is removed or set to false.
// A run already going finishes. Renewal CSRs are still judged (a node
// must not lose its certificates to a pause), and the BYOH ConfigMap still
// makes instances (a removed entry's instance waits, deleted, for the
// end of the pause to be removed; an uninstall still lets instances go,
// as it runs nothing).

// SettingsConfigMap is the ConfigMap in the controller's namespace whose
// PausedKey pauses every run.
const (
	SettingsConfigMap = "wsu-controller"
	PausedKey         = "paused"
)

// ReasonControllerPaused is the event of a deleted instance whose removal
// waits for the end of the global pause.
const ReasonControllerPaused = "ControllerPaused"

// controllerPaused reads the global pause from the cache: an absent
// ConfigMap or key, or a value that is not a true boolean, is not paused.
func (r *InstanceReconciler) controllerPaused(ctx context.Context) (bool, error) {
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Options.Namespace, Name: SettingsConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	paused, _ := strconv.ParseBool(strings.TrimSpace(cm.Data[PausedKey]))
	return paused, nil
}

// checkPaused stops a pass while the controller is paused: phase Paused,
// nothing run (paused true); the settings watch wakes the instance when
// the pause ends. An uninstall still lets a deleted instance go
// (deconfigure checks it first): it runs nothing either.
func (r *InstanceReconciler) checkPaused(ctx context.Context, wi *wsuv1.WindowsInstance) (ctrl.Result, bool, error) {
	paused, err := r.controllerPaused(ctx)
	if !paused || err != nil {
		return ctrl.Result{}, false, err
	}
	if !wi.DeletionTimestamp.IsZero() {
		r.event(wi, corev1.EventTypeNormal, ReasonControllerPaused, "the removal waits: every run is paused (%s in ConfigMap %s/%s)", PausedKey, r.Options.Namespace, SettingsConfigMap)
	}
	if wi.Status.Phase == wsuv1.PhasePaused {
		return ctrl.Result{}, true, nil
	}
	res, err := r.setPhase(ctx, wi, wsuv1.PhasePaused)
	return res, true, err
}

// settingsToInstances wakes every instance when the settings ConfigMap
// changes (a pause starts or ends).
func settingsToInstances(c client.Reader, namespace string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &wsuv1.WindowsInstanceList{}
		if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, wi := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wi.Namespace, Name: wi.Name}})
		}
		return out
	})
}

// onlySettings keeps the settings watch to the one ConfigMap.
func onlySettings(namespace string) builder.Predicates {
	return builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == namespace && obj.GetName() == SettingsConfigMap
	}))
}
