package kube

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// fakeWatches hands out fake watches and records the contexts they were
// opened with.
type fakeWatches struct {
	opened chan *watch.FakeWatcher
	ctxs   chan context.Context
	err    error
	calls  atomic.Int32
}

func newFakeWatches() *fakeWatches {
	return &fakeWatches{opened: make(chan *watch.FakeWatcher, 10), ctxs: make(chan context.Context, 10)}
}

func (f *fakeWatches) watch(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	w := watch.NewFakeWithChanSize(10, false)
	f.ctxs <- ctx
	f.opened <- w
	return w, nil
}

func node(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// await fails the test unless ch closes within a minute (a bound for a
// hung test, not a speed goal).
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("%s: not woken", what)
	}
}

func TestChangesWakeWaitersOfTheObject(t *testing.T) {
	f := newFakeWatches()
	c := NewChanges(f.watch)
	next, release := c.Subscribe()
	defer release()
	w := <-f.opened

	a, b, anyNode := next("a"), next("b"), next("")
	w.Modify(node("a"))
	await(t, a, "a's waiter")
	await(t, anyNode, "the waiter of any node")
	// The burst is handled as one: b's waiter is not woken by a's change.
	// A change to b that follows proves b's channel still open before it.
	assert.False(t, closed(b), "b's waiter is not woken by a's change")
	w.Delete(node("b"))
	await(t, b, "b's waiter")
	assert.False(t, closed(next("a")), "a fresh channel after the change")
}

func TestChangesCountOnlyTheirEventTypes(t *testing.T) {
	f := newFakeWatches()
	c := NewChanges(f.watch, watch.Added)
	next, release := c.Subscribe()
	defer release()
	w := <-f.opened
	a, b := next("a"), next("b")
	w.Modify(node("a"))
	w.Add(node("b")) // a marker: once b's add has woken, a's modify was seen
	await(t, b, "b's add")
	assert.False(t, closed(a), "a modify does not count")
	w.Add(node("a"))
	await(t, a, "a's add")
}

func TestChangesRestartAWatchThatEnds(t *testing.T) {
	f := newFakeWatches()
	c := NewChanges(f.watch)
	next, release := c.Subscribe()
	defer release()
	w := <-f.opened
	a := next("a")
	w.Stop()
	await(t, a, "everyone, when the watch ends")
	w2 := <-f.opened
	a = next("a")
	w2.Modify(node("a"))
	await(t, a, "a's waiter, through the new watch")
}

func TestChangesStopWithTheLastRelease(t *testing.T) {
	f := newFakeWatches()
	c := NewChanges(f.watch)
	_, release1 := c.Subscribe()
	_, release2 := c.Subscribe()
	ctx := <-f.ctxs
	release1()
	release1() // twice: counted once
	assert.NoError(t, ctx.Err(), "a waiter remains")
	release2()
	await(t, ctx.Done(), "the watch's context")
	assert.EqualValues(t, 1, f.calls.Load(), "one watch for both waiters")
}

func TestChangesRefusedWatchIsNotRetried(t *testing.T) {
	f := newFakeWatches()
	f.err = apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", errors.New("no watch verb"))
	c := NewChanges(f.watch)
	for range 3 {
		next, release := c.Subscribe()
		require.Eventually(t, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.disabled }, time.Minute, time.Millisecond)
		assert.False(t, closed(next("a")), "no wake: the waiter polls")
		release()
	}
	assert.EqualValues(t, 1, f.calls.Load(), "one refused request, not a loop")
}

func TestNilChangesPolls(t *testing.T) {
	var c *Changes
	next, release := c.Subscribe()
	defer release()
	assert.Nil(t, next("a"))
}
