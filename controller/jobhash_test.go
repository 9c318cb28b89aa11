package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/setup"
)

// changingHost plays a host in Job mode whose plan changes right after it
// was planned (someone changed the host, or the payload, between the
// admin's approval and the apply). A plan reports its hash only, as a
// JobRunner's does; an apply goes through the request a Job's pod would
// receive (run.PodRequest, decoded as run-job decodes it) and is refused, as `wsu-controller run-job`
// refuses it (run/runjob.go), when the request holds it to a hash the fresh
// plan no longer has.
type changingHost struct {
	mu      sync.Mutex
	plans   int
	applied int
	refused int
}

func (h *changingHost) current() string { return fmt.Sprintf("plan-%d", h.plans) }

func (h *changingHost) Run(_ context.Context, req run.Request) run.Outcome {
	h.mu.Lock()
	defer h.mu.Unlock()
	if req.Mode == engine.ModePlan {
		h.plans++
		out := run.Outcome{Hash: h.current(), Changed: 1, Run: 1, Tasks: []string{"play.upgrade.task.drain"}}
		h.plans++ // the host changes after the plan
		return out
	}
	data, err := run.PodRequest(req)
	if err != nil {
		return run.Outcome{Failed: true, Message: err.Error()}
	}
	jr, err := setup.DecodeRequest(data)
	if err != nil {
		return run.Outcome{Failed: true, Message: err.Error()}
	}
	if jr.ExpectHash != "" && jr.ExpectHash != h.current() {
		h.refused++
		return run.Outcome{Failed: true, Message: "the plan changed since it was approved: nothing was applied"}
	}
	h.applied++
	return run.Outcome{Changed: 1}
}

// TestJobUpgradeHeldToApprovedHash (issue 27, item 5): an approved upgrade
// in Job mode is applied only if the host's fresh plan is the one the
// admin approved. A JobRunner's plan carries no plan, only its hash, so
// the apply must carry the hash: before, upgrade.go set Expect (nil in Job
// mode) and not ExpectHash, and the Job applied whatever it found.
func TestJobUpgradeHeldToApprovedHash(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-win", UID: "node-uid",
		Labels:      map[string]string{corev1.LabelOSStable: "windows"},
		Annotations: map[string]string{kube.OwnerAnnotation: kube.InstanceOwner("ns", "win"), "wsu.dev/version": "v1"}}}
	wi := hostVarsInstance(nil)
	wi.Spec.Approval = wsuv1.ApprovalManual
	wi.Annotations = map[string]string{wsuv1.ApprovedPlanAnnotation: "plan-1"} // the plan the first run will make
	b := newHostVarsBed(t, Options{RunMode: run.ModeJob}, wi, node)
	host := &changingHost{}
	b.r.Options.Runner = host
	ctx := context.Background()
	cur := &wsuv1.WindowsInstance{}
	require.NoError(t, b.r.Client.Get(ctx, types.NamespacedName{Namespace: "ns", Name: "win"}, cur))
	cur.Status.NodeName, cur.Status.NodeUID = "node-win", "node-uid"
	setCondition(cur, wsuv1.ConditionJoined, metav1.ConditionTrue, ReasonInSync, "joined")
	require.NoError(t, b.r.Client.Status().Update(ctx, cur))
	require.NoError(t, b.r.Client.Get(ctx, client.ObjectKeyFromObject(cur), cur))

	_, err := b.r.upgrade(ctx, cur.DeepCopy(), cur, "v2")
	require.NoError(t, err)

	assert.Equal(t, 1, host.plans/2, "one plan")
	assert.Equal(t, 0, host.applied, "a plan other than the approved one is not applied")
	assert.Equal(t, 1, host.refused, "the apply was held to the approved hash")
	got := &wsuv1.WindowsInstance{}
	require.NoError(t, b.r.Client.Get(ctx, client.ObjectKeyFromObject(cur), got))
	require.NotNil(t, got.Status.LastApply)
	assert.Equal(t, "Failed", got.Status.LastApply.Result)
	up := meta.FindStatusCondition(got.Status.Conditions, wsuv1.ConditionUpToDate)
	require.NotNil(t, up)
	assert.Equal(t, ReasonUpgradeFailed, up.Reason)
	assert.Contains(t, up.Message, "changed since it was approved")
}
