//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/engine"
)

// TestNodeDeletedIsNotJoined: Joined means the Node the instance recorded
// exists. A joined instance's Node is deleted while the instance is paused
// (so its Joined condition is still the old one) and another registered
// under its name: the renewal approver refuses the node's client CSR,
// naming the replaced Node. That one deleted too and unpaused, the
// instance is Joined=False (NodeDeleted) with a Warning event, forgets
// the UID, and plans a re-join (Manual: it waits for approval, and
// nothing is applied).
func TestNodeDeletedIsNotJoined(t *testing.T) {
	t.Parallel()
	b := newBed(t, 1)
	run := b.startController(t, controller.Options{}, controller.ManagerOptions{}, nil)
	ctx := context.Background()
	h := b.env.Hosts[0]
	require.NoError(t, b.client.Create(ctx, b.instance(t, h, wsuv1.ApprovalManual)))
	key := client.ObjectKey{Namespace: ns, Name: h.Name}

	var first string
	eventually(t, 3*time.Minute, "the first plan awaits approval", func() (bool, string) {
		wi := b.get(t, h.Name)
		if wi != nil && wi.Status.Phase == wsuv1.PhaseAwaitingApproval && wi.Status.LastPlan != nil {
			first = wi.Status.LastPlan.Hash
			return true, ""
		}
		return false, describe(wi)
	})
	require.NoError(t, approval.Approve(ctx, b.client, key, first))
	eventually(t, 5*time.Minute, "joined, its Node recorded", func() (bool, string) {
		wi := b.get(t, h.Name)
		return wi != nil && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined) &&
			meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady) && wi.Status.NodeUID != "", describe(wi)
	})
	node, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, string(node.UID), b.get(t, h.Name).Status.NodeUID)

	setPaused(t, b, h.Name, true)
	eventually(t, time.Minute, "paused", func() (bool, string) {
		wi := b.get(t, h.Name)
		return wi.Status.Phase == wsuv1.PhasePaused, describe(wi)
	})
	require.NoError(t, b.env.Cluster.Client.CoreV1().Nodes().Delete(ctx, h.NodeName, metav1.DeleteOptions{}))
	_, before := run.runs.record()

	t.Run("a replaced Node's renewal is refused", func(t *testing.T) {
		// Another Node registered under the name (the kubelet's rules pass
		// for it: a Node of that name exists).
		_, err := b.env.Cluster.CreateNode(ctx, h.NodeName, map[string]string{"kubernetes.io/os": "windows"})
		require.NoError(t, err)
		wi := b.get(t, h.Name)
		require.True(t, meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined), "paused: Joined as it was: %s", describe(wi))
		b.allowCSRs(t)
		renewal := b.nodeCSR(t, "renew-replaced-node", h.NodeName, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, nil)
		want := "CSR renew-replaced-node (client) for node " + h.NodeName + " not approved: Node " + h.NodeName + " is not the Node WindowsInstance " + h.Name + " joined (UID " + string(node.UID) + ")"
		eventually(t, time.Minute, "a CSRRefused event naming the replaced Node", func() (bool, string) {
			var msgs []string
			for _, e := range b.events(t, h.Name, controller.ReasonCSRRefused) {
				if strings.HasPrefix(e.Message, want) {
					return true, ""
				}
				msgs = append(msgs, e.Message)
			}
			return false, fmt.Sprintf("approved=%t events=%q", b.csrApproved(t, renewal), msgs)
		})
		assert.False(t, b.csrApproved(t, renewal), "no renewal for a Node that is not the instance's")
		require.NoError(t, b.env.Cluster.Client.CoreV1().Nodes().Delete(ctx, h.NodeName, metav1.DeleteOptions{}))
	})
	if t.Failed() {
		return
	}

	t.Run("unpaused: not joined, a re-join planned", func(t *testing.T) {
		setPaused(t, b, h.Name, false)
		eventually(t, time.Minute, "Joined=False, NodeDeleted", func() (bool, string) {
			wi := b.get(t, h.Name)
			c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionJoined)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controller.ReasonNodeDeleted, describe(wi)
		})
		var ev corev1.Event
		eventually(t, 30*time.Second, "a NodeDeleted event", func() (bool, string) {
			evs := b.events(t, h.Name, controller.ReasonNodeDeleted)
			if len(evs) > 0 {
				ev = evs[0]
			}
			return len(evs) > 0, "none"
		})
		assert.Equal(t, corev1.EventTypeWarning, ev.Type)
		assert.Contains(t, ev.Message, "Node "+h.NodeName+" (UID "+string(node.UID)+") was deleted")

		eventually(t, 3*time.Minute, "a re-join plan awaits approval", func() (bool, string) {
			wi := b.get(t, h.Name)
			return wi.Status.Phase == wsuv1.PhaseAwaitingApproval && wi.Status.LastPlan != nil && wi.Status.LastPlan.Hash != first, describe(wi)
		})
		wi := b.get(t, h.Name)
		assert.Empty(t, wi.Status.NodeUID, "the deleted Node's UID is forgotten: the re-joined Node is recorded anew")
		assert.Equal(t, "wsu:join.hcl", wi.Status.LastPlan.Playbook)
		assert.NotZero(t, wi.Status.LastPlan.Add+wi.Status.LastPlan.Change+wi.Status.LastPlan.Run, "the re-join has changes")
		assert.False(t, meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined), describe(wi))
		_, after := run.runs.record()
		var plans int
		for _, r := range after[len(before):] {
			assert.NotEqual(t, engine.ModeApply, r.mode, "nothing applied before approval: %s %s", r.playbook, r.mode)
			if r.playbook == "wsu:join.hcl" && r.mode == engine.ModePlan && !r.out.Failed {
				plans++
			}
		}
		assert.NotZero(t, plans, "a join planned after the Node was deleted")
	})
}

func setPaused(t *testing.T, b *bed, name string, paused bool) {
	t.Helper()
	wi := b.get(t, name)
	require.NotNil(t, wi, name)
	orig := wi.DeepCopy()
	wi.Spec.Paused = paused
	require.NoError(t, b.client.Patch(context.Background(), wi, client.MergeFrom(orig)))
}
