package controller

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/setup"
)

// InstanceReconciler keeps one WindowsInstance's host joined: plan, approve,
// apply, record; and deconfigures it when the instance is deleted.
type InstanceReconciler struct {
	Client client.Client
	// Reader reads the instance itself, uncached: a pass must start from
	// the status the last pass wrote (the cache may not have it yet), or it
	// would run a playbook again and write an older status back. nil:
	// Client.
	Reader  client.Reader
	Events  record.EventRecorder
	Options Options

	metrics  *metrics
	settings *clusterSettings
	rollouts *rolloutLimit
	payloads *payloadVersions
	schedule *planSchedule
}

// Event reasons (WMCO's where it has one).
const (
	ReasonSetup            = "InstanceSetup"
	ReasonSetupFailure     = "InstanceSetupFailure"
	ReasonTeardown         = "InstanceTeardown"
	ReasonTeardownFailure  = "InstanceTeardownFailure"
	ReasonPlanned          = "Planned"
	ReasonAwaitingApproval = "AwaitingApproval"
	ReasonUnreachable      = "Unreachable"
	ReasonDrifted          = "Drifted"
	ReasonInSync           = "InSync"
	ReasonApplied          = "Applied"
	ReasonApplyFailed      = "ApplyFailed"
	ReasonPlanFailed       = "PlanFailed"
	ReasonBackoff          = "BackingOff"
	ReasonInvalidInput     = "InvalidInput"
	ReasonNodeReady        = "NodeReady"
	ReasonNodeNotReady     = "NodeNotReady"
	ReasonNoNode           = "NodeNotFound"
	ReasonForgotten        = "Forgotten"
)

