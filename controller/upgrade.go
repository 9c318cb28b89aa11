package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
)

// upgradePlaybook is the stock upgrade: cordon and drain a node whose
// version annotation differs from the payload's, converge it with join at
// the new payload (whose last step annotates the version), wait Ready,
// uncordon.
const upgradePlaybook = "wsu:upgrade.hcl"

// Reasons of the UpToDate condition and the upgrade events.
const (
	ReasonAtVersion         = "AtPayloadVersion"
	ReasonOutdated          = "Outdated"
	ReasonRolloutWait       = "WaitingForRollout"
	ReasonUpgrading         = "Upgrading"
	ReasonUpgraded          = "Upgraded"
	ReasonUpgradeFailed     = "UpgradeFailed"
	ReasonVersionMismatch   = "VersionMismatch"
	ReasonPayloadUnreadable = "PayloadUnreadable"
)

// upgradeDue says whether wi's joined Node runs another payload version
// than the controller carries, recording the UpToDate condition either way.
// want is the payload version ("" when none is known).
func (r *InstanceReconciler) upgradeDue(ctx context.Context, wi *wsuv1.WindowsInstance) (want string, due bool, err error) {
	if !meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined) || r.nodeName(wi) == "" {
		return "", false, nil
	}
	want, verr := r.payloads.want(wi)
	if verr != nil {
		setCondition(wi, wsuv1.ConditionUpToDate, metav1.ConditionUnknown, ReasonPayloadUnreadable, run.Truncate(verr.Error(), 1000))
		return "", false, nil
	}
	if want == "" {
		meta.RemoveStatusCondition(&wi.Status.Conditions, wsuv1.ConditionUpToDate)
		return "", false, nil
	}
	node := &corev1.Node{}
	err = r.Client.Get(ctx, types.NamespacedName{Name: r.nodeName(wi)}, node)
	switch {
	case apierrors.IsNotFound(err):
		return want, false, nil // NodeReady says so
	case err != nil:
		return want, false, err
	}
	if !ownNode(wi, node) {
		return want, false, nil // checkNode refuses the instance; NodeReady says so
	}
	have := nodeVersion(node)
	if have == want {
		if err := r.clearUpgradeMark(ctx, node); err != nil {
			return want, false, err
		}
		setCondition(wi, wsuv1.ConditionUpToDate, metav1.ConditionTrue, ReasonAtVersion, fmt.Sprintf("Node %s runs payload %s", node.Name, want))
		return want, false, nil
	}
	if c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionUpToDate); c == nil || c.Status != metav1.ConditionFalse {
		setCondition(wi, wsuv1.ConditionUpToDate, metav1.ConditionFalse, ReasonOutdated, fmt.Sprintf("Node %s runs payload %q; the controller carries %s", node.Name, have, want))
	}
	return want, true, nil
}

// upgrade runs the stock upgrade on a joined instance whose Node is at
// another payload version: planned first, approved as any plan, and
// applied only while fewer than maxUnavailable instances are out of
// service (rollout.go). The slot is held until the final status is
// written, so no two instances beyond the limit are ever seen Upgrading at
// once; the Node's mark, set before the apply, keeps counting it until
// the Node is back at the payload version, across restarts.
func (r *InstanceReconciler) upgrade(ctx context.Context, orig, wi *wsuv1.WindowsInstance, want string) (ctrl.Result, error) {
	if wait := r.awaitingApproval(wi, upgradePlaybook); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	ok, err := r.takeSlot(ctx, wi)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ok {
		setCondition(wi, wsuv1.ConditionUpToDate, metav1.ConditionFalse, ReasonRolloutWait,
			fmt.Sprintf("payload %s waits for a rollout slot (at most %s instance(s) out of service at once; kubectl get nodes -l %s shows them)", want, r.Options.MaxUnavailable.String(), UnavailableLabel))
		return r.done(ctx, orig, wi, wsuv1.PhaseJoined, r.slotRecheck())
	}
	defer r.rollouts.release(wi)
	rr, err := r.runRequest(ctx, wi, upgradePlaybook)
	if err != nil {
		return r.badRequest(ctx, orig, wi, err)
	}
	defer keepConnections(&rr)()
	plan := r.run(ctx, wi, &rr, engine.ModePlan)
	if interrupted(ctx, plan) {
		return resumeAfter(plan), nil
	}
	r.recordReach(wi, plan)
	if plan.Failed {
		return r.upgradeFailed(ctx, orig, wi, ReasonPlanFailed, plan)
	}
	r.recordPlan(wi, rr.Playbook, plan)
	if !r.approved(wi, plan) {
		return r.awaitApproval(ctx, orig, wi, plan)
	}
	return r.applyUpgrade(ctx, orig, wi, rr, plan, want)
}

