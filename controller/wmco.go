package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// Coexistence with WMCO: WMCO's operator acts on every entry of the BYOH
// ConfigMap (it configures a new one, deconfigures a removed one), so wsu
// acting on the same ConfigMap at the same time would fight it over the
// same hosts. While WMCO's operator Deployment (windows-machine-config-
// operator, in the BYOH namespace) wants or has a pod, wsu leaves that
// ConfigMap to it:
//
//   - the ConfigMap reconciler creates, changes and deletes no instance
//     (a removed entry's host is WMCO's to deconfigure), and records a
//     Warning event WMCORunning on the ConfigMap when WMCO starts and
//     while entries wait, naming them;
//   - each instance made from it shows ConfigMapManaged=False (reason
//     WMCORunning) and phase Paused, and runs nothing on its host — no
//     join, drift plan, upgrade, key rotation or removal — as under the
//     global pause (pause.go); an uninstall still lets one go.
//
// The Deployment is watched by name (a metadata.name field selector, which
// a Role limited to that name allows): scaled to zero (no pod wanted, none
// left) or deleted, wsu resumes on that watch event and the condition goes.
// Its spec rather than its available replicas decides, so a WMCO pod that
// is starting or crash-looping, and will act once up, still counts.
// Options.IgnoreWMCO (--wmco-check=false) turns the check off, for an admin
// who runs both on different ConfigMaps.

// WMCODeployment is WMCO's operator Deployment, in its namespace.
const WMCODeployment = "windows-machine-config-operator"

// Reasons of the WMCO coexistence condition and events.
const (
	ReasonWMCORunning = "WMCORunning"
	ReasonWMCOStopped = "WMCOStopped"
)

// The Deployment, by name, in the controller's namespace (vanilla: the
// BYOH ConfigMap's); on OpenShift the overlay's Role wsu-controller-byoh
// grants the same in WMCO's namespace.
// +kubebuilder:rbac:groups=apps,namespace=wsu-system,resources=deployments,resourceNames=windows-machine-config-operator,verbs=get;list;watch

// wmcoRunning reports whether WMCO's operator Deployment in namespace
// wants or has a pod.
func wmcoRunning(ctx context.Context, c client.Reader, namespace string) (bool, error) {
	d := &appsv1.Deployment{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: WMCODeployment}, d)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading WMCO's Deployment %s/%s: %w", namespace, WMCODeployment, err)
	}
	return deploymentRuns(d), nil
}

// deploymentRuns: d wants a replica (spec.replicas, default 1) or still
// has one (status, pods terminating after a scale to zero).
func deploymentRuns(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return want > 0 || d.Status.Replicas > 0 || d.Status.AvailableReplicas > 0
}

// wmcoMessage is the condition's and the events' text.
func wmcoMessage(byohNamespace, configMap string) string {
	return fmt.Sprintf("WMCO's operator (Deployment %s/%s) is running and manages the hosts of ConfigMap %s/%s: wsu creates, changes and removes no instance of it and runs nothing on their hosts until WMCO is scaled to zero or uninstalled (docs/install.md, Running beside WMCO); if WMCO uses another ConfigMap than wsu, start the controller with --wmco-check=false",
		byohNamespace, WMCODeployment, byohNamespace, configMap)
}

// checksWMCO: the BYOH ConfigMap is read and the WMCO check is on.
func (o Options) checksWMCO() bool {
	return o.ConfigMap != "" && !o.IgnoreWMCO
}

// checkWMCO stops a pass of an instance made from the BYOH ConfigMap while
// WMCO runs (stop true): ConfigMapManaged=False, phase Paused, a Warning
// event when that starts. Once WMCO stopped it takes the condition away
// and lets the pass go on.
func (r *InstanceReconciler) checkWMCO(ctx context.Context, wi *wsuv1.WindowsInstance) (ctrl.Result, bool, error) {
	if !r.Options.checksWMCO() || wi.Labels[wsuv1.SourceLabel] != wsuv1.SourceConfigMap {
		return ctrl.Result{}, false, nil
	}
	running, err := wmcoRunning(ctx, r.Client, r.Options.BYOHNamespace)
	if err != nil {
		return ctrl.Result{}, false, err
	}
	was := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionConfigMapManaged)
	orig := wi.DeepCopy()
	if !running {
		if was == nil {
			return ctrl.Result{}, false, nil
		}
		meta.RemoveStatusCondition(&wi.Status.Conditions, wsuv1.ConditionConfigMapManaged)
		if err := r.Client.Status().Patch(ctx, wi, statusPatch(orig)); err != nil {
			return ctrl.Result{}, true, client.IgnoreNotFound(err)
		}
		if r.Events != nil {
			r.Events.Eventf(wi, corev1.EventTypeNormal, ReasonWMCOStopped, "WMCO's operator (Deployment %s/%s) stopped: wsu manages the host again", r.Options.BYOHNamespace, WMCODeployment)
		}
		return ctrl.Result{}, false, nil
	}
	msg := wmcoMessage(r.Options.BYOHNamespace, r.Options.ConfigMap)
	meta.SetStatusCondition(&wi.Status.Conditions, metav1.Condition{Type: wsuv1.ConditionConfigMapManaged,
		Status: metav1.ConditionFalse, Reason: ReasonWMCORunning, Message: msg, ObservedGeneration: wi.Generation})
	if was == nil && r.Events != nil {
		// On the instance only: the ConfigMap reconciler tells the
		// ConfigMap once, not once per instance.
		r.Events.Eventf(wi, corev1.EventTypeWarning, ReasonWMCORunning, "%s", msg)
	}
	res, err := r.done(ctx, orig, wi, wsuv1.PhasePaused, 0)
	return res, true, err
}

