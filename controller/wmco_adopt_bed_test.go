//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestWMCONodeIsAdoptedNotRefused: once WMCO stops, the instances of the
// hosts it configured name Nodes WMCO registered, which carry no
// wsu.dev/owner. Such a Node (WMCO's version annotation, the instance's
// address among its addresses) is not refused: the instance's join runs,
// and join adopts the host (test/e2e TestAdoptWMCOHost). A WMCO Node whose
// addresses are another host's is refused as before, and nothing runs.
func TestWMCONodeIsAdoptedNotRefused(t *testing.T) {
	t.Parallel()
	b := newNodesBed(t)
	ctx := context.Background()
	wmcoNode := func(name, addr string) *corev1.Node {
		b.node(t, name, map[string]string{"kubernetes.io/os": "windows", kube.WMCOPrefix + "byoh": "true"})
		require.NoError(t, b.cluster.AnnotateNode(ctx, name, kube.WMCOVersionAnnotation, "10.17.0"))
		require.NoError(t, b.cluster.SetNodeAddresses(ctx, name, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: addr}))
		n, err := b.cluster.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return n
	}
	// instanceNamed's address is 127.0.0.1.
	wmcoNode("wmco-1", "127.0.0.1")
	other := wmcoNode("wmco-2", "10.1.42.2")
	b.start(t)

	require.NoError(t, b.c.Create(ctx, instanceNamed("other-host", map[string]string{"node_name": "wmco-2"})))
	b.waitRefused(t, "other-host", controller.ReasonNodeNotOwned, "Node wmco-2 has no wsu.dev/owner annotation")
	assert.Empty(t, b.runsOf("other-host"), "a refused instance runs nothing")
	b.unchanged(t, other)

	require.NoError(t, b.c.Create(ctx, instanceNamed("adopted", map[string]string{"node_name": "wmco-1"})))
	var join run.Request
	eventually(t, time.Minute, "a join run for the WMCO host", func() (bool, string) {
		for _, r := range b.runsOf("adopted") {
			if r.Playbook == "wsu:join.hcl" {
				join = r
				return true, ""
			}
		}
		wi, err := b.get(t, "adopted")
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("%d runs; %s", len(b.runsOf("adopted")), describe(wi))
	})
	assert.Contains(t, join.Vars, "node_owner=windowsinstance/"+ns+"/adopted")
	assert.Contains(t, join.Vars, "adopt_node=false", "the playbook adopts WMCO's Node through its own check, not adopt_node")
	wi, err := b.get(t, "adopted")
	require.NoError(t, err)
	v := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionValid)
	assert.False(t, v != nil && v.Reason == controller.ReasonNodeNotOwned, "not refused: %s", describe(wi))
}

// gatedRunner plans one change for every instance and holds each apply
// until gate is closed; an apply then marks the instance's Node as join
// does, so the controller records it.
type gatedRunner struct {
	cluster *kubetest.Cluster
	nodes   map[string]string // instance NAMESPACE/NAME → Node
	gate    chan struct{}
	mu      sync.Mutex
	applied []string // instances whose apply started, in order
}

func (g *gatedRunner) Run(ctx context.Context, req run.Request) run.Outcome {
	if req.Mode != engine.ModeApply {
		return run.Outcome{Hash: "plan-" + req.Instance, Changed: 1, Change: 1, Tasks: []string{`task["kubelet service"]`}}
	}
	g.mu.Lock()
	g.applied = append(g.applied, req.Instance)
	g.mu.Unlock()
	select {
	case <-g.gate:
	case <-ctx.Done():
		return run.Outcome{Failed: true, Message: ctx.Err().Error()}
	}
	_, name, _ := strings.Cut(req.Instance, "/")
	if err := g.cluster.AnnotateNode(ctx, g.nodes[req.Instance], kube.OwnerAnnotation, kube.InstanceOwner(ns, name)); err != nil {
		return run.Outcome{Failed: true, Message: err.Error()}
	}
	return run.Outcome{Hash: "plan-" + req.Instance, Changed: 1}
}

func (g *gatedRunner) started() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.applied...)
}

// TestWMCOAdoptionsUnderRolloutLimit: adopting a WMCO host restarts its
// kubelet, so adoptions take rollout slots: with maxUnavailable 1, a
// second WMCO host's join waits (Joined=False, WaitingForRollout) while
// the first one's runs, and runs once it is done.
func TestWMCOAdoptionsUnderRolloutLimit(t *testing.T) {
	t.Parallel()
	b := newNodesBed(t)
	ctx := context.Background()
	for _, name := range []string{"wmco-a", "wmco-b"} {
		b.node(t, name, map[string]string{"kubernetes.io/os": "windows"})
		require.NoError(t, b.cluster.AnnotateNode(ctx, name, kube.WMCOVersionAnnotation, "10.17.0"))
		require.NoError(t, b.cluster.SetNodeAddresses(ctx, name, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}))
	}
	g := &gatedRunner{cluster: b.cluster, gate: make(chan struct{}),
		nodes: map[string]string{ns + "/first": "wmco-a", ns + "/second": "wmco-b"}}
	startHostVarsController(t, b.cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: g, MaxUnavailable: intstr.FromInt32(1)})

	require.NoError(t, b.c.Create(ctx, instanceNamed("first", map[string]string{"node_name": "wmco-a"})))
	eventually(t, time.Minute, "the first adoption applies", func() (bool, string) {
		return len(g.started()) == 1, fmt.Sprintf("applies %v", g.started())
	})
	require.NoError(t, b.c.Create(ctx, instanceNamed("second", map[string]string{"node_name": "wmco-b"})))
	eventually(t, time.Minute, "the second adoption waits for a rollout slot", func() (bool, string) {
		wi, err := b.get(t, "second")
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionJoined)
		return c != nil && c.Reason == controller.ReasonRolloutWait && strings.Contains(c.Message, "WMCO's Node wmco-b"), describe(wi)
	})
	assert.Equal(t, []string{ns + "/first"}, g.started(), "the second apply has not started")

	close(g.gate)
	eventually(t, time.Minute, "the second adoption applies once the first is done", func() (bool, string) {
		return slices.Contains(g.started(), ns+"/second"), fmt.Sprintf("applies %v", g.started())
	})
	assert.Equal(t, ns+"/first", g.started()[0])
}
