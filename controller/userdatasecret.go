package controller

// The user-data Secret: on OpenShift, Windows Machines made by a MachineSet
// run the script in the Secret windows-user-data (openshift-machine-api,
// and openshift-cluster-api where OpenShift runs the Cluster API) at first
// boot, which authorises the key wsu logs in with. The controller keeps
// that Secret current from the BYOH key Secret (cloud-private-key, in the
// BYOH namespace; its private-key.pem.new while a key rotation is under
// way, keyrotation.go), as WMCO's secret controller does: created when the key
// Secret appears, rewritten when its key changes, with the renderer
// `wsu user-data --secret` prints (package userdata), so the CLI and the
// controller write the same bytes. A namespace that does not exist (a
// vanilla cluster) gets nothing and is not created; the controller reads
// only whether those two namespaces exist (by name), and writes only that
// one Secret in each (create, and get and update by name). A deleted key
// Secret leaves the user data as it was: machines made meanwhile still
// authorise the last key, which the hosts already have. While WMCO's
// operator runs (its Deployment where the BYOH ConfigMap is; wmco.go) the
// Secret is WMCO's, whose secret controller writes its own script, and
// wsu leaves it alone, so the two never rewrite each other's; once WMCO
// stops (the Deployment's watch) wsu writes it. The key Secret
// watch is the metadata one of keywatch.go; a periodic pass restores an
// edited Secret and finds a namespace made after the key Secret.
//
// The Roles there are installed apart: openshift-machine-api's with the
// openshift overlay, openshift-cluster-api's (a namespace not every
// OpenShift cluster has) by the admin from the optional
// deploy/overlays/openshift/cluster-api. A namespace where writing is
// Forbidden (its Role not applied) is skipped with a Warning event
// (UserDataForbidden) on the key Secret naming what to apply; the other
// namespace is still written, and the pass comes back within
// forbiddenRetry, as no watch sees a RoleBinding appear.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	gossh "golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/userdata"
)

// +kubebuilder:rbac:groups="",resources=namespaces,resourceNames=openshift-machine-api;openshift-cluster-api,verbs=get
// +kubebuilder:rbac:groups="",namespace=openshift-machine-api,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=openshift-machine-api,resources=secrets,resourceNames=windows-user-data,verbs=get;update
// +kubebuilder:rbac:groups="",namespace=openshift-cluster-api,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=openshift-cluster-api,resources=secrets,resourceNames=windows-user-data,verbs=get;update

// UserDataNamespaces are where the user-data Secret is kept, each only if
// it exists.
func UserDataNamespaces() []string {
	return []string{userdata.MachineAPINamespace, userdata.ClusterAPINamespace}
}

// ReasonUserDataForbidden is the Warning event's reason when the
// controller may not write the user-data Secret in a namespace that
// exists.
const ReasonUserDataForbidden = "UserDataForbidden"

// forbiddenRetry is how soon a pass that met Forbidden comes back (sooner
// than Resync when that is longer or 0): granting the Role wakes nothing.
const forbiddenRetry = time.Minute

// UserDataRBAC is what the admin applies to let the controller write the
// user-data Secret in ns (docs/install.md).
func UserDataRBAC(ns string) string {
	switch ns {
	case userdata.MachineAPINamespace:
		return "deploy/overlays/openshift (OLM: deploy/olm/outside-bundle.yaml)"
	case userdata.ClusterAPINamespace:
		return "deploy/overlays/openshift/cluster-api (oc apply -k; or deploy/rendered/openshift-cluster-api.yaml)"
	}
	return "a Role and RoleBinding like deploy/rbac/controller's in " + ns
}

// UserDataReconciler writes windows-user-data into each of Namespaces that
// exists, from the key Secret KeySecret.
type UserDataReconciler struct {
	// Client writes the user-data Secrets (read from the API server:
	// Secrets are never cached); Reader reads the key Secret and the
	// namespaces from the API server (nothing of them cached).
	Client     client.Client
	Reader     client.Reader
	KeySecret  types.NamespacedName
	Namespaces []string
	// WMCO reads WMCO's operator Deployment in WMCONamespace (the
	// manager's cache); nil: WMCO is not looked for (--wmco-check=false).
	WMCO          client.Reader
	WMCONamespace string
	// Resync is how often the Secrets are checked again without a change
	// of the key Secret; 0 never.
	Resync time.Duration
	// Events records a Warning on the key Secret for a namespace where
	// the Secret may not be written; nil records none (it is logged).
	Events record.EventRecorder
}