// leaveToWMCO is the ConfigMap reconciler's check: while WMCO runs it
// reports that nothing is to be done, and records the Warning event on the
// ConfigMap when there is news for an admin: entries whose instance wsu
// would make or delete, or instances not told yet (their reconciles set
// the condition). Not on every pass: the recorder's spam filter shares one
// budget among all of an object's events, and a quiet fleet beside WMCO
// must not use up the budget of the ConfigMap's other warnings.
func (r *ConfigMapReconciler) leaveToWMCO(ctx context.Context) (bool, error) {
	if r.IgnoreWMCO {
		return false, nil
	}
	running, err := wmcoRunning(ctx, r.Client, r.Namespace)
	if !running || err != nil {
		return false, err
	}
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Name}, cm); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	list := &wsuv1.WindowsInstanceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.instanceNamespace()), client.MatchingLabels{wsuv1.SourceLabel: wsuv1.SourceConfigMap}); err != nil {
		return true, err
	}
	added, removed, told := waitingEntries(cm, list.Items)
	if r.Events != nil && (len(added) > 0 || len(removed) > 0 || (!told && len(list.Items) > 0)) {
		r.Events.Eventf(cm, corev1.EventTypeWarning, ReasonWMCORunning, "%s%s", wmcoMessage(r.Namespace, r.Name), waitingText(added, removed))
	}
	return true, nil
}

// waitingEntries are the entries of cm with no instance yet (added), the
// instances whose entry is gone (removed), by name, and whether some
// instance already shows the condition (told).
func waitingEntries(cm *corev1.ConfigMap, items []wsuv1.WindowsInstance) (added, removed []string, told bool) {
	entries := map[string]bool{}
	for key := range cm.Data {
		entries[InstanceName(key)] = true
	}
	have := map[string]bool{}
	for i := range items {
		wi := &items[i]
		have[wi.Name] = true
		if !entries[wi.Name] && wi.DeletionTimestamp.IsZero() {
			removed = append(removed, wi.Name)
		}
		told = told || meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionConfigMapManaged) != nil
	}
	for name := range entries {
		if !have[name] {
			added = append(added, name)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed, told
}

// waitingText lists what waits for WMCO to stop, at most ten names each.
func waitingText(added, removed []string) string {
	out := ""
	if len(added) > 0 {
		out += fmt.Sprintf("; new entries waiting (%d): %s", len(added), names(added))
	}
	if len(removed) > 0 {
		out += fmt.Sprintf("; entries taken out, their instances kept (%d): %s", len(removed), names(removed))
	}
	return out
}

func names(list []string) string {
	if len(list) > 10 {
		return strings.Join(list[:10], ", ") + ", …"
	}
	return strings.Join(list, ", ")
}

// wmcoDeploymentObject is what the WMCO watches see.
func wmcoDeploymentObject() client.Object { return &appsv1.Deployment{} }

// onlyWMCO keeps a watch to WMCO's Deployment in namespace.
func onlyWMCO(namespace string) builder.Predicates {
	return builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == namespace && obj.GetName() == WMCODeployment
	}))
}

// wmcoToInstances wakes the instances made from the BYOH ConfigMap when
// WMCO's Deployment changes (it starts or stops).
func wmcoToInstances(c client.Reader, namespace string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &wsuv1.WindowsInstanceList{}
		if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{wsuv1.SourceLabel: wsuv1.SourceConfigMap}); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, wi := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wi.Namespace, Name: wi.Name}})
		}
		return out
	})
}

// wmcoToConfigMap wakes the BYOH ConfigMap's reconciler when WMCO's
// Deployment changes.
func wmcoToConfigMap(namespace, name string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}}
	})
}
