package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
)

// ConfigMapReconciler turns the BYOH windows-instances ConfigMap (WMCO's
// format, unchanged: `ADDRESS: username=USER`) into WindowsInstances it
// owns, labelled wsu.dev/source=configmap, so a WMCO user gets per-host
// status without changing anything. A bad entry gets a Warning event naming
// it and the other entries go on. An entry that goes away deletes its
// instance (whose finalizer deconfigures the host); a deleted ConfigMap
// deletes them all, under the same rollout limit as any removal — unless
// wsu is being uninstalled (uninstall.go): then nothing is deleted. While
// WMCO's operator runs against the ConfigMap nothing at all is done
// (wmco.go).
//
// The ConfigMap may be in another namespace than the instances (WMCO's on
// OpenShift, wsu's own beside it): the instances then carry no owner
// reference to it (the garbage collector would take a reference across
// namespaces for a missing owner and delete them), only their source label.
type ConfigMapReconciler struct {
	Client client.Client
	// Reader reads uncached (the uninstall check); nil: Client.
	Reader    client.Reader
	Events    record.EventRecorder
	Namespace string
	// InstanceNamespace is where the instances go; "" is Namespace.
	InstanceNamespace string
	Name              string
	// DefaultApproval is a new instance's spec.approval ("": the CRD's
	// default, Auto); an existing instance's is the admin's.
	DefaultApproval wsuv1.Approval
	// IgnoreWMCO turns off the check that leaves the ConfigMap to WMCO's
	// operator while it runs (wmco.go).
	IgnoreWMCO bool
}

func (r *ConfigMapReconciler) reader() client.Reader {
	if r.Reader == nil {
		return r.Client
	}
	return r.Reader
}

func (r *ConfigMapReconciler) instanceNamespace() string {
	if r.InstanceNamespace == "" {
		return r.Namespace
	}
	return r.InstanceNamespace
}

// Reason of the Warning event for a bad entry.
const ReasonInvalidEntry = "InvalidEntry"

// Reconcile implements reconcile.Reconciler.
func (r *ConfigMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if wmco, err := r.leaveToWMCO(ctx); wmco || err != nil { // wmco.go
		return ctrl.Result{}, err
	}
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.Name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		if keep, err := r.keepOnUninstall(ctx); keep || err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.prune(ctx, nil, nil)
	case err != nil:
		return ctrl.Result{}, err
	}
	wanted, bad := r.entries(cm)
	for _, wi := range wanted {
		if err := r.ensure(ctx, cm, wi); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.prune(ctx, wanted, bad); err != nil {
		return ctrl.Result{}, err
	}
	err = r.markEntries(ctx, bad)
	if apierrors.IsConflict(err) {
		// The cache had not seen the instance's last write yet: again
		// once it has (its watch event), or soon.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, err
}

// keepOnUninstall reports whether a BYOH ConfigMap that is gone went with
// an uninstall — wsu's (its CRD or the instances' namespace being
// deleted) or its namespace's (WMCO's, being deleted with WMCO) — rather
// than by an admin's hand: then its instances are left alone, their hosts
// joined.
func (r *ConfigMapReconciler) keepOnUninstall(ctx context.Context) (bool, error) {
	gone, why, err := uninstalling(ctx, r.reader(), r.instanceNamespace())
	if err == nil && !gone && r.Namespace != r.instanceNamespace() {
		gone, why, err = namespaceGoing(ctx, r.reader(), r.Namespace)
	}
	if gone {
		log.FromContext(ctx).Info("the BYOH ConfigMap went with its namespace or wsu's uninstall: its instances are left alone", "why", why)
	}
	return gone, err
}

// entries parses the ConfigMap as the -i k8s:// inventory does, reporting
// each bad entry as a Warning event on the ConfigMap. wanted are the
// instances of the good entries, by name; bad are the entries present
// but not usable (a typo in the value, a bad address, a second spelling
// of a host), by the name of their instance, with why: an instance whose
// entry is still there is not removed for a typo.
func (r *ConfigMapReconciler) entries(cm *corev1.ConfigMap) (wanted map[string]*wsuv1.WindowsInstance, bad map[string]string) {
	ref := kubeinv.Scheme + r.Namespace + "/" + r.Name
	inv, diags := inventory.ParseWindowsInstances(ref, cm.Data)
	for _, d := range diags {
		if r.Events != nil {
			r.Events.Eventf(cm, corev1.EventTypeWarning, ReasonInvalidEntry, "%s: %s", d.Summary, d.Detail)
		}
	}
	wanted = map[string]*wsuv1.WindowsInstance{}
	for name, h := range inv.Hosts {
		user := ""
		if v, ok := h.Vars["ansible_user"]; ok && v.Value.IsKnown() && !v.Value.IsNull() {
			user = v.Value.AsString()
		}
		wi := &wsuv1.WindowsInstance{
			ObjectMeta: metav1.ObjectMeta{Name: InstanceName(name), Namespace: r.instanceNamespace()},
			Spec:       wsuv1.WindowsInstanceSpec{Address: name, Username: user},
		}
		wanted[wi.Name] = wi
	}
	bad = map[string]string{}
	for key := range cm.Data {
		if _, ok := wanted[InstanceName(key)]; ok {
			continue
		}
		bad[InstanceName(key)] = entryProblem(key, diags)
	}
	return wanted, bad
}

// entryProblem is why entry key did not parse: its diagnostic's detail.
func entryProblem(key string, diags hcl.Diagnostics) string {
	prefix := fmt.Sprintf("Entry %q", key)
	for _, d := range diags {
		if strings.HasPrefix(d.Detail, prefix) {
			return d.Detail
		}
	}
	return fmt.Sprintf("Entry %q could not be read; the ConfigMap's %s events say why.", key, ReasonInvalidEntry)
}

// markEntries records on each instance of the ConfigMap whether its entry
// is usable: ConfigMapEntryValid=False (reason InvalidEntry, a Warning
// event) while it is not, the instance left as it was; the condition goes
// once the entry is fixed.
func (r *ConfigMapReconciler) markEntries(ctx context.Context, bad map[string]string) error {
	list := &wsuv1.WindowsInstanceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.instanceNamespace()), client.MatchingLabels{wsuv1.SourceLabel: wsuv1.SourceConfigMap}); err != nil {
		return err
	}
	for i := range list.Items {
		wi := &list.Items[i]
		if !wi.DeletionTimestamp.IsZero() {
			continue
		}
		orig := wi.DeepCopy()
		was := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionConfigMapEntryValid)
		why, isBad := bad[wi.Name]
		switch {
		case isBad && (was == nil || was.Message != r.entryMessage(why)):
			meta.SetStatusCondition(&wi.Status.Conditions, metav1.Condition{Type: wsuv1.ConditionConfigMapEntryValid,
				Status: metav1.ConditionFalse, Reason: ReasonInvalidEntry, Message: r.entryMessage(why), ObservedGeneration: wi.Generation})
		case !isBad && was != nil:
			meta.RemoveStatusCondition(&wi.Status.Conditions, wsuv1.ConditionConfigMapEntryValid)
		default:
			continue
		}
		if err := r.Client.Status().Patch(ctx, wi, statusPatch(orig)); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			if client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("recording WindowsInstance %s's ConfigMap entry: %w", wi.Name, err)
			}
			continue
		}
		if isBad && r.Events != nil {
			r.Events.Eventf(wi, corev1.EventTypeWarning, ReasonInvalidEntry, "%s", r.entryMessage(why))
		}
	}
	return nil
}