// Reconcile renders the user data from the key Secret's key and writes it
// where it belongs; one key stands for the key Secret.
func (r *UserDataReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	key := &corev1.Secret{}
	if err := r.Reader.Get(ctx, r.KeySecret, key); apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	} else if err != nil {
		return reconcile.Result{}, fmt.Errorf("key Secret %s: %w", r.KeySecret, err)
	}
	pub, err := userdata.PublicKey(userDataKey(key))
	if err != nil {
		// An admin's to fix; the key Secret's next change wakes us.
		log.FromContext(ctx).Info("no user data from the key Secret", "secret", r.KeySecret.String(), "key", kubeinv.KeySecretKey, "reason", err.Error())
		return reconcile.Result{}, nil
	}
	if r.WMCO != nil {
		running, err := wmcoRunning(ctx, r.WMCO, r.WMCONamespace)
		if err != nil {
			return reconcile.Result{}, err
		}
		if running {
			log.FromContext(ctx).V(1).Info("the user-data Secret is left to WMCO, whose operator runs", "namespace", r.WMCONamespace)
			return reconcile.Result{}, nil
		}
	}
	return r.writeAll(ctx, key, pub)
}

// userDataKey is the private key whose public half new Machines
// authorise: the rotation's new key (KEY.new) while one is under way, so a
// Machine made, or replaced (machinereplace.go), during a rotation gets
// the key the others move to; else KEY.
func userDataKey(key *corev1.Secret) []byte {
	if next := key.Data[kubeinv.KeySecretKey+NewKeySuffix]; len(next) > 0 {
		return next
	}
	return key.Data[kubeinv.KeySecretKey]
}

// writeAll writes the user data into each namespace: one that fails does
// not keep the others from it; Forbidden is a Warning and a retry, not an
// error (the admin's to grant).
func (r *UserDataReconciler) writeAll(ctx context.Context, key *corev1.Secret, pub gossh.PublicKey) (reconcile.Result, error) {
	var errs []error
	forbidden := false
	for _, ns := range r.Namespaces {
		err := r.write(ctx, userdata.Secret(ns, pub))
		switch {
		case apierrors.IsForbidden(err):
			forbidden = true
			r.warnForbidden(ctx, key, ns, err)
		case err != nil:
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return reconcile.Result{}, errors.Join(errs...)
	}
	after := r.Resync
	if forbidden && (after == 0 || after > forbiddenRetry) {
		after = forbiddenRetry
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// warnForbidden logs and records on the key Secret that the user data in
// ns could not be written for want of its Role, and what grants it.
func (r *UserDataReconciler) warnForbidden(ctx context.Context, key *corev1.Secret, ns string, err error) {
	msg := fmt.Sprintf("may not write %s/%s (no Role bound there): apply %s; retrying", ns, userdata.SecretName, UserDataRBAC(ns))
	log.FromContext(ctx).Info("user data not written: "+msg, "namespace", ns, "reason", err.Error())
	if r.Events != nil {
		r.Events.Event(key, corev1.EventTypeWarning, ReasonUserDataForbidden, msg)
	}
}

// write creates or updates want, if its namespace exists.
func (r *UserDataReconciler) write(ctx context.Context, want *corev1.Secret) error {
	if err := r.Reader.Get(ctx, types.NamespacedName{Name: want.Namespace}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("namespace %s: %w", want.Namespace, err)
	}
	s := &corev1.Secret{}
	s.Namespace, s.Name = want.Namespace, want.Name
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, s, func() error {
		if s.CreationTimestamp.IsZero() {
			s.Type = want.Type
		}
		s.Labels = mergeStrings(s.Labels, want.Labels)
		s.Annotations = mergeStrings(s.Annotations, want.Annotations)
		s.Data = map[string][]byte{}
		for k, v := range want.StringData {
			s.Data[k] = []byte(v)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the user-data Secret %s/%s: %w", want.Namespace, want.Name, err)
	}
	if op != controllerutil.OperationResultNone {
		log.FromContext(ctx).Info("user data written", "secret", want.Namespace+"/"+want.Name, "operation", op,
			"key", want.Annotations[userdata.FingerprintAnnotation])
	}
	return nil
}

// mergeStrings is into with over's entries set.
func mergeStrings(into, over map[string]string) map[string]string {
	out := maps.Clone(into)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

// setupUserData registers the user-data controller: woken by the key
// Secret's changes (metadata only, keywatch.go's cache) and at start.
func setupUserData(mgr ctrl.Manager, o Options) error {
	key := types.NamespacedName{Namespace: o.BYOHNamespace, Name: kubeinv.KeySecret}
	only := predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name
	})
	always := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: key}}
	})
	r := &UserDataReconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), KeySecret: key,
		Namespaces: UserDataNamespaces(), Resync: o.DriftInterval, Events: eventRecorder(mgr)}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("user-data").
		Watches(secretMetadata(), always, builder.WithPredicates(only, predicate.ResourceVersionChangedPredicate{}))
	if !o.IgnoreWMCO {
		// WMCO's operator starting or stopping (wmco.go).
		r.WMCO, r.WMCONamespace = mgr.GetClient(), o.BYOHNamespace
		b = b.Watches(wmcoDeploymentObject(), always, onlyWMCO(o.BYOHNamespace))
	}
	return b.Complete(r)
}
