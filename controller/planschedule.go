package controller

import (
	"hash/fnv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// planSchedule is when each instance is planned next (its drift pass, or a
// fresh plan for an approver), by UID, in this controller's memory. An
// in-sync plan then costs no status write: status.lastPlan records what
// was planned and when that plan was first made, not each pass (issue 27's
// "no status write when nothing changed"). A controller that does not know
// an instance yet (restarted, a new leader) spreads its first passes over
// one interval by a stable hash of the UID, so a restart does not plan
// every instance at once, and never plans sooner than one interval after
// the time status.lastPlan records.
type planSchedule struct {
	now func() time.Time

	mu sync.Mutex
	// start is the first pass this controller made (after it was elected,
	// not when it was set up: a standby that leads hours later spreads
	// from then).
	start time.Time
	next  map[types.UID]time.Time
}

// newPlanSchedule is an empty schedule on the clock now.
func newPlanSchedule(now func() time.Time) *planSchedule {
	return &planSchedule{now: now, next: map[types.UID]time.Time{}}
}

// until is how long wi waits for its next pass, every interval: when a
// plan of this controller's set it, or its first pass.
func (s *planSchedule) until(wi *wsuv1.WindowsInstance, interval time.Duration) time.Duration {
	s.mu.Lock()
	if s.start.IsZero() {
		s.start = s.now()
	}
	next, known := s.next[wi.UID]
	start := s.start
	s.mu.Unlock()
	if !known {
		next = start.Add(spread(wi.UID, interval))
		if lp := wi.Status.LastPlan; lp != nil && lp.Time.Add(interval).After(next) {
			next = lp.Time.Add(interval)
		}
	}
	return next.Sub(s.now())
}

// planned records a plan of wi just made: the next pass is after wait.
func (s *planSchedule) planned(uid types.UID, wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[uid] = s.now().Add(wait)
}

// forget drops a removed instance.
func (s *planSchedule) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.next, uid)
}

// spread is uid's stable offset in [0, interval).
func spread(uid types.UID, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(uid))
	return time.Duration(h.Sum64() % uint64(interval))
}

// untilPlan is how long wi waits for its next periodic plan (the reconciler
// without a schedule, in unit tests: one interval after status.lastPlan).
func (r *InstanceReconciler) untilPlan(wi *wsuv1.WindowsInstance) time.Duration {
	if r.schedule == nil {
		if wi.Status.LastPlan == nil {
			return 0
		}
		return r.Options.DriftInterval - time.Since(wi.Status.LastPlan.Time.Time)
	}
	return r.schedule.until(wi, r.Options.DriftInterval)
}

// schedulePlan records that wi was just planned: its next pass is one
// drift interval away, jittered so a fleet's instances spread out.
func (r *InstanceReconciler) schedulePlan(wi *wsuv1.WindowsInstance) {
	if r.schedule != nil {
		r.schedule.planned(wi.UID, r.driftRequeue())
	}
}
