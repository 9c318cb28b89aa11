//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/kube"
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
	var join controller.RunRequest
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
