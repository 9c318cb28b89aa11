//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wsu-project/wsu/agent/platform/sim"
	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/engine"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
)

// TestKeyRotationResumesAfterCrash is issue 27's item 4: a rotation that
// stopped after rotate-key removed the old key from the host, before the
// controller recorded the new key's fingerprint, left the controller
// logging in with the old key for ever. Here the host's sshd (reading the
// host's own administrators_authorized_keys) authorises only the new key,
// as rotate-key leaves it, while the instance still records the old key and
// the key Secret holds both (KEY and KEY.new): the controller, refused with
// the old key, logs in with the new one, records it (keyFingerprint,
// KeyRotated, an event), and carries on: a changed spec is planned and the
// instance is Joined, logged in with the new key, without joining again.
func TestKeyRotationResumesAfterCrash(t *testing.T) {
	t.Parallel()
	b := newBed(t, 1)
	h := b.env.Hosts[0]
	ctx := context.Background()
	old, err := os.ReadFile(b.env.KeyFile)
	require.NoError(t, err)
	srv := b.ownSSHD(t, h, old)
	c := b.startController(t, controller.Options{PayloadCheck: time.Hour}, controller.ManagerOptions{}, nil)
	wi := b.instance(t, h, wsuv1.ApprovalAuto)
	wi.Spec.HostVars["ansible_port"] = fmt.Sprint(srv.Port)
	// A refused key is not retried for auth_retry_window's default two
	// minutes (meant for hosts still provisioning their keys).
	wi.Spec.HostVars["auth_retry_window"] = "0s"
	require.NoError(t, b.client.Create(ctx, wi))
	b.waitJoined(t, h.Name)
	require.Equal(t, fingerprintOf(t, old), b.get(t, h.Name).Status.Identity.KeyFingerprint)
	_, ended := c.runs.record()
	joined := len(ended)

	// What rotate-key leaves on the host, the controller never told.
	next := readKey(t, sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{}))
	nextFP := fingerprintOf(t, next)
	b.setAuthorizedKeys(t, h.Name, next)
	require.Error(t, login(srv, b.env.SSHUser, old), "the host refuses the old key")
	require.NoError(t, login(srv, b.env.SSHUser, next))
	b.setKeys(t, old, next)

	eventually(t, 2*time.Minute, h.Name+" logs in with the new key", func() (bool, string) {
		wi := b.get(t, h.Name)
		c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
		return wi.Status.Identity.KeyFingerprint == nextFP && c != nil && c.Status == metav1.ConditionTrue && c.Reason == controller.ReasonKeyRotated,
			wi.Status.Identity.KeyFingerprint + " " + describe(wi)
	})
	b.waitEventMatching(t, h.Name, controller.ReasonKeyRotated, "refused the recorded key")

	// It carries on: a new spec is planned, logged in with the new key.
	wi = b.get(t, h.Name)
	orig := wi.DeepCopy()
	wi.Spec.HostVars["connect_timeout"] = "20"
	require.NoError(t, b.client.Patch(ctx, wi, client.MergeFrom(orig)))
	eventually(t, 2*time.Minute, h.Name+" planned again and joined", func() (bool, string) {
		wi := b.get(t, h.Name)
		return wi.Status.ObservedGeneration == wi.Generation && wi.Status.Phase == wsuv1.PhaseJoined &&
			meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionReachable) &&
			!meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionDegraded), describe(wi)
	})
	assert.Equal(t, nextFP, b.get(t, h.Name).Status.Identity.KeyFingerprint)
	assert.Equal(t, string(gossh.MarshalAuthorizedKey(publicOf(t, next))), b.authorizedKeys(t, h), "only the new key is authorised")
	_, ended = c.runs.record()
	last := ended[len(ended)-1]
	assert.Equal(t, "wsu:join.hcl", last.playbook, "the last run is the new spec's plan")
	assert.False(t, last.out.Failed, "and it logged in: %s", last.out.Message)
	for _, r := range ended[joined:] {
		assert.False(t, r.mode == engine.ModeApply && r.playbook == "wsu:join.hcl", "not joined again")
	}
}

