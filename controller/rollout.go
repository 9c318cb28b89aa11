package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/kube"
)

// The rollout limit (maxUnavailable) counts what the cluster shows, not
// what one process remembers: a controller restarted, or a standby newly
// elected, while a Node was cordoned mid-upgrade must count that Node, or
// it takes another out of service beside it. So the controller marks a
// Node before an upgrade or a removal takes it out of service (the label
// UnavailableLabel, as WMCO's windowsmachineconfig.openshift.io/upgrading)
// and counts the marked Nodes its instances recorded. In memory it keeps
// only the slots taken in this process and not marked yet (a rotation,
// which takes no Node out of service, or a run before its mark), so that
// two reconciles of one process never take one slot.
//
// A mark cannot outlive what it stands for: it is cleared when the Node is
// back at the payload version and schedulable; a removed Node (the
// instance deleted or forgotten) takes it with it; a mark on a Node whose
// instance is gone, or recorded another Node, is not counted and is
// cleared when seen.

// The controller may label Nodes (the mark), beside its rights in
// instance.go.
// +kubebuilder:rbac:groups="",resources=nodes,verbs=patch

// UnavailableLabel marks a Node the controller took out of service: value
// "upgrade" or "remove". The Nodes so marked count against maxUnavailable.
const UnavailableLabel = "wsu.dev/unavailable"

// UnavailableLabel's values.
const (
	unavailableUpgrade = "upgrade"
	unavailableRemove  = "remove"
)

// rolloutLimit holds the slots taken in this process (instances by
// NAMESPACE/NAME) until their run ends; its lock makes counting and taking
// one step.
//
// An instance refused a slot waits for one to free, not for a timer: it
// is remembered (waiting) and woken when a slot of this process is given
// back (release, through wake) or a Node loses its mark or goes
// (slotFreed). A restarted controller's waiters are remembered again at
// their first reconcile, which every instance gets at the start.
type rolloutLimit struct {
	mu      sync.Mutex
	held    map[string]bool
	waiting map[string]types.NamespacedName
	// wake carries the waiters woken by a release to the instance
	// controller's queue (a channel source); buffered, never blocking: a
	// waiter it cannot take stays waiting.
	wake chan event.GenericEvent
}

func newRolloutLimit() *rolloutLimit {
	return &rolloutLimit{held: map[string]bool{}, waiting: map[string]types.NamespacedName{}, wake: make(chan event.GenericEvent, 256)}
}

func instanceKey(wi *wsuv1.WindowsInstance) string { return wi.Namespace + "/" + wi.Name }

// release gives back wi's slot in this process (its Node's mark, if any,
// stays until the Node is back) and wakes the instances waiting for one.
func (l *rolloutLimit) release(wi *wsuv1.WindowsInstance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, instanceKey(wi))
	for k, name := range l.waiting {
		select {
		case l.wake <- event.GenericEvent{Object: &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name}}}:
			delete(l.waiting, k)
		default:
			return // the queue is behind; the rest stay waiting
		}
	}
}

// wakeAll hands every waiting instance to q (a Node lost its mark).
func (l *rolloutLimit) wakeAll(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, name := range l.waiting {
		q.Add(reconcile.Request{NamespacedName: name})
		delete(l.waiting, k)
	}
}

// slotRecheck is when an instance refused a slot looks again though no
// wake came: a safety net (a percentage limit grown with the instances
// frees a slot without an event), at the drift interval.
func (r *InstanceReconciler) slotRecheck() time.Duration { return r.driftRequeue() }

// slotFreed wakes the instances waiting for a rollout slot when a Node
// loses its out-of-service mark or goes with it.
func slotFreed(l *rolloutLimit) handler.EventHandler {
	marked := func(o client.Object) bool { return o != nil && o.GetLabels()[UnavailableLabel] != "" }
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if marked(e.ObjectOld) && !marked(e.ObjectNew) {
				l.wakeAll(q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if marked(e.Object) {
				l.wakeAll(q)
			}
		},
	}
}

// takeSlot takes a rollout slot for wi if fewer than maxUnavailable
// (scaled to the namespace's instances) are out of service: the instances
// whose recorded Node is marked, and those holding a slot in this process.
// An instance already out of service (its Node marked by this controller or
// a previous one: an upgrade to resume, a failed one to retry) holds its
// slot.
func (r *InstanceReconciler) takeSlot(ctx context.Context, wi *wsuv1.WindowsInstance) (bool, error) {
	l := r.rollouts
	l.mu.Lock()
	defer l.mu.Unlock()
	list := &wsuv1.WindowsInstanceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(wi.Namespace)); err != nil {
		return false, err
	}
	limit, err := scaledMaxUnavailable(r.Options.MaxUnavailable, len(list.Items))
	if err != nil {
		return false, err
	}
	out, err := r.outOfService(ctx, wi.Namespace, list.Items)
	if err != nil {
		return false, err
	}
	for k := range l.held {
		out[k] = true
	}
	self := instanceKey(wi)
	if !out[self] && len(out) >= limit {
		l.waiting[self] = types.NamespacedName{Namespace: wi.Namespace, Name: wi.Name}
		return false, nil
	}
	delete(l.waiting, self)
	l.held[self] = true
	return true, nil
}