// The controller's permissions (deploy/rbac/controller, make generate): its own
// namespace's instances, ConfigMaps (read, and written for each instance's
// last plan text, plantext.go), Secrets (read: the keys by a get per
// run, the watch of their metadata; never written), events and Lease;
// Nodes (read, and delete for a removed instance: the playbooks' cluster
// tasks, with deploy/rbac/wsu-cluster-role.yaml's rights, label and cordon);
// its own namespace and the WindowsInstance CRD, read only, to tell an
// uninstall from a removal (uninstall.go); TokenReviews and
// SubjectAccessReviews for the metrics endpoint's authentication and
// authorization. Job mode's rights (Jobs, their pods) are a Role of their own,
// bound only when Job mode is on (deploy/components/job-mode).
// +kubebuilder:rbac:groups=wsu.dev,namespace=wsu-system,resources=windowsinstances,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=wsu.dev,namespace=wsu-system,resources=windowsinstances/status;windowsinstances/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups="",namespace=wsu-system,resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",namespace=wsu-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=wsu-system,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=wsu-system,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",namespace=wsu-system,resources=namespaces,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,resourceNames=windowsinstances.wsu.dev,verbs=get
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Reconcile implements reconcile.Reconciler.
func (r *InstanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	wi := &wsuv1.WindowsInstance{}
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	if err := reader.Get(ctx, req.NamespacedName, wi); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wi.DeletionTimestamp.IsZero() {
		if r.schedule != nil {
			r.schedule.forget(wi.UID)
		}
		return r.deconfigure(ctx, wi)
	}
	if res, paused, err := r.checkPaused(ctx, wi); paused || err != nil { // pause.go
		return res, err
	}
	if res, wmco, err := r.checkWMCO(ctx, wi); wmco || err != nil { // wmco.go
		return res, err
	}
	if controllerutil.AddFinalizer(wi, wsuv1.Finalizer) {
		if err := r.Client.Update(ctx, wi); err != nil {
			return ctrl.Result{}, err
		}
	}
	if wi.Spec.Paused {
		return r.setPhase(ctx, wi, wsuv1.PhasePaused)
	}
	orig := wi.DeepCopy()
	if err := r.checkRecordedNode(ctx, wi); err != nil { // nodes.go
		return ctrl.Result{}, err
	}
	if wait := r.backoffLeft(wi); wait > 0 {
		return r.done(ctx, orig, wi, wi.Status.Phase, wait)
	}
	if err := r.checkSpec(wi); err != nil {
		return r.refuse(ctx, orig, wi, err)
	}
	if err := r.checkNode(ctx, wi); err != nil { // nodes.go
		var nr *NodeRefused
		if errors.As(err, &nr) {
			return r.refuse(ctx, orig, wi, err)
		}
		return ctrl.Result{}, err
	}
	meta.RemoveStatusCondition(&wi.Status.Conditions, wsuv1.ConditionValid)
	want, due, err := r.upgradeDue(ctx, wi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if due {
		return r.upgrade(ctx, orig, wi, want)
	}
	settings, err := r.settings.version(ctx) // clustersettings.go
	if err != nil {
		return ctrl.Result{}, err
	}
	if wait := r.untilNextPlan(wi, settings); wait > 0 && !r.keyRotationPending(ctx, wi) {
		if wi.Status.Phase == wsuv1.PhaseAwaitingApproval {
			return r.done(ctx, orig, wi, wsuv1.PhaseAwaitingApproval, wait)
		}
		return r.watchNode(ctx, orig, wi, wait)
	}
	return r.converge(ctx, orig, wi, settings)
}

// untilNextPlan is how long a joined, healthy instance, or one whose plan
// awaits approval, waits before it is planned again (its drift sweep, or a
// fresh plan for the approver): a Node heartbeat, a label or the pass's own
// status write wakes the reconciler often, and each pass must not cost a
// run. A new spec, an approval of the recorded plan's hash, a failure or a
// host not yet joined plans at once, and so does a change of the cluster
// settings since the last plan (settings, clustersettings.go).
func (r *InstanceReconciler) untilNextPlan(wi *wsuv1.WindowsInstance, settings string) time.Duration {
	st := wi.Status
	switch {
	case st.LastPlan == nil, st.ObservedGeneration != wi.Generation, st.LastPlan.ClusterSettings != settings,
		meta.IsStatusConditionTrue(st.Conditions, wsuv1.ConditionDegraded):
		return 0
	case st.Phase == wsuv1.PhaseAwaitingApproval:
		if st.LastPlan.Playbook == upgradePlaybook || wi.Annotations[wsuv1.ApprovedPlanAnnotation] == st.LastPlan.Hash {
			return 0
		}
	case st.Phase != wsuv1.PhaseJoined, !meta.IsStatusConditionTrue(st.Conditions, wsuv1.ConditionJoined):
		return 0
	}
	return r.untilPlan(wi) // planschedule.go
}

// watchNode records the Node's readiness between plans.
func (r *InstanceReconciler) watchNode(ctx context.Context, orig, wi *wsuv1.WindowsInstance, untilPlan time.Duration) (ctrl.Result, error) {
	ready, err := r.recordNode(ctx, wi)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.done(ctx, orig, wi, wsuv1.PhaseJoined, r.joinedRequeue(ready, untilPlan))
}

// joinedRequeue is when a joined instance is looked at again: at its next
// plan, sooner while its Node is not Ready, and at least every PayloadCheck
// when a payload version is known (a payload changed in place is rolled
// out without waiting for the drift pass).
func (r *InstanceReconciler) joinedRequeue(ready bool, untilPlan time.Duration) time.Duration {
	requeue := untilPlan
	if !ready {
		requeue = min(requeue, r.Options.NodeReadyCheck)
	}
	if r.payloads != nil && r.payloads.dir != "" {
		requeue = min(requeue, r.Options.PayloadCheck)
	}
	return requeue
}

// backoffLeft is how long a failed instance still waits; a changed spec
// (new generation) retries at once.
func (r *InstanceReconciler) backoffLeft(wi *wsuv1.WindowsInstance) time.Duration {
	st := wi.Status
	if st.Failures == 0 || st.NextRetry == nil || st.ObservedGeneration != wi.Generation {
		return 0
	}
	if _, approved := wi.Annotations[wsuv1.ApprovedPlanAnnotation]; approved && st.Phase == wsuv1.PhaseAwaitingApproval {
		return 0
	}
	return time.Until(st.NextRetry.Time)
}

// converge plans the instance's playbook and applies the plan when it may.
// settings is the cluster settings' version, recorded with the plan; a plan
// with changes while the host is not in line with that version is a push
// (clustersettings.go).
func (r *InstanceReconciler) converge(ctx context.Context, orig, wi *wsuv1.WindowsInstance, settings string) (ctrl.Result, error) {
	if res, done, err := r.rotateKeyIfPending(ctx, orig, wi); done { // keyrotation.go
		return res, err
	}
	rr, err := r.runRequest(ctx, wi, "")
	if err != nil {
		return r.badRequest(ctx, orig, wi, err)
	}
	defer keepConnections(&rr)()
	plan := r.run(ctx, wi, &rr, engine.ModePlan)
	if interrupted(ctx, plan) {
		return resumeAfter(plan), nil
	}
	r.recordReach(wi, plan)
	if res, done, err := r.replaceIfLoginRefused(ctx, orig, wi, plan); done { // machinereplace.go
		return res, err
	}
	if plan.Failed {
		reason := ReasonPlanFailed
		if plan.Unreachable {
			reason = ReasonUnreachable
		}
		return r.failed(ctx, orig, wi, reason, plan.Message, plan.Unreachable)
	}
	r.recordPlan(wi, rr.Playbook, plan)
	wi.Status.LastPlan.ClusterSettings = settings
	r.keepPlanText(ctx, wi, rr.Playbook, plan) // plantext.go
	joined := meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined)
	if plan.Changed == 0 {
		wi.Status.ClusterSettings = settings
		return r.inSync(ctx, orig, wi)
	}
	if push := joined && pushPending(wi, settings); push {
		return r.push(ctx, orig, wi, rr, plan)
	}
	if joined {
		setCondition(wi, wsuv1.ConditionDrifted, metav1.ConditionTrue, ReasonDrifted,
			fmt.Sprintf("%d task(s) differ from the playbook: %s", plan.Changed, strings.Join(plan.Tasks, ", ")))
		r.metrics.drifted(wi, true)
		if wi.Spec.DriftPolicy != wsuv1.DriftCorrect {
			r.event(wi, corev1.EventTypeWarning, ReasonDrifted, "plan %s: %d change(s) on a joined host (driftPolicy Report): %s", plan.Hash, plan.Changed, strings.Join(plan.Tasks, ", "))
			return r.done(ctx, orig, wi, wsuv1.PhaseJoined, r.untilPlan(wi))
		}
	}
	if !r.approved(wi, plan) {
		return r.awaitApproval(ctx, orig, wi, plan)
	}
	return r.apply(ctx, orig, wi, rr, plan)
}