// TestKeyRotationWaitsForApproval: under approval Manual a key rotation is
// a change like any other. The key Secret gets a .new key → the instance
// stops at AwaitingApproval with the rotation's plan as lastPlan and the
// host untouched (only the old key authorised); approving that hash
// rotates it.
func TestKeyRotationWaitsForApproval(t *testing.T) {
	t.Parallel()
	b := newBed(t, 1)
	h := b.env.Hosts[0]
	ctx := context.Background()
	old, err := os.ReadFile(b.env.KeyFile)
	require.NoError(t, err)
	srv := b.ownSSHD(t, h, old)
	c := b.startController(t, controller.Options{PayloadCheck: time.Hour}, controller.ManagerOptions{}, nil)
	wi := b.instance(t, h, wsuv1.ApprovalAuto)
	wi.Spec.HostVars["ansible_port"] = fmt.Sprint(srv.Port)
	require.NoError(t, b.client.Create(ctx, wi))
	b.waitJoined(t, h.Name)
	wi = b.get(t, h.Name)
	orig := wi.DeepCopy()
	wi.Spec.Approval = wsuv1.ApprovalManual
	require.NoError(t, b.client.Patch(ctx, wi, client.MergeFrom(orig)))
	eventually(t, time.Minute, "the Manual spec observed", func() (bool, string) {
		wi := b.get(t, h.Name)
		return wi.Status.ObservedGeneration == wi.Generation && wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
	})

	next := readKey(t, sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{}))
	nextFP := fingerprintOf(t, next)
	b.setKeys(t, old, next)
	var hash string
	eventually(t, 2*time.Minute, "the rotation awaits approval (or ran)", func() (bool, string) {
		wi := b.get(t, h.Name)
		if wi.Status.Identity.KeyFingerprint == nextFP {
			return true, ""
		}
		if wi.Status.Phase == wsuv1.PhaseAwaitingApproval && wi.Status.LastPlan != nil && wi.Status.LastPlan.Playbook == "wsu:rotate-key.hcl" {
			hash = wi.Status.LastPlan.Hash
			return true, ""
		}
		return false, describe(wi)
	})
	wi = b.get(t, h.Name)
	require.NotEqual(t, nextFP, wi.Status.Identity.KeyFingerprint, "a Manual instance is not rotated before approval")
	require.NotEmpty(t, hash)
	assert.Equal(t, fingerprintOf(t, old), wi.Status.Identity.KeyFingerprint)
	kr := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
	require.NotNil(t, kr)
	assert.Equal(t, controller.ReasonKeyRotationNeeded, kr.Reason)
	assert.Equal(t, string(gossh.MarshalAuthorizedKey(publicOf(t, old))), b.authorizedKeys(t, h), "the host untouched before approval")
	assert.Error(t, login(srv, b.env.SSHUser, next))
	_, ended := c.runs.record()
	for _, r := range ended {
		assert.False(t, r.playbook == "wsu:rotate-key.hcl" && r.mode == engine.ModeApply, "no rotate-key applied before approval")
	}
	b.waitEventMatching(t, h.Name, controller.ReasonAwaitingApproval, hash)

	require.NoError(t, approval.Approve(ctx, b.client, client.ObjectKey{Namespace: ns, Name: h.Name}, hash))
	b.waitKey(t, h.Name, nextFP, controller.ReasonKeyRotated)
	assert.Error(t, login(srv, b.env.SSHUser, old), "the approved rotation ran")
	assert.NoError(t, login(srv, b.env.SSHUser, next))
	assert.Equal(t, string(gossh.MarshalAuthorizedKey(publicOf(t, next))), b.authorizedKeys(t, h))
	eventually(t, time.Minute, h.Name+" back to Joined", func() (bool, string) {
		wi := b.get(t, h.Name)
		return wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
	})
}

// setAuthorizedKeys makes key's public key the only one the host's sshd
// (ownSSHD) authorises.
func (b *bed) setAuthorizedKeys(t *testing.T, name string, key []byte) {
	t.Helper()
	for _, h := range b.env.Hosts {
		if h.Name != name {
			continue
		}
		require.NoError(t, b.env.WithSim(h, func(s *sim.Host) error {
			return s.WriteFile(context.Background(), adminKeys, strings.NewReader(string(gossh.MarshalAuthorizedKey(publicOf(t, key)))), 0o644)
		}))
		return
	}
	t.Fatalf("no host %s", name)
}
