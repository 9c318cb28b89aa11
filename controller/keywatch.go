package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/inventory/kubeinv"
)

// The key Secret watch: a change of an instance's key Secret (a rotation's
// new key added, the keys swapped) wakes the instances that use it, so a
// rotation starts at once rather than at each instance's next drift pass.
// The watch is of the Secrets' metadata only, in the controller's
// namespace (and of the default key Secret alone in the BYOH namespace when
// that is another): the cache holds names and resource versions, never a
// key (keys are read per run with a get, as before), and a Secret no
// instance names maps to nothing.

// keySecretIndex indexes WindowsInstances by the name of their key Secret.
const keySecretIndex = "wsu.dev/key-secret"

// keySecretOf is the Secret an instance's key is in: its keySecretRef, in
// its own namespace, or else the BYOH key Secret (cloud-private-key) in the
// BYOH namespace (byohNamespace; "" is the instance's own).
func keySecretOf(wi *wsuv1.WindowsInstance, byohNamespace string) types.NamespacedName {
	if wi.Spec.KeySecretRef != nil && wi.Spec.KeySecretRef.Name != "" {
		return types.NamespacedName{Namespace: wi.Namespace, Name: wi.Spec.KeySecretRef.Name}
	}
	if byohNamespace == "" {
		byohNamespace = wi.Namespace
	}
	return types.NamespacedName{Namespace: byohNamespace, Name: kubeinv.KeySecret}
}

// indexKeySecret is keySecretIndex's index function: NAMESPACE/NAME of
// the instance's key Secret.
func indexKeySecret(byohNamespace string) client.IndexerFunc {
	return func(obj client.Object) []string {
		wi, ok := obj.(*wsuv1.WindowsInstance)
		if !ok {
			return nil
		}
		return []string{keySecretOf(wi, byohNamespace).String()}
	}
}

// secretMetadata is what the Secret watch caches: metadata only.
func secretMetadata() client.Object {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return m
}

// secretToInstances wakes the instances whose key is in the Secret that
// changed, found through keySecretIndex.
func secretToInstances(c client.Reader) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := &wsuv1.WindowsInstanceList{}
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		if err := c.List(ctx, list, client.MatchingFields{keySecretIndex: key.String()}); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, wi := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: wi.Namespace, Name: wi.Name}})
		}
		return out
	})
}

// keyRotationPending reports whether the instance's key Secret holds a new
// key the host has not been moved to, or, for a Machine's instance, one
// its Machine is replaced for (machinereplace.go): such an instance is
// converged at once, not at its next drift pass. A Secret that cannot be read is left
// to the next plan to report.
func (r *InstanceReconciler) keyRotationPending(ctx context.Context, wi *wsuv1.WindowsInstance) bool {
	keys, err := r.readKeys(ctx, wi)
	if err != nil {
		return false
	}
	if isMachineInstance(wi) {
		return machineKeyStale(wi, keys) // machinereplace.go
	}
	return keys.pending(wi.Status.Identity.KeyFingerprint)
}