// approved says whether plan may be applied: at once (Auto), or when an
// admin approved exactly its hash (Manual).
func (r *InstanceReconciler) approved(wi *wsuv1.WindowsInstance, plan run.Outcome) bool {
	if wi.Spec.Approval != wsuv1.ApprovalManual {
		return true
	}
	return plan.Hash != "" && wi.Annotations[wsuv1.ApprovedPlanAnnotation] == plan.Hash
}

// awaitApproval stops at a plan an admin has not approved.
func (r *InstanceReconciler) awaitApproval(ctx context.Context, orig, wi *wsuv1.WindowsInstance, plan run.Outcome) (ctrl.Result, error) {
	setCondition(wi, wsuv1.ConditionPlanned, metav1.ConditionTrue, ReasonAwaitingApproval,
		fmt.Sprintf("plan %s awaits approval: kubectl annotate windowsinstance %s %s=%s (or wsu approve)", plan.Hash, wi.Name, wsuv1.ApprovedPlanAnnotation, plan.Hash))
	r.event(wi, corev1.EventTypeNormal, ReasonAwaitingApproval, "plan %s of %s (%d to add, %d to change, %d to destroy, %d to run) awaits approval", plan.Hash, wi.Status.LastPlan.Playbook, plan.Add, plan.Change, plan.Destroy, plan.Run)
	return r.done(ctx, orig, wi, wsuv1.PhaseAwaitingApproval, 0)
}

// apply applies exactly the plan just made (a fresh plan that differs is
// refused by the engine, so what is applied is what was approved).
func (r *InstanceReconciler) apply(ctx context.Context, orig, wi *wsuv1.WindowsInstance, rr run.Request, plan run.Outcome) (ctrl.Result, error) {
	res, took, err := r.adoptionSlot(ctx, orig, wi) // nodes.go
	if err != nil || res != (ctrl.Result{}) {
		return res, err
	}
	if took {
		defer r.rollouts.release(wi)
	}
	r.setStatusPhase(ctx, orig, wi, wsuv1.PhaseJoining)
	orig = wi.DeepCopy()
	rr.HoldTo(plan)
	out := r.run(ctx, wi, &rr, engine.ModeApply)
	if interrupted(ctx, out) {
		return resumeAfter(out), nil
	}
	r.recordReach(wi, out)
	wi.Status.LastApply = &wsuv1.RunSummary{Playbook: rr.Playbook, Result: runResult(out), Changed: out.Changed, Time: metav1.Now()}
	if out.Failed {
		setCondition(wi, wsuv1.ConditionJoined, metav1.ConditionFalse, ReasonApplyFailed, run.Truncate(out.Message, 1000))
		r.event(wi, corev1.EventTypeWarning, ReasonSetupFailure, "applying plan %s failed: %s", plan.Hash, run.Truncate(out.Message, 1000))
		return r.failed(ctx, orig, wi, ReasonApplyFailed, out.Message, out.Unreachable)
	}
	wi.Status.ClusterSettings = wi.Status.LastPlan.ClusterSettings
	setCondition(wi, wsuv1.ConditionJoined, metav1.ConditionTrue, ReasonApplied, fmt.Sprintf("plan %s applied: %d task(s) changed", plan.Hash, out.Changed))
	setCondition(wi, wsuv1.ConditionDrifted, metav1.ConditionFalse, ReasonInSync, "the host matches the playbook")
	r.metrics.drifted(wi, false)
	r.event(wi, corev1.EventTypeNormal, ReasonSetup, "applied plan %s: %d task(s) changed", plan.Hash, out.Changed)
	return r.inSync(ctx, orig, wi)
}