// applyUpgrade applies the approved upgrade plan and records the result.
func (r *InstanceReconciler) applyUpgrade(ctx context.Context, orig, wi *wsuv1.WindowsInstance, rr run.Request, plan run.Outcome, want string) (ctrl.Result, error) {
	from := wi.Status.AppliedVersion
	// Marked before anything touches the Node: whoever leads next counts it.
	if err := r.markNode(ctx, wi, unavailableUpgrade); err != nil {
		return ctrl.Result{}, err
	}
	setCondition(wi, wsuv1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgrading, fmt.Sprintf("upgrading from payload %q to %s", from, want))
	r.event(wi, corev1.EventTypeNormal, ReasonUpgrading, "upgrading node %s from payload %q to %s (plan %s)", r.nodeName(wi), from, want, plan.Hash)
	r.setStatusPhase(ctx, orig, wi, wsuv1.PhaseUpgrading)
	orig = wi.DeepCopy()
	rr.HoldTo(plan)
	out := r.run(ctx, wi, &rr, engine.ModeApply)
	if interrupted(ctx, out) {
		return resumeAfter(out), nil
	}
	r.recordReach(wi, out)
	wi.Status.LastApply = &wsuv1.RunSummary{Playbook: rr.Playbook, Result: runResult(out), Changed: out.Changed, Time: metav1.Now()}
	if out.Failed {
		return r.upgradeFailed(ctx, orig, wi, ReasonApplyFailed, out)
	}
	requeue := r.nodeRequeue(ctx, wi)
	if wi.Status.AppliedVersion != want {
		msg := fmt.Sprintf("the upgrade applied, but Node %s is at payload %q, not %s", r.nodeName(wi), wi.Status.AppliedVersion, want)
		setCondition(wi, wsuv1.ConditionUpToDate, metav1.ConditionFalse, ReasonVersionMismatch, msg)
		return r.failed(ctx, orig, wi, ReasonVersionMismatch, msg, false)
	}
	if err := r.markNode(ctx, wi, ""); err != nil {
		return ctrl.Result{}, err
	}
	setCondition(wi, wsuv1.ConditionUpToDate, metav1.ConditionTrue, ReasonAtVersion, fmt.Sprintf("Node %s runs payload %s", r.nodeName(wi), want))
	// The upgrade converged the host with join: it matches the playbook.
	setCondition(wi, wsuv1.ConditionDrifted, metav1.ConditionFalse, ReasonInSync, "the host matches the playbook")
	r.metrics.drifted(wi, false)
	meta.RemoveStatusCondition(&wi.Status.Conditions, wsuv1.ConditionDegraded)
	wi.Status.Failures, wi.Status.NextRetry = 0, nil
	r.event(wi, corev1.EventTypeNormal, ReasonUpgraded, "node %s upgraded from payload %q to %s: %d task(s) changed", r.nodeName(wi), from, want, out.Changed)
	return r.done(ctx, orig, wi, wsuv1.PhaseJoined, requeue)
}

// upgradeFailed records a failed upgrade run. An instance whose Node was
// marked keeps counting against maxUnavailable until an upgrade succeeds
// (its Node may be cordoned), so a bad payload stops the rollout.
func (r *InstanceReconciler) upgradeFailed(ctx context.Context, orig, wi *wsuv1.WindowsInstance, reason string, out run.Outcome) (ctrl.Result, error) {
	setCondition(wi, wsuv1.ConditionUpToDate, metav1.ConditionFalse, ReasonUpgradeFailed, run.Truncate(out.Message, 1000))
	r.event(wi, corev1.EventTypeWarning, ReasonUpgradeFailed, "upgrading node %s failed: %s", r.nodeName(wi), run.Truncate(out.Message, 1000))
	if out.Unreachable {
		reason = ReasonUnreachable
	}
	return r.failed(ctx, orig, wi, reason, out.Message, out.Unreachable)
}

// awaitingApproval is how long a Manual instance whose plan of playbook
// (an upgrade, a key rotation) awaits approval waits before it is planned
// again: while the plan is recent and its hash not approved, Node changes
// that wake the instance do not cost a run.
func (r *InstanceReconciler) awaitingApproval(wi *wsuv1.WindowsInstance, playbook string) time.Duration {
	st := wi.Status
	if st.Phase != wsuv1.PhaseAwaitingApproval || st.LastPlan == nil || st.LastPlan.Playbook != playbook ||
		st.ObservedGeneration != wi.Generation || wi.Annotations[wsuv1.ApprovedPlanAnnotation] == st.LastPlan.Hash {
		return 0
	}
	return r.untilPlan(wi) // planschedule.go
}

// runResult names a run's result in status.lastApply.
func runResult(out run.Outcome) string {
	switch {
	case out.Unreachable:
		return "Unreachable"
	case out.Failed:
		return "Failed"
	}
	return "Succeeded"
}
