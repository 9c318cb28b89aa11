package kube

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fleetCSRs is a client and a serving CSR for each of n nodes, plus CSRs
// whose names only CSRConcernsNode's edge cases tie to a node.
func fleetCSRs(t *testing.T, n int) []runtime.Object {
	var objs []runtime.Object
	add := func(name string, s csrSpec) {
		csr := makeCSR(t, name, s)
		csr.UID = types.UID("uid-" + name)
		objs = append(objs, csr)
	}
	for i := range n {
		node := fmt.Sprintf("n-%d", i)
		c, s := validClient, validServing
		c.cn, s.cn, s.user = "system:node:"+node, "system:node:"+node, "system:node:"+node
		add(node+"-client", c)
		add(node+"-serving", s)
	}
	odd := func(cn, user string) csrSpec { s := validClient; s.cn, s.user = cn, user; return s }
	add("bare-cn", odd("n-1", OpenShiftBootstrapper))
	add("misspelt-prefix", odd("System:Node:n-2", OpenShiftBootstrapper))
	add("other-prefix", odd("foo:n-3", OpenShiftBootstrapper))
	add("requester-only", odd("someone", "system:node:n-4"))
	add("upper-name", odd("system:node:N-5", OpenShiftBootstrapper))
	add("trailing-colon", odd("n-6:", OpenShiftBootstrapper))
	broken := makeCSR(t, "unparsable", odd("system:node:n-7", "system:node:n-8"))
	broken.UID, broken.Spec.Request = "uid-unparsable", []byte("not PEM")
	return append(objs, broken)
}

// TestCSRListWorkPerLookDoesNotGrowWithTheFleet: every node polls at once,
// round after round, as the hosts' k8s_csr_approve tasks do. The API
// server is listed once per round, not once per node, and each CSR's
// request is parsed once for the whole run, not once per node and round:
// the work that was hosts² per round is one list per round.
func TestCSRListWorkPerLookDoesNotGrowWithTheFleet(t *testing.T) {
	const nodes, rounds = 40, 3
	objs := fleetCSRs(t, nodes)
	kc := fake.NewSimpleClientset(objs...)
	var lists atomic.Int32
	kc.PrependReactor("list", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil // the tracker answers
	})
	l := NewCSRList(kc)
	clock := testStart
	var clockMu sync.Mutex
	l.now = func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	ctx := context.Background()
	for range rounds {
		var wg sync.WaitGroup
		for i := range nodes {
			wg.Go(func() {
				want := testExpect
				want.NodeName = fmt.Sprintf("N-%d", i) // looked up lower-cased
				_, err := l.NodeCSRs(ctx, want, time.Time{})
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		clockMu.Lock()
		clock = clock.Add(CSRListMaxAge)
		clockMu.Unlock()
	}
	assert.EqualValues(t, rounds, lists.Load(), "lists of the CSRs for %d nodes polling %d times", nodes, rounds)
	assert.Equal(t, len(objs), l.parses, "requests parsed in %d rounds of %d CSRs", rounds, len(objs))
}

// TestCSRListSurveysAsTheWholeList: the shared list's index picks the same
// CSRs as CSRConcernsNode over the whole list, edge cases included, with
// the same verdicts.
func TestCSRListSurveysAsTheWholeList(t *testing.T) {
	kc := fake.NewSimpleClientset(fleetCSRs(t, 10)...)
	l := NewCSRList(kc)
	ctx := context.Background()
	for _, node := range []string{"n-0", "N-1", "n-2", "n-3", "n-4", "n-5", "N-5", "n-6", "n-7", "n-8", "n-9", "", "node", "system:node:n-1"} {
		want := testExpect
		want.NodeName = node
		shared, err := l.NodeCSRs(ctx, want, time.Time{})
		require.NoError(t, err)
		whole, err := NodeCSRs(ctx, kc, want)
		require.NoError(t, err)
		assert.Equal(t, verdictsOf(whole), verdictsOf(shared), "node %q", node)
		assert.Equal(t, whole.Want, shared.Want, "node %q", node)
	}
}

func verdictsOf(s NodeSurvey) []string {
	out := []string{}
	for _, c := range s.CSRs {
		out = append(out, fmt.Sprintf("%s %s %s %v", c.Name, c.Kind, c.State, c.Err))
	}
	return out
}

// TestCSRListListsAfterSince: a caller never gets a list requested before
// the moment it names (its previous look, its own approval), however young.
func TestCSRListListsAfterSince(t *testing.T) {
	kc := fake.NewSimpleClientset(fleetCSRs(t, 1)...)
	var lists atomic.Int32
	kc.PrependReactor("list", "certificatesigningrequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	l := NewCSRList(kc)
	clock := testStart
	l.now = func() time.Time { return clock }
	want := testExpect
	want.NodeName = "n-0"
	ctx := context.Background()
	_, err := l.NodeCSRs(ctx, want, time.Time{})
	require.NoError(t, err)
	_, err = l.NodeCSRs(ctx, want, time.Time{})
	require.NoError(t, err)
	assert.EqualValues(t, 1, lists.Load(), "a young list is shared")
	lookedAt := clock
	clock = clock.Add(time.Millisecond)
	_, err = l.NodeCSRs(ctx, want, lookedAt)
	require.NoError(t, err)
	assert.EqualValues(t, 2, lists.Load(), "a list from before the caller's last look is not reused")
}