// inSync records a host that matches its playbook, and its Node.
func (r *InstanceReconciler) inSync(ctx context.Context, orig, wi *wsuv1.WindowsInstance) (ctrl.Result, error) {
	wasJoined := meta.IsStatusConditionTrue(orig.Status.Conditions, wsuv1.ConditionJoined)
	setCondition(wi, wsuv1.ConditionJoined, metav1.ConditionTrue, ReasonInSync, "the host matches the playbook")
	setCondition(wi, wsuv1.ConditionDrifted, metav1.ConditionFalse, ReasonInSync, "the host matches the playbook")
	meta.RemoveStatusCondition(&wi.Status.Conditions, wsuv1.ConditionDegraded)
	r.metrics.drifted(wi, false)
	wi.Status.Failures, wi.Status.NextRetry = 0, nil
	if !wasJoined && orig.Status.LastApply == nil {
		r.event(wi, corev1.EventTypeNormal, ReasonInSync, "the host already matches the playbook")
	}
	requeue := r.nodeRequeue(ctx, wi)
	_, due, err := r.upgradeDue(ctx, wi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if due {
		requeue = min(requeue, r.Options.NodeReadyCheck)
	}
	return r.done(ctx, orig, wi, wsuv1.PhaseJoined, requeue)
}

// nodeRequeue records the instance's Node and says when a joined instance
// is looked at again.
func (r *InstanceReconciler) nodeRequeue(ctx context.Context, wi *wsuv1.WindowsInstance) time.Duration {
	ready, err := r.recordNode(ctx, wi)
	if err != nil {
		log.FromContext(ctx).Error(err, "reading the Node")
		return r.Options.NodeReadyCheck
	}
	return r.joinedRequeue(ready, r.untilPlan(wi))
}

// recordNode finds the instance's Node and records whether it is Ready.
func (r *InstanceReconciler) recordNode(ctx context.Context, wi *wsuv1.WindowsInstance) (bool, error) {
	name := r.nodeName(wi)
	if name == "" {
		setCondition(wi, wsuv1.ConditionNodeReady, metav1.ConditionUnknown, ReasonNoNode, "the host's name is not known yet")
		return false, nil
	}
	node := &corev1.Node{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: name}, node)
	switch {
	case apierrors.IsNotFound(err):
		setCondition(wi, wsuv1.ConditionNodeReady, metav1.ConditionFalse, ReasonNoNode, fmt.Sprintf("there is no Node %s", name))
		return false, nil
	case err != nil:
		return false, err
	}
	if !ownNode(wi, node) { // nodes.go
		setCondition(wi, wsuv1.ConditionNodeReady, metav1.ConditionUnknown, ReasonNodeNotOwned, fmt.Sprintf("Node %s is not this instance's (not a Windows Node marked %s=%s, or not the UID recorded)", name, kube.OwnerAnnotation, nodeOwner(wi)))
		return false, nil
	}
	wi.Status.NodeName, wi.Status.NodeUID = name, string(node.UID)
	if v := nodeVersion(node); v != "" {
		wi.Status.AppliedVersion = v
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			setCondition(wi, wsuv1.ConditionNodeReady, metav1.ConditionTrue, ReasonNodeReady, fmt.Sprintf("Node %s is Ready", name))
			return true, nil
		}
	}
	setCondition(wi, wsuv1.ConditionNodeReady, metav1.ConditionFalse, ReasonNodeNotReady, fmt.Sprintf("Node %s is not Ready", name))
	return false, nil
}

// versionAnnotations hold the payload version the join playbook writes on
// the Node: its default name off OpenShift first, then WMCO's, which join
// writes on OpenShift (and older wsu everywhere). join removes WMCO's
// from a kubeadm node when it writes its own, so the first one present is
// current.
var versionAnnotations = [...]string{"wsu.dev/version", "windowsmachineconfig.openshift.io/version"}

// nodeVersion is the payload version node was last joined with, or "".
func nodeVersion(node *corev1.Node) string {
	for _, a := range versionAnnotations {
		if v := node.Annotations[a]; v != "" {
			return v
		}
	}
	return ""
}

// nodeName is the Node the host registers as: the node_name variable when
// set, else its host name lower-cased, as the kubelet registers.
func (r *InstanceReconciler) nodeName(wi *wsuv1.WindowsInstance) string { return instanceNodeName(wi) }

// instanceNodeName is InstanceReconciler.nodeName, for the Node watch.
func instanceNodeName(wi *wsuv1.WindowsInstance) string {
	if n := wi.Spec.Vars["node_name"]; n != "" {
		return strings.Trim(n, `"`)
	}
	if wi.Status.NodeName != "" {
		return wi.Status.NodeName
	}
	return strings.ToLower(wi.Status.Identity.Hostname)
}

// deconfigure runs the remove playbook on a deleted instance's host, then
// lets the object go. An unreachable host keeps the finalizer and retries
// with backoff, unless the admin told wsu to forget it.
func (r *InstanceReconciler) deconfigure(ctx context.Context, wi *wsuv1.WindowsInstance) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(wi, wsuv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if done, err := r.letGoOnUninstall(ctx, wi); done || err != nil {
		return ctrl.Result{}, err
	}
	if res, paused, err := r.checkPaused(ctx, wi); paused || err != nil {
		return res, err
	}
	if res, wmco, err := r.checkWMCO(ctx, wi); wmco || err != nil {
		return res, err
	}
	orig := wi.DeepCopy()
	if wi.Annotations[wsuv1.ForgetAnnotation] == "true" {
		r.event(wi, corev1.EventTypeWarning, ReasonForgotten, "forgotten without running remove on the host (%s=true)", wsuv1.ForgetAnnotation)
		if err := r.deleteNode(ctx, wi); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.release(ctx, wi)
	}
	if err := r.checkHostVars(wi); err != nil {
		return r.refuse(ctx, orig, wi, err)
	}
	if wait := r.backoffLeft(wi); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if ok, err := r.takeSlot(ctx, wi); err != nil || !ok { // rollout.go
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: r.slotRecheck()}, nil
	}
	defer r.rollouts.release(wi)
	if err := r.markNode(ctx, wi, unavailableRemove); err != nil {
		return ctrl.Result{}, err
	}
	r.setStatusPhase(ctx, orig, wi, wsuv1.PhaseRemoving)
	orig = wi.DeepCopy()
	rr, err := r.runRequest(ctx, wi, "wsu:remove.hcl")
	if err != nil {
		return r.badRequest(ctx, orig, wi, err)
	}
	out := r.run(ctx, wi, &rr, engine.ModeApply)
	if interrupted(ctx, out) {
		return resumeAfter(out), nil
	}
	r.recordReach(wi, out)
	if out.Failed {
		r.event(wi, corev1.EventTypeWarning, ReasonTeardownFailure, "removing failed: %s (annotate %s=true to forget a host that is gone for good)", run.Truncate(out.Message, 1000), wsuv1.ForgetAnnotation)
		return r.failed(ctx, orig, wi, ReasonTeardownFailure, out.Message, out.Unreachable)
	}
	r.event(wi, corev1.EventTypeNormal, ReasonTeardown, "the host was deconfigured")
	if err := r.deleteNode(ctx, wi); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.release(ctx, wi)
}

