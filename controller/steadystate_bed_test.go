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

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/engine"
)

// TestInSyncDriftPassWritesNoStatus: a joined host that matches its
// playbook is planned every drift interval, and a pass that finds nothing
// new writes nothing: across several in-sync drift passes the instance's
// resourceVersion stays the same (issue 27's steady state: one plan per
// instance per interval, no status write when nothing changed), and
// status.lastPlan keeps the time that plan was first made.
func TestInSyncDriftPassWritesNoStatus(t *testing.T) {
	t.Parallel()
	b := newBed(t, 1)
	ctl := b.startController(t, controller.Options{DriftInterval: 2 * time.Second}, controller.ManagerOptions{}, nil)
	ctx := context.Background()
	h := b.env.Hosts[0]
	require.NoError(t, b.client.Create(ctx, b.instance(t, h, wsuv1.ApprovalAuto)))
	eventually(t, 5*time.Minute, "joined, in sync, with a Ready Node", func() (bool, string) {
		wi := b.get(t, h.Name)
		return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined && meta.IsStatusConditionFalse(wi.Status.Conditions, wsuv1.ConditionDrifted) &&
			meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady), describe(wi)
	})
	plans := func() int { return countRuns(ctl.runs, h.Name, engine.ModePlan) }
	waitPlans := func(n int) {
		t.Helper()
		eventually(t, time.Minute, fmt.Sprintf("%d plan(s) in all", n), func() (bool, string) {
			return plans() >= n, fmt.Sprintf("%d plan(s)", plans())
		})
	}
	// Settled: two drift passes after the join; the second started after
	// the first's writes, if any.
	waitPlans(plans() + 2)
	settled := b.get(t, h.Name)
	first, applies := plans(), countRuns(ctl.runs, h.Name, engine.ModeApply)
	waitPlans(first + 3)
	now := b.get(t, h.Name)
	assert.Equal(t, settled.ResourceVersion, now.ResourceVersion, "in-sync drift passes wrote the instance: before %s\nafter %s", describe(settled), describe(now))
	assert.Equal(t, settled.Status.LastPlan.Time, now.Status.LastPlan.Time, "the same plan keeps its time")
	assert.Equal(t, wsuv1.PhaseJoined, now.Status.Phase)
	assert.Equal(t, applies, countRuns(ctl.runs, h.Name, engine.ModeApply), "nothing applied in sync")
}

// countRuns is how many runs of mode the instance named had that ended.
func countRuns(runs *recordingRunner, name string, mode engine.Mode) int {
	n := 0
	_, ended := runs.record()
	for _, r := range ended {
		if r.instance == ns+"/"+name && r.mode == mode {
			n++
		}
	}
	return n
}
