package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
)

// TestJobRolloutSlots: in Job mode a pass does not hold its rollout slot
// while its run goes on in a Job, so an unfinished upgrade, removal or key
// rotation Job counts its instance out of service (whoever started it); a
// join's Job, or a finished one, does not.
func TestJobRolloutSlots(t *testing.T) {
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	inst := func(name string) *wsuv1.WindowsInstance {
		return &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	job := func(name, instance, playbook string, finished bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{
			run.JobInstanceLabel: instance, run.JobModeLabel: string(engine.ModeApply), run.JobRunLabel: "r", run.JobPlaybookLabel: run.LabelValue(playbook)}}}
		if finished {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}
		return j
	}
	a, b, c := inst("a"), inst("b"), inst("c")
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(a, b, c,
		job("join-b", "b", "wsu:join.hcl", false), job("rotate-c-old", "c", "wsu:rotate-key.hcl", true)).Build()
	r := &InstanceReconciler{Client: cl, Options: Options{MaxUnavailable: intstr.FromInt32(1), Runner: &run.JobRunner{Client: cl}}, rollouts: newRolloutLimit()}
	ctx := context.Background()
	take := func(wi *wsuv1.WindowsInstance) bool {
		ok, err := r.takeSlot(ctx, wi)
		require.NoError(t, err)
		r.rollouts.release(wi) // as a pass that started its Job returns
		return ok
	}
	assert.True(t, take(b), "a join's Job and a finished rotation's take no slot")
	require.NoError(t, cl.Create(ctx, job("rotate-a", "a", "wsu:rotate-key.hcl", false)))
	assert.False(t, take(b), "a's rotation runs in a Job: b waits")
	assert.True(t, take(a), "a holds its slot: it resumes")
	r.Options.MaxUnavailable = intstr.FromInt32(2)
	assert.True(t, take(c), "a larger limit has room")
}
