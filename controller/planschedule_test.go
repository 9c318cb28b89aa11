package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// fakeClock is a clock a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// joinedLongAgo is a joined instance whose recorded plan is a day old: the
// same plan was made again since, in memory only.
func joinedLongAgo(uid string, now time.Time) *wsuv1.WindowsInstance {
	return &wsuv1.WindowsInstance{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)},
		Status:     wsuv1.WindowsInstanceStatus{LastPlan: &wsuv1.PlanSummary{Time: metav1.NewTime(now.Add(-24 * time.Hour))}},
	}
}

// TestRestartSpreadsFirstPasses: a controller that does not know its
// instances yet (restarted) plans them over one drift interval by a stable
// hash of their UIDs, not all at once; the same UID gets the same offset
// from a later start; an instance whose recorded plan is recent waits one
// interval from it; a standby's offsets count from its first pass, not
// its set-up; a plan made schedules the next one interval (plus up
// to a tenth of jitter) away.
func TestRestartSpreadsFirstPasses(t *testing.T) {
	const interval = 10 * time.Minute
	clock := &fakeClock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := newPlanSchedule(clock.now)
	var buckets [10]int
	offsets := map[string]time.Duration{}
	for i := range 100 {
		uid := fmt.Sprintf("0b9c5e0a-%04d-4d1e-9a5e-6f0c2d7e8a1b", i)
		d := s.until(joinedLongAgo(uid, clock.t), interval)
		assert.True(t, d >= 0 && d < interval, "first pass of %s in %s, not within one interval", uid, d)
		buckets[int(d*10/interval)]++
		offsets[uid] = d
	}
	for i, n := range buckets {
		assert.Less(t, n, 30, "tenth %d of the interval has %d of 100 first passes: %v", i, n, buckets)
	}

	// Set up at one time, leading (its first pass) three hours later: the
	// offsets count from the first pass.
	later := newPlanSchedule(clock.now)
	clock.t = clock.t.Add(3 * time.Hour)
	for uid, d := range offsets {
		assert.Equal(t, d, later.until(joinedLongAgo(uid, clock.t), interval), "a later start keeps %s's offset", uid)
	}

	recent := joinedLongAgo("recent", clock.t)
	recent.Status.LastPlan.Time = metav1.NewTime(clock.t.Add(-time.Minute))
	assert.GreaterOrEqual(t, later.until(recent, interval), interval-time.Minute, "a plan recorded a minute ago waits one interval from it")

	r := &InstanceReconciler{Options: Options{DriftInterval: interval}, schedule: later}
	wi := joinedLongAgo("planned", clock.t)
	r.schedulePlan(wi)
	clock.t = clock.t.Add(time.Minute)
	d := r.untilPlan(wi)
	assert.True(t, d >= interval-time.Minute && d <= interval+interval/10-time.Minute, "next pass in %s", d)
	later.forget(wi.UID)
	assert.Less(t, r.untilPlan(wi), interval, "a forgotten instance is scheduled as a first pass again")
}