// release removes the finalizer and the instance's local state.
func (r *InstanceReconciler) release(ctx context.Context, wi *wsuv1.WindowsInstance) error {
	os.RemoveAll(r.stateDir(wi))
	r.metrics.forget(wi)
	controllerutil.RemoveFinalizer(wi, wsuv1.Finalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, wi))
}

// keepConnections makes the runs of rr in this reconcile (a plan, then
// the apply of it, which plans again to check it) share the host's
// connection, dialled once instead of three times; the returned func
// closes it when the reconcile is done with the host.
func keepConnections(rr *run.Request) (closeAll func()) {
	rr.Connections = engine.NewConnections()
	return func() { rr.Connections.Close() }
}

// run runs one playbook for the instance, counted in the metrics. A run
// the host refused to log in to is tried with the key Secret's other key
// (keyrotation.go), which rr then keeps.
func (r *InstanceReconciler) run(ctx context.Context, wi *wsuv1.WindowsInstance, rr *run.Request, mode engine.Mode) run.Outcome {
	return r.tryOtherKey(ctx, wi, rr, mode, r.runOnce(ctx, *rr, mode))
}

func (r *InstanceReconciler) runOnce(ctx context.Context, rr run.Request, mode engine.Mode) run.Outcome {
	rr.Mode = mode
	start := time.Now()
	out := r.Options.Runner.Run(ctx, rr)
	if out.Pending {
		return out // counted when its result is read
	}
	took := time.Since(start)
	if out.Took > 0 {
		took = out.Took
	}
	r.metrics.observeRun(rr.Playbook, mode, out, took)
	log.FromContext(ctx).Info("run", "playbook", rr.Playbook, "mode", mode, "failed", out.Failed, "changed", out.Changed, "seconds", took.Seconds())
	return out
}

// interrupted says the pass stops at a run without recording anything:
// the run goes on in a Job (Pending), whose completion reconciles the
// instance again, or it was cut short because the controller is stopping
// (its context ended, SIGTERM), not the host's failure, and the next
// controller starts over from status (and the Jobs).
func interrupted(ctx context.Context, out run.Outcome) bool {
	return out.Pending || out.Failed && ctx.Err() != nil
}

// resumeAfter is the result of a pass stopped at a run: a run waiting for
// room among the running Jobs is asked for again after RetryAfter; a Job's
// completion needs no requeue (the controller watches its Jobs).
func resumeAfter(out run.Outcome) ctrl.Result { return ctrl.Result{RequeueAfter: out.RetryAfter} }

// recordReach records whether the host could be reached and what it said
// of itself.
func (r *InstanceReconciler) recordReach(wi *wsuv1.WindowsInstance, out run.Outcome) {
	switch {
	case out.Unreachable:
		setCondition(wi, wsuv1.ConditionReachable, metav1.ConditionFalse, ReasonUnreachable, run.Truncate(out.Message, 1000))
	case out.Facts != nil:
		setCondition(wi, wsuv1.ConditionReachable, metav1.ConditionTrue, "Connected", "connected over SSH")
	}
	if out.Facts != nil {
		wi.Status.Identity.Hostname = out.Facts.Hostname
		if out.Facts.IPv4 != "" {
			wi.Status.Identity.Addresses = []string{out.Facts.IPv4}
		}
	}
	if wi.Status.Identity.HostKey == "" {
		if key, fp := pinnedHostKey(r.knownHostsFile(wi)); key != "" {
			wi.Status.Identity.HostKey, wi.Status.Identity.HostKeySHA256 = key, fp
		}
	}
}