func (r *ConfigMapReconciler) entryMessage(why string) string {
	return run.Truncate(fmt.Sprintf("the entry in ConfigMap %s/%s is not usable: %s The instance keeps its last good address and username and is not removed; fix the entry, or delete it to remove the host.", r.Namespace, r.Name, why), 1000)
}

// InstanceName is the WindowsInstance of a ConfigMap entry: its address,
// lower-cased (an IPv4 address and a DNS name are both valid object names).
func InstanceName(address string) string { return strings.ToLower(address) }

// ensure creates the instance of an entry (with the default approval), or
// brings an existing one's address and username in line; the rest of its
// spec (approval, vars, a playbook) is the admin's to set.
func (r *ConfigMapReconciler) ensure(ctx context.Context, cm *corev1.ConfigMap, want *wsuv1.WindowsInstance) error {
	cur := &wsuv1.WindowsInstance{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), cur)
	if apierrors.IsNotFound(err) {
		want.Labels = map[string]string{wsuv1.SourceLabel: wsuv1.SourceConfigMap}
		want.Spec.Approval = r.DefaultApproval
		if cm.Namespace == want.Namespace {
			want.OwnerReferences = []metav1.OwnerReference{ownerRef(cm)}
		}
		return client.IgnoreAlreadyExists(r.Client.Create(ctx, want))
	}
	if err != nil {
		return err
	}
	if cur.Labels[wsuv1.SourceLabel] != wsuv1.SourceConfigMap {
		if r.Events != nil {
			r.Events.Eventf(cm, corev1.EventTypeWarning, ReasonInvalidEntry,
				"entry %s: a WindowsInstance %s not made from this ConfigMap exists; it is left alone", want.Spec.Address, want.Name)
		}
		return nil
	}
	if cur.Spec.Address == want.Spec.Address && cur.Spec.Username == want.Spec.Username {
		return nil
	}
	orig := cur.DeepCopy()
	cur.Spec.Address, cur.Spec.Username = want.Spec.Address, want.Spec.Username
	return r.Client.Patch(ctx, cur, client.MergeFrom(orig))
}

// prune deletes the instances made from entries that are gone: not those
// of a good entry (wanted), nor of an entry still there that does not
// parse (bad).
func (r *ConfigMapReconciler) prune(ctx context.Context, wanted map[string]*wsuv1.WindowsInstance, bad map[string]string) error {
	list := &wsuv1.WindowsInstanceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.instanceNamespace()), client.MatchingLabels{wsuv1.SourceLabel: wsuv1.SourceConfigMap}); err != nil {
		return err
	}
	for i := range list.Items {
		wi := &list.Items[i]
		_, typo := bad[wi.Name]
		if _, ok := wanted[wi.Name]; ok || typo || !wi.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, wi); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting WindowsInstance %s, whose entry is gone: %w", wi.Name, err)
		}
	}
	return nil
}

func ownerRef(cm *corev1.ConfigMap) metav1.OwnerReference {
	controller := true
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: &controller}
}
