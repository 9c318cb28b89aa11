//go:build linux

package controller_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
)

// inSyncRunner stands in for hosts that match their playbook: every plan
// finds nothing to change (changes, when set: that many tasks to add)
// and every apply (a removal) succeeds. It records each run.
type inSyncRunner struct {
	changes int

	mu   sync.Mutex
	reqs []run.Request
}

func (r *inSyncRunner) Run(_ context.Context, req run.Request) run.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	out := run.Outcome{Hash: "0123456789abcdef0123456789abcdef"}
	if req.Mode == engine.ModePlan && r.changes > 0 {
		out.Changed, out.Add = r.changes, r.changes
	}
	return out
}

// all are the runs of instance name so far.
func (r *inSyncRunner) all(name string) []run.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []run.Request
	for _, req := range r.reqs {
		if req.Instance == ns+"/"+name {
			out = append(out, req)
		}
	}
	return out
}

// applies are the apply runs of instance name so far.
func (r *inSyncRunner) applies(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, req := range r.reqs {
		if req.Instance == ns+"/"+name && req.Mode == engine.ModeApply {
			n++
		}
	}
	return n
}

// removals are the remove runs of instance name so far.
func (r *inSyncRunner) removals(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, req := range r.reqs {
		if req.Instance == ns+"/"+name && req.Playbook == "wsu:remove.hcl" && req.Mode == engine.ModeApply {
			n++
		}
	}
	return n
}

// TestConfigMapTypoKeepsInstance: a joined entry of the BYOH ConfigMap
// edited into one that does not parse keeps its instance as it was (no
// removal run, its spec unchanged), with ConfigMapEntryValid=False and a
// Warning event on the instance; fixed, the condition goes; only taking
// the entry out removes the host. The other entry is left alone
// throughout.
func TestConfigMapTypoKeepsInstance(t *testing.T) {
	t.Parallel()
	cluster, admin := escalationBed(t)
	ctx := context.Background()
	runs := &inSyncRunner{}
	startHostVarsController(t, cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: runs, ConfigMap: "windows-instances"})
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-instances", Namespace: ns},
		Data:       map[string]string{"10.1.42.1": "username=Administrator", "10.1.42.2": "username=Administrator"},
	}
	require.NoError(t, admin.Create(ctx, cm))
	get := func(name string) *wsuv1.WindowsInstance { return instanceIfAny(t, admin, name) }
	for _, name := range []string{"10.1.42.1", "10.1.42.2"} {
		eventually(t, time.Minute, name+" joined", func() (bool, string) {
			wi := get(name)
			return wi != nil && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined), describe(wi)
		})
	}
	joined := get("10.1.42.1")
	setEntry := func(key, value string) {
		t.Helper()
		cur := &corev1.ConfigMap{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(cm), cur))
		if value == "" {
			delete(cur.Data, key)
		} else {
			cur.Data[key] = value
		}
		require.NoError(t, admin.Update(ctx, cur))
	}

	setEntry("10.1.42.1", "usrname=Administrator")
	eventually(t, time.Minute, "ConfigMapEntryValid=False on the typo's instance", func() (bool, string) {
		wi := get("10.1.42.1")
		c := meta.FindStatusCondition(wiConditions(wi), wsuv1.ConditionConfigMapEntryValid)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controller.ReasonInvalidEntry &&
			strings.Contains(c.Message, `Entry "10.1.42.1"`), describe(wi)
	})
	eventually(t, 30*time.Second, "a Warning event on the instance", warningEvent(t, cluster, "10.1.42.1", controller.ReasonInvalidEntry, "is not removed"))
	wi := get("10.1.42.1")
	assert.True(t, wi.DeletionTimestamp.IsZero(), "the instance is not deleted for a typo")
	assert.Equal(t, joined.Spec, wi.Spec, "its spec is left as it was")
	assert.True(t, meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined), describe(wi))
	assert.Zero(t, runs.removals("10.1.42.1"), "no remove run for a typo")
	assert.Nil(t, meta.FindStatusCondition(get("10.1.42.2").Status.Conditions, wsuv1.ConditionConfigMapEntryValid), "the good entry is not marked")

	setEntry("10.1.42.1", "username=Administrator")
	eventually(t, time.Minute, "the fixed entry's condition goes", func() (bool, string) {
		wi := get("10.1.42.1")
		return wi != nil && meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionConfigMapEntryValid) == nil, describe(wi)
	})
	assert.True(t, get("10.1.42.1").DeletionTimestamp.IsZero())
	assert.Zero(t, runs.removals("10.1.42.1"), "no remove run once fixed")

	setEntry("10.1.42.1", "")
	eventually(t, time.Minute, "the entry taken out removes its host", func() (bool, string) {
		wi := get("10.1.42.1")
		return wi == nil, describe(wi)
	})
	assert.Equal(t, 1, runs.removals("10.1.42.1"), "one remove run")
	assert.NotNil(t, get("10.1.42.2"), "the other entry's instance stays")
	assert.Zero(t, runs.removals("10.1.42.2"), "the other entry's host is not removed")
}

func wiConditions(wi *wsuv1.WindowsInstance) []metav1.Condition {
	if wi == nil {
		return nil
	}
	return wi.Status.Conditions
}

// TestConfigMapDefaultApproval: with --default-approval Manual the
// instances the BYOH ConfigMap makes are Manual: a fresh host's plan
// waits for approval and nothing is applied. An instance an admin makes
// keeps the CRD's default.
func TestConfigMapDefaultApproval(t *testing.T) {
	t.Parallel()
	cluster, admin := escalationBed(t)
	ctx := context.Background()
	runs := &inSyncRunner{changes: 3}
	startHostVarsController(t, cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: runs,
		ConfigMap: "windows-instances", DefaultApproval: wsuv1.ApprovalManual})
	require.NoError(t, admin.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-instances", Namespace: ns},
		Data:       map[string]string{"10.1.42.1": "username=Administrator"},
	}))
	own := instanceNamed("own", nil)
	require.NoError(t, admin.Create(ctx, own))
	wi := &wsuv1.WindowsInstance{}
	eventually(t, time.Minute, "the entry's instance awaits approval", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "10.1.42.1"}, wi); err != nil {
			return false, err.Error()
		}
		return wi.Status.Phase == wsuv1.PhaseAwaitingApproval, describe(wi)
	})
	assert.Equal(t, wsuv1.ApprovalManual, wi.Spec.Approval)
	assert.Zero(t, runs.applies("10.1.42.1"), "nothing applied before approval")
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(own), own))
	assert.Equal(t, wsuv1.ApprovalAuto, own.Spec.Approval, "an admin's instance keeps the CRD's default")
}