// recordPlan records a successful plan and schedules the next. The same
// plan made again keeps the time it was first made, so a pass that finds
// nothing new writes no status (planschedule.go).
func (r *InstanceReconciler) recordPlan(wi *wsuv1.WindowsInstance, playbook string, out run.Outcome) {
	was := wi.Status.LastPlan
	wi.Status.LastPlan = &wsuv1.PlanSummary{
		Hash: out.Hash, Playbook: playbook, Add: out.Add, Change: out.Change, Destroy: out.Destroy, Run: out.Run,
		Tasks: out.Tasks, Time: metav1.Now(),
	}
	if samePlan(was, wi.Status.LastPlan) {
		wi.Status.LastPlan.Time = was.Time
	}
	r.schedulePlan(wi)
	msg := fmt.Sprintf("plan %s: %d to add, %d to change, %d to destroy, %d to run", out.Hash, out.Add, out.Change, out.Destroy, out.Run)
	setCondition(wi, wsuv1.ConditionPlanned, metav1.ConditionTrue, ReasonPlanned, msg)
	if out.Changed > 0 {
		r.event(wi, corev1.EventTypeNormal, ReasonPlanned, "%s", msg)
	}
}

// samePlan says whether b is the plan a recorded: the same hash, playbook,
// counts and tasks (its time and cluster settings aside).
func samePlan(a, b *wsuv1.PlanSummary) bool {
	if a == nil || b == nil {
		return false
	}
	return a.Hash == b.Hash && a.Playbook == b.Playbook && a.Add == b.Add && a.Change == b.Change &&
		a.Destroy == b.Destroy && a.Run == b.Run && slices.Equal(a.Tasks, b.Tasks)
}

// failed records a failed run and when it is tried again: exponential
// backoff per instance, so one bad host never delays another.
func (r *InstanceReconciler) failed(ctx context.Context, orig, wi *wsuv1.WindowsInstance, reason, msg string, unreachable bool) (ctrl.Result, error) {
	wi.Status.Failures++
	wait := backoff(r.Options.Backoff, r.Options.MaxBackoff, wi.Status.Failures)
	next := metav1.NewTime(time.Now().Add(wait))
	wi.Status.NextRetry = &next
	setCondition(wi, wsuv1.ConditionDegraded, metav1.ConditionTrue, reason, run.Truncate(msg, 1000))
	if unreachable {
		r.event(wi, corev1.EventTypeWarning, ReasonUnreachable, "%s; retrying in %s", run.Truncate(msg, 1000), wait.Round(time.Second))
	} else {
		r.event(wi, corev1.EventTypeWarning, reason, "%s; retrying in %s", run.Truncate(msg, 1000), wait.Round(time.Second))
	}
	phase := wsuv1.PhaseFailed
	if !wi.DeletionTimestamp.IsZero() {
		phase = wsuv1.PhaseRemoving
	}
	return r.done(ctx, orig, wi, phase, wait)
}

// refuse records a spec the controller will not act on (Valid=False, an
// event) and runs nothing: a new generation of the spec is looked at
// again (deleting a refused instance needs the fix too, or the forget
// annotation).
func (r *InstanceReconciler) refuse(ctx context.Context, orig, wi *wsuv1.WindowsInstance, err error) (ctrl.Result, error) {
	reason := ReasonInvalidInput
	var hv *HostVarsRefused
	var pb *PlaybookRefused
	var nr *NodeRefused
	switch {
	case errors.As(err, &hv):
		reason = ReasonHostVarRefused
	case errors.As(err, &pb):
		reason = ReasonPlaybookRefused
	case errors.As(err, &nr):
		reason = nr.Reason
	}
	msg := run.Truncate(err.Error(), 1000)
	was := meta.FindStatusCondition(orig.Status.Conditions, wsuv1.ConditionValid)
	setCondition(wi, wsuv1.ConditionValid, metav1.ConditionFalse, reason, msg)
	if was == nil || was.Status != metav1.ConditionFalse || was.Message != msg || was.ObservedGeneration != wi.Generation {
		r.event(wi, corev1.EventTypeWarning, reason, "%s; nothing runs until the spec is fixed", msg)
	}
	phase := wsuv1.PhaseFailed
	if !wi.DeletionTimestamp.IsZero() {
		phase = wsuv1.PhaseRemoving
	}
	return r.done(ctx, orig, wi, phase, 0)
}

// badRequest records a run that could not be set up: refused when the
// instance asks for what it may not (nodes.go), failed otherwise.
func (r *InstanceReconciler) badRequest(ctx context.Context, orig, wi *wsuv1.WindowsInstance, err error) (ctrl.Result, error) {
	var nr *NodeRefused
	if errors.As(err, &nr) {
		return r.refuse(ctx, orig, wi, err)
	}
	return r.failed(ctx, orig, wi, ReasonInvalidInput, err.Error(), false)
}