// outOfService are the instances of namespace (by NAMESPACE/NAME) whose
// recorded Node carries the mark, and in Job mode those whose upgrade,
// removal or key rotation runs in a Job.
func (r *InstanceReconciler) outOfService(ctx context.Context, namespace string, instances []wsuv1.WindowsInstance) (map[string]bool, error) {
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes, client.HasLabels{UnavailableLabel}); err != nil {
		return nil, err
	}
	byUID := map[string]string{}
	for i := range instances {
		if uid := instances[i].Status.NodeUID; uid != "" {
			byUID[uid] = instanceKey(&instances[i])
		}
	}
	out, err := r.applyingInJobs(ctx, namespace)
	if err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if k, ok := byUID[string(n.UID)]; ok {
			out[k] = true
			continue
		}
		k, err := r.markHolder(ctx, namespace, n)
		if err != nil {
			return nil, err
		}
		if k != "" {
			out[k] = true
		}
	}
	return out, nil
}

// takesSlot says whether a run Job's playbook label is one of the runs
// that take a rollout slot.
func takesSlot(label string) bool {
	for _, p := range []string{upgradePlaybook, "wsu:remove.hcl", "wsu:" + rotateKeyPlaybook} {
		if label == run.LabelValue(p) {
			return true
		}
	}
	return false
}

// applyingInJobs are, in Job mode, the instances of namespace whose apply
// of a playbook that takes a slot runs in a Job not finished yet: a pass no
// longer holds its slot while the run goes on (run/jobrunner.go), and a Job
// a previous leader started counts as well.
func (r *InstanceReconciler) applyingInJobs(ctx context.Context, namespace string) (map[string]bool, error) {
	out := map[string]bool{}
	jr, ok := r.Options.Runner.(*run.JobRunner)
	if !ok {
		return out, nil
	}
	jobs, err := jr.UnfinishedApplies(ctx, namespace)
	if err != nil {
		return nil, err
	}
	for _, job := range jobs {
		if takesSlot(job.Labels[run.JobPlaybookLabel]) {
			out[namespace+"/"+job.Labels[run.JobInstanceLabel]] = true
		}
	}
	return out, nil
}

// markHolder is the instance a marked Node the cached instances did not
// explain belongs to, read from the API server: "" when it is another
// namespace's, or its instance is gone or recorded another Node (a stale
// mark, cleared here).
func (r *InstanceReconciler) markHolder(ctx context.Context, namespace string, n *corev1.Node) (string, error) {
	owner, ok := strings.CutPrefix(n.Annotations[kube.OwnerAnnotation], kube.InstanceOwner(namespace, ""))
	if !ok || owner == "" || strings.Contains(owner, "/") {
		return "", nil // not this namespace's
	}
	wi := &wsuv1.WindowsInstance{}
	err := r.apiReader().Get(ctx, types.NamespacedName{Namespace: namespace, Name: owner}, wi)
	switch {
	case err == nil && wi.Status.NodeUID == string(n.UID):
		return instanceKey(wi), nil
	case err == nil && wi.Status.NodeUID == "":
		return "", nil // not recorded yet: neither counted nor cleared
	case err != nil && !apierrors.IsNotFound(err):
		return "", err
	}
	log.FromContext(ctx).Info("clearing a stale out-of-service mark", "node", n.Name, "instance", namespace+"/"+owner)
	return "", r.setMark(ctx, n.Name, string(n.UID), "")
}

// markNode marks wi's recorded Node out of service (value why), or clears
// the mark (""). An instance that recorded no Node, or whose Node is gone
// or another one now, has nothing to mark.
func (r *InstanceReconciler) markNode(ctx context.Context, wi *wsuv1.WindowsInstance, why string) error {
	if wi.Status.NodeUID == "" || wi.Status.NodeName == "" {
		return nil
	}
	return r.setMark(ctx, wi.Status.NodeName, wi.Status.NodeUID, why)
}

// setMark sets or clears the mark on Node name if it has uid, guarded by
// its resourceVersion (a Node of that name registered since is left
// alone).
func (r *InstanceReconciler) setMark(ctx context.Context, name, uid, why string) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node := &corev1.Node{}
		if err := r.apiReader().Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return client.IgnoreNotFound(err)
		}
		if string(node.UID) != uid || node.Labels[UnavailableLabel] == why {
			return nil
		}
		orig := node.DeepCopy()
		if why == "" {
			delete(node.Labels, UnavailableLabel)
		} else {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[UnavailableLabel] = why
		}
		if err := r.Client.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return client.IgnoreNotFound(err)
		}
		if why == "" {
			return nil // a cache that still shows the mark only counts too much
		}
		return r.cacheShowsMark(ctx, name, uid)
	})
}

// cacheShowsMark waits until the cache the slots are counted from shows
// the mark just set: the slot held in memory is released when the run
// ends, and from then on only the mark counts it.
func (r *InstanceReconciler) cacheShowsMark(ctx context.Context, name, uid string) error {
	return wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		node := &corev1.Node{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return string(node.UID) != uid || node.Labels[UnavailableLabel] != "", nil
	})
}

// clearUpgradeMark clears the upgrade mark of an instance's Node once it
// is back:
// at the payload version (the caller checked) and schedulable. A Node
// left cordoned (a controller stopped between the version annotation and
// the uncordon) stays counted until an admin uncordons it.
func (r *InstanceReconciler) clearUpgradeMark(ctx context.Context, node *corev1.Node) error {
	if node.Labels[UnavailableLabel] != unavailableUpgrade || node.Spec.Unschedulable {
		return nil
	}
	return r.setMark(ctx, node.Name, string(node.UID), "")
}

// apiReader reads from the API server, uncached (Reader), else Client.
func (r *InstanceReconciler) apiReader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}
