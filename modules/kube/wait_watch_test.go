package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// fakeChanges is a kube.Changes over one fake watch.
func fakeChanges() (*kube.Changes, *watch.FakeWatcher) {
	w := watch.NewFakeWithChanSize(10, false)
	return kube.NewChanges(func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil }), w
}

// waitLooks runs waitFor with an hour's interval over on, its check done
// at the second look; it returns the looks as they happen and the end.
func waitLooks(on []watchOn) (looks <-chan int, done <-chan error) {
	l, d := make(chan int, 10), make(chan error, 1)
	n := 0
	go func() {
		_, err := waitFor(context.Background(), time.Hour, time.Hour, on, func(context.Context) (bool, string, error) {
			n++
			l <- n
			return n >= 2, "look", nil
		})
		d <- err
	}()
	return l, d
}

func awaitLook(t *testing.T, looks <-chan int, want int) {
	t.Helper()
	select {
	case n := <-looks:
		require.Equal(t, want, n)
	case <-time.After(time.Minute): // a bound for a hung test, not a speed goal
		t.Fatalf("look %d never came", want)
	}
}

// TestWaitForLooksAgainOnAChange: a wait with an hour's interval looks
// again as soon as its object changes, whichever of its watches says so.
func TestWaitForLooksAgainOnAChange(t *testing.T) {
	for _, tt := range []struct {
		name string
		on   func(nodes, csrs *kube.Changes) []watchOn
	}{
		{"one watch", func(nodes, _ *kube.Changes) []watchOn { return []watchOn{{nodes, "win-1"}} }},
		{"either of two", func(nodes, csrs *kube.Changes) []watchOn { return []watchOn{{csrs, "win-1"}, {nodes, "win-1"}} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodes, nw := fakeChanges()
			csrs, _ := fakeChanges()
			looks, done := waitLooks(tt.on(nodes, csrs))
			awaitLook(t, looks, 1)
			nw.Modify(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-1"}})
			awaitLook(t, looks, 2)
			require.NoError(t, <-done)
		})
	}
}

// TestNodeWaitReactsToTheWatch: against the API server, a wait whose
// interval is an hour ends when the kubelet reports Ready: the shared
// Node watch wakes it.
func TestNodeWaitReactsToTheWatch(t *testing.T) {
	c := cluster(t)
	m := NodeWait{testClusters}
	_, err := c.CreateNode(ctx, "watch-1", nil)
	require.NoError(t, err)
	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("watch-1"), "timeout": cty.NumberIntVal(7200), "interval": cty.NumberIntVal(3600)})
	p := plan(t, m, cfg)
	require.NotNil(t, p.Change)
	cl, _, diags := m.client(cfg)
	require.False(t, diags.HasErrors())
	// Subscribed the way the wait does, to see the watch's wakes too.
	next, release := cl.NodeChanges.Subscribe()
	defer release()
	woken := next("watch-1")

	applied := make(chan modules.ApplyResponse, 1)
	go func() { applied <- m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: p.Change}) }()
	require.NoError(t, c.SetNodeReady(ctx, "watch-1"))
	select {
	case <-woken:
	case <-time.After(time.Minute):
		t.Fatal("the Node watch saw no change")
	}
	select {
	case a := <-applied:
		require.False(t, a.Diagnostics.HasErrors(), "%v", a.Diagnostics)
		assert.Equal(t, cty.StringVal("True"), a.Result.GetAttr("status"))
	case <-time.After(time.Minute): // without the watch it would wait an hour
		t.Fatal("the wait did not end on the change")
	}
}