// backoff is base·2^(failures-1), at most max.
func backoff(base, max time.Duration, failures int32) time.Duration {
	d := base
	for i := int32(1); i < failures && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// driftRequeue is the next periodic plan, jittered so a fleet's instances
// spread out.
func (r *InstanceReconciler) driftRequeue() time.Duration {
	d := r.Options.DriftInterval
	return d + time.Duration(rand.Int64N(int64(d)/10+1))
}

// done writes the status and asks to be called again after requeue.
func (r *InstanceReconciler) done(ctx context.Context, orig, wi *wsuv1.WindowsInstance, phase string, requeue time.Duration) (ctrl.Result, error) {
	wi.Status.Phase = phase
	wi.Status.ObservedGeneration = wi.Generation
	r.metrics.instance(wi)
	if equality.Semantic.DeepEqual(orig.Status, wi.Status) {
		return ctrl.Result{RequeueAfter: requeue}, nil
	}
	if err := r.Client.Status().Patch(ctx, wi, statusPatch(orig)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// setStatusPhase shows a long step (joining, removing) while it runs.
func (r *InstanceReconciler) setStatusPhase(ctx context.Context, orig, wi *wsuv1.WindowsInstance, phase string) {
	wi.Status.Phase = phase
	if err := r.Client.Status().Patch(ctx, wi, statusPatch(orig)); err != nil {
		log.FromContext(ctx).Error(err, "recording the phase", "phase", phase)
	}
}

func (r *InstanceReconciler) setPhase(ctx context.Context, wi *wsuv1.WindowsInstance, phase string) (ctrl.Result, error) {
	return r.done(ctx, wi.DeepCopy(), wi, phase, 0)
}

// event records an event on the instance, and on the BYOH ConfigMap for an
// instance that came from it.
func (r *InstanceReconciler) event(wi *wsuv1.WindowsInstance, kind, reason, format string, args ...any) {
	if r.Events == nil {
		return
	}
	r.Events.Eventf(wi, kind, reason, format, args...)
	if wi.Labels[wsuv1.SourceLabel] == wsuv1.SourceConfigMap && r.Options.ConfigMap != "" {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: r.Options.ConfigMap, Namespace: r.Options.BYOHNamespace}}
		for _, o := range wi.OwnerReferences {
			if o.Kind == "ConfigMap" {
				cm.UID = o.UID
			}
		}
		r.Events.Eventf(cm, kind, reason, "%s: "+format, append([]any{wi.Spec.Address}, args...)...)
	}
}

// statusPatch is a merge patch guarded by orig's resourceVersion: a status
// computed from an object someone changed since is refused (and the pass
// retried from a fresh read) rather than written over theirs, since a
// merge patch replaces the conditions list whole.
func statusPatch(orig *wsuv1.WindowsInstance) client.Patch {
	return client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
}

func setCondition(wi *wsuv1.WindowsInstance, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&wi.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: wi.Generation,
	})
}

// runRequest builds what a run of the instance's playbook (or of playbook,
// when not "") needs: its one-host inventory with the key from its Secret,
// and the variables.
func (r *InstanceReconciler) runRequest(ctx context.Context, wi *wsuv1.WindowsInstance, playbook string) (run.Request, error) {
	inv, key, err := r.inventory(ctx, wi)
	if err != nil {
		return run.Request{}, err
	}
	if playbook == "" {
		if playbook, err = r.playbook(ctx, wi); err != nil {
			return run.Request{}, err
		}
	}
	vars, fromSecrets, err := r.vars(ctx, wi)
	if err != nil {
		return run.Request{}, err
	}
	if err := checkVars(vars, len(r.Options.Vars)); err != nil {
		return run.Request{}, err
	}
	vars = append(vars, nodeVars(wi, playbook)...) // last: they win
	var readDirs []string
	if r.payloads != nil && r.payloads.dir != "" {
		readDirs = []string{r.payloads.dir}
	}
	instance := wi.Namespace + "/" + wi.Name
	return run.Request{
		Request: setup.Request{
			Inputs:    planfile.Inputs{Playbook: playbook, Vars: vars, VarFiles: r.Options.VarFiles, Kubeconfig: r.Options.Kubeconfig},
			Inventory: inv,
			Confined:  true,
			ReadDirs:  readDirs,
			Salt:      run.PlanSalt(instance),
		},
		Instance: instance,
		Secrets:  run.Secrets{Key: key, Vars: fromSecrets},
	}, nil
}

// inventory is the instance's host in group windows, as a BYOH ConfigMap
// entry gives it, with the admin's and the instance's host variables and
// the controller's own applied last (hostvars.go): the private key
// (sensitive), the known_hosts file, and the host's SSH key, trusted on
// first use and pinned in status from then on, as WMCO's ssh-host-key
// annotation: a changed key is refused until the admin clears
// status.identity.hostKey. An instance setting a variable it may not is
// refused (HostVarsRefused) before anything else is read.
func (r *InstanceReconciler) inventory(ctx context.Context, wi *wsuv1.WindowsInstance) (*inventory.Inventory, run.SecretItem, error) {
	if err := r.checkHostVars(wi); err != nil {
		return nil, run.SecretItem{}, err
	}
	source := fmt.Sprintf("windowsinstance/%s/%s", wi.Namespace, wi.Name)
	inv, diags := inventory.ParseWindowsInstances(source, map[string]string{wi.Spec.Address: "username=" + wi.Spec.Username})
	if diags.HasErrors() {
		return nil, run.SecretItem{}, errors.New(run.FirstError(diags))
	}
	h := inv.Hosts[wi.Spec.Address]
	if h == nil {
		return nil, run.SecretItem{}, fmt.Errorf("address %q is not a usable host", wi.Spec.Address)
	}
	key, item, err := r.privateKey(ctx, wi)
	if err != nil {
		return nil, run.SecretItem{}, err
	}
	if err := os.MkdirAll(r.stateDir(wi), 0o700); err != nil {
		return nil, run.SecretItem{}, err
	}
	if err := r.setHostVars(h, wi, key, r.knownHostsFile(wi)); err != nil {
		return nil, run.SecretItem{}, err
	}
	return inv, item, nil
}

