//go:build linux

package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
)

// TestPlanTextKept: a Manual instance's plan is readable in the cluster
// as `wsu show` prints it (its task changes, secrets hidden by the engine
// as it planned), in ConfigMap wsu-plan-NAME owned by the instance, for
// the hash status.lastPlan records, with the command approving it.
func TestPlanTextKept(t *testing.T) {
	t.Parallel()
	b := startBed(t, 1, controller.Options{})
	ctx := context.Background()
	h := b.env.Hosts[0]
	require.NoError(t, b.client.Create(ctx, b.instance(t, h, wsuv1.ApprovalManual)))

	var hash string
	eventually(t, 3*time.Minute, "the plan awaits approval", func() (bool, string) {
		cur := b.get(t, h.Name)
		if cur != nil && cur.Status.Phase == wsuv1.PhaseAwaitingApproval && cur.Status.LastPlan != nil {
			hash = cur.Status.LastPlan.Hash
			return true, ""
		}
		return false, describe(cur)
	})
	cm := &corev1.ConfigMap{}
	eventually(t, 30*time.Second, "the plan's ConfigMap", func() (bool, string) {
		err := b.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: approval.PlanConfigMapName(h.Name)}, cm)
		return err == nil && cm.Annotations[approval.PlanHashAnnotation] == hash, cm.Annotations[approval.PlanHashAnnotation]
	})
	text := cm.Data[approval.PlanTextKey]
	assert.True(t, strings.HasPrefix(text, "Plan "+hash+" of wsu:join.hcl for WindowsInstance "+ns+"/"+h.Name), text)
	assert.Contains(t, text, "HOST "+h.Name, "the host's changes")
	assert.Contains(t, text, "wsu approve "+h.Name+" -n "+ns+" --plan "+hash)
	assert.NotContains(t, text, "BEGIN OPENSSH PRIVATE KEY", "the key is an inventory secret, never shown")
	assert.Contains(t, text, "Plan: ", "the count, as wsu show prints it")
	key := client.ObjectKey{Namespace: ns, Name: h.Name}
	read, err := approval.ReadPlanText(ctx, b.client, key, hash)
	require.NoError(t, err)
	assert.Equal(t, text, read, "wsu approve NAME shows the kept text")
	read, err = approval.ReadPlanText(ctx, b.client, key, "0123456789abcdef0123456789abcdef")
	require.NoError(t, err)
	assert.Empty(t, read, "not for another plan's hash")
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, "WindowsInstance", cm.OwnerReferences[0].Kind)
	assert.Equal(t, b.get(t, h.Name).UID, cm.OwnerReferences[0].UID)
}
