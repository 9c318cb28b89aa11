//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
)

// changesRunner records every run and answers each as a host that needs
// the same two changes would: a plan of hash changesHash, and an apply
// that makes them.
type changesRunner struct{ requestRecorder }

const changesHash = "0123456789abcdef"

func (r *changesRunner) Run(ctx context.Context, req run.Request) run.Outcome {
	r.requestRecorder.Run(ctx, req)
	return run.Outcome{Hash: changesHash, Add: 2, Changed: 2, Tasks: []string{"play.join.task.a", "play.join.task.b"}}
}

// modes are the modes of instance name's recorded runs, in order.
func (r *changesRunner) modes(name string) []engine.Mode {
	var out []engine.Mode
	for _, req := range r.all() {
		if req.Instance == ns+"/"+name {
			out = append(out, req.Mode)
		}
	}
	return out
}

// TestAwaitingApprovalCostsOnePlan pins the cost of waiting: an instance
// with approval Manual settles at its first plan (one run: its own status
// write does not plan it again), and while it waits the watch events that
// wake it (its labels changing, an approval of another hash, the other
// instance's status writes) plan nothing. Approving its plan's hash then
// plans once more, to hold the apply to that hash, and applies.
func TestAwaitingApprovalCostsOnePlan(t *testing.T) {
	t.Parallel()
	cluster, siteAdmin := escalationBed(t)
	runs := &changesRunner{}
	startHostVarsController(t, cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: runs})
	ctx := context.Background()
	get := func(name string) *wsuv1.WindowsInstance {
		wi := &wsuv1.WindowsInstance{}
		require.NoError(t, siteAdmin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wi))
		return wi
	}
	waitPhase := func(name, phase string) {
		t.Helper()
		eventually(t, time.Minute, name+" "+phase, func() (bool, string) {
			wi := get(name)
			return wi.Status.Phase == phase, describe(wi)
		})
	}
	// observe gives the controller a window to (wrongly) plan name again:
	// it ends early if a run is recorded, and asserts nothing of time.
	observe := func(name string) {
		t.Helper()
		before := len(runs.modes(name))
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) && len(runs.modes(name)) == before {
			time.Sleep(50 * time.Millisecond)
		}
	}
	patch := func(name string, edit func(*wsuv1.WindowsInstance)) {
		t.Helper()
		wi := get(name)
		orig := wi.DeepCopy()
		edit(wi)
		require.NoError(t, siteAdmin.Patch(ctx, wi, client.MergeFrom(orig)))
	}

	for _, name := range []string{"waits", "other"} {
		wi := instanceNamed(name, nil)
		wi.Spec.Approval = wsuv1.ApprovalManual
		require.NoError(t, siteAdmin.Create(ctx, wi))
	}
	waitPhase("waits", wsuv1.PhaseAwaitingApproval)
	waitPhase("other", wsuv1.PhaseAwaitingApproval)
	wi := get("waits")
	require.NotNil(t, wi.Status.LastPlan)
	assert.Equal(t, changesHash, wi.Status.LastPlan.Hash)
	planned := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionPlanned)
	require.NotNil(t, planned)
	assert.Equal(t, controller.ReasonAwaitingApproval, planned.Reason)

	// Watch events while it waits.
	observe("waits")
	for i := range 3 {
		patch("waits", func(wi *wsuv1.WindowsInstance) {
			wi.Labels = map[string]string{"poke": fmt.Sprint(i)}
		})
		observe("waits")
	}
	patch("waits", func(wi *wsuv1.WindowsInstance) {
		wi.Annotations = map[string]string{wsuv1.ApprovedPlanAnnotation: "not-its-plan"}
	})
	observe("waits")
	patch("other", func(wi *wsuv1.WindowsInstance) { wi.Spec.Paused = true }) // a status write of another instance
	waitPhase("other", wsuv1.PhasePaused)
	observe("waits")
	// A barrier: a spec change of waits is seen after every event above.
	patch("waits", func(wi *wsuv1.WindowsInstance) { wi.Spec.Paused = true })
	waitPhase("waits", wsuv1.PhasePaused)

	assert.Equal(t, []engine.Mode{engine.ModePlan}, runs.modes("waits"), "settling costs one plan, waiting none")
	assert.Equal(t, []engine.Mode{engine.ModePlan}, runs.modes("other"), "settling costs one plan, waiting none")
	// Unpaused, its spec is a new generation: planned again, once.
	patch("waits", func(wi *wsuv1.WindowsInstance) { wi.Spec.Paused = false })
	waitPhase("waits", wsuv1.PhaseAwaitingApproval)
	observe("waits")
	assert.Equal(t, []engine.Mode{engine.ModePlan, engine.ModePlan}, runs.modes("waits"), "a new generation costs one plan")

	// Approving the plan's hash: one plan that must have that hash, then
	// the apply.
	patch("waits", func(wi *wsuv1.WindowsInstance) {
		wi.Annotations = map[string]string{wsuv1.ApprovedPlanAnnotation: changesHash}
	})
	waitPhase("waits", wsuv1.PhaseJoined)
	assert.Equal(t, []engine.Mode{engine.ModePlan, engine.ModePlan, engine.ModePlan, engine.ModeApply}, runs.modes("waits"))
}