// privateKey is the key the instance logs in with, and where it is
// (keyrotation.go).
func (r *InstanceReconciler) privateKey(ctx context.Context, wi *wsuv1.WindowsInstance) (string, run.SecretItem, error) {
	keys, err := r.readKeys(ctx, wi)
	if err != nil {
		return "", run.SecretItem{}, err
	}
	recorded := wi.Status.Identity.KeyFingerprint
	return keys.inUse(recorded), run.SecretItem{Secret: keys.secret, Key: keys.inUseKey(recorded)}, nil
}

// playbook is the instance's playbook: a stock one (default join), or a
// site playbook written from its ConfigMap into the instance's state.
func (r *InstanceReconciler) playbook(ctx context.Context, wi *wsuv1.WindowsInstance) (string, error) {
	src := wi.Spec.Playbook
	switch {
	case src.ConfigMap != "" && src.Stock != "":
		return "", errors.New("spec.playbook names both a stock playbook and a ConfigMap; give one")
	case src.ConfigMap != "":
		if !r.Options.AllowPlaybookConfigMaps {
			return "", &PlaybookRefused{ConfigMap: src.ConfigMap}
		}
		return r.sitePlaybook(ctx, wi, src.ConfigMap)
	case src.Stock != "":
		return "wsu:" + strings.TrimSuffix(strings.TrimPrefix(src.Stock, "wsu:"), ".hcl") + ".hcl", nil
	default:
		return "wsu:join.hcl", nil
	}
}

// sitePlaybookKey is the root playbook's key in a site playbook ConfigMap.
const sitePlaybookKey = "playbook.hcl"

func (r *InstanceReconciler) sitePlaybook(ctx context.Context, wi *wsuv1.WindowsInstance, name string) (string, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: wi.Namespace, Name: name}, cm); err != nil {
		return "", fmt.Errorf("reading the playbook ConfigMap %s: %w", name, err)
	}
	if _, ok := cm.Data[sitePlaybookKey]; !ok {
		return "", fmt.Errorf("the playbook ConfigMap %s has no key %s", name, sitePlaybookKey)
	}
	dir := filepath.Join(r.stateDir(wi), "playbook")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for _, k := range sortedKeys(cm.Data) {
		if strings.ContainsAny(k, `/\`) || k == ".." {
			return "", fmt.Errorf("the playbook ConfigMap %s: key %q is not a file name", name, k)
		}
		if err := os.WriteFile(filepath.Join(dir, k), []byte(cm.Data[k]), 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, sitePlaybookKey), nil
}

// vars are the controller's -vars, then the instance's sources and its
// own, in that order (later wins); fromSecrets says which came from a
// varsFrom Secret, and from which key.
func (r *InstanceReconciler) vars(ctx context.Context, wi *wsuv1.WindowsInstance) (vars []string, fromSecrets map[int]run.SecretItem, err error) {
	vars = append([]string(nil), r.Options.Vars...)
	for _, src := range wi.Spec.VarsFrom {
		data, err := r.varSource(ctx, wi.Namespace, src)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range sortedKeys(data) {
			if src.Secret != "" {
				if fromSecrets == nil {
					fromSecrets = map[int]run.SecretItem{}
				}
				fromSecrets[len(vars)] = run.SecretItem{Secret: src.Secret, Key: k}
			}
			vars = append(vars, k+"="+data[k])
		}
	}
	for _, k := range sortedKeys(wi.Spec.Vars) {
		vars = append(vars, k+"="+wi.Spec.Vars[k])
	}
	return vars, fromSecrets, nil
}

func (r *InstanceReconciler) varSource(ctx context.Context, ns string, src wsuv1.VarSource) (map[string]string, error) {
	switch {
	case src.ConfigMap != "" && src.Secret != "":
		return nil, errors.New("a varsFrom entry names both a ConfigMap and a Secret; give one")
	case src.ConfigMap != "":
		cm := &corev1.ConfigMap{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.ConfigMap}, cm); err != nil {
			return nil, fmt.Errorf("reading varsFrom ConfigMap %s: %w", src.ConfigMap, err)
		}
		return cm.Data, nil
	case src.Secret != "":
		sec := &corev1.Secret{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: src.Secret}, sec); err != nil {
			return nil, fmt.Errorf("reading varsFrom Secret %s: %w", src.Secret, err)
		}
		data := map[string]string{}
		for k, v := range sec.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	return nil, errors.New("a varsFrom entry names neither a ConfigMap nor a Secret")
}

func (r *InstanceReconciler) stateDir(wi *wsuv1.WindowsInstance) string {
	return filepath.Join(r.Options.StateDir, wi.Namespace, wi.Name)
}

func (r *InstanceReconciler) knownHostsFile(wi *wsuv1.WindowsInstance) string {
	return filepath.Join(r.stateDir(wi), "known_hosts")
}
