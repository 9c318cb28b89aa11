package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// Uninstalling never starts removals. Deleting the WindowsInstance CRD
// deletes every instance, and deleting the namespace deletes them and the
// BYOH ConfigMap: both look, to a running controller, like an admin
// deleting instances, whose finalizer runs the remove playbook on each
// host. That is not what an uninstall means (docs/install.md): the hosts
// stay joined, their Nodes stay. So before a removal, and before pruning
// the instances of a BYOH ConfigMap that went away, the controller asks the
// API server (uncached) whether the CRD or the instances' namespace is
// being deleted; if so it lets the instance go without touching its host
// or its Node. Reading them needs get on the CRD windowsinstances.wsu.dev
// and on its own namespace, both by name.

// ReasonUninstalled is the event of an instance let go by an uninstall.
const ReasonUninstalled = "Uninstalled"

// crdName is the WindowsInstance CRD.
const crdName = "windowsinstances.wsu.dev"

// uninstalling reports whether wsu is being uninstalled for the instances
// of namespace: the CRD or the namespace is being deleted (or is gone),
// and why.
func uninstalling(ctx context.Context, c client.Reader, namespace string) (bool, string, error) {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	switch err := c.Get(ctx, types.NamespacedName{Name: crdName}, crd); {
	case apierrors.IsNotFound(err):
		return true, "the CRD " + crdName + " is gone", nil
	case err != nil:
		return false, "", fmt.Errorf("reading the CRD %s (is wsu being uninstalled?): %w", crdName, err)
	case !crd.DeletionTimestamp.IsZero():
		return true, "the CRD " + crdName + " is being deleted", nil
	}
	return namespaceGoing(ctx, c, namespace)
}

// namespaceGoing reports whether namespace is being deleted (or is gone).
func namespaceGoing(ctx context.Context, c client.Reader, namespace string) (bool, string, error) {
	ns := &corev1.Namespace{}
	switch err := c.Get(ctx, types.NamespacedName{Name: namespace}, ns); {
	case apierrors.IsNotFound(err):
		return true, "the namespace " + namespace + " is gone", nil
	case err != nil:
		return false, "", fmt.Errorf("reading the namespace %s (is wsu being uninstalled?): %w", namespace, err)
	case !ns.DeletionTimestamp.IsZero() || ns.Status.Phase == corev1.NamespaceTerminating:
		return true, "the namespace " + namespace + " is being deleted", nil
	}
	return false, "", nil
}

// letGoOnUninstall releases a deleted instance without running remove or
// deleting its Node when wsu is being uninstalled; done says it did.
func (r *InstanceReconciler) letGoOnUninstall(ctx context.Context, wi *wsuv1.WindowsInstance) (done bool, err error) {
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	gone, why, err := uninstalling(ctx, reader, wi.Namespace)
	if err != nil || !gone {
		return false, err
	}
	r.event(wi, corev1.EventTypeWarning, ReasonUninstalled, "wsu is being uninstalled (%s): the host stays joined and its Node stays; remove it with wsu apply remove from a workstation", why)
	return true, r.release(ctx, wi)
}
