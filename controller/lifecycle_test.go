//go:build linux

package controller_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/test/harness"
)

// TestUpgradeOneAtATime: two joined instances; the payload the controller
// carries gets a new version (a new kube-proxy build, changed in place) →
// each Node is cordoned, drained, upgraded and uncordoned by the stock
// upgrade playbook, never two at once (maxUnavailable 1, read from the
// ordered stream of status changes), and every instance ends UpToDate and
// schedulable. The Manual instance's upgrade waits, untouched, until its
// plan is approved. Before that, with two managed nodes: a CSR for one node's
// name from a requester that is not that node, and a serving CSR of one
// node with the other's names, are refused.
func TestUpgradeOneAtATime(t *testing.T) {
	t.Parallel()
	b := newBed(t, 2)
	b.startController(t, controller.Options{}, controller.ManagerOptions{}, nil)
	ctx := context.Background()
	for _, h := range b.env.Hosts {
		require.NoError(t, b.client.Create(ctx, b.instance(t, h, wsuv1.ApprovalAuto)))
	}
	for _, h := range b.env.Hosts {
		b.waitJoined(t, h.Name)
	}
	old := b.env.Manifest.Version
	for _, h := range b.env.Hosts {
		eventually(t, time.Minute, h.Name+" UpToDate", func() (bool, string) {
			wi := b.get(t, h.Name)
			return meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionUpToDate) && wi.Status.AppliedVersion == old, describe(wi)
		})
	}

	// (A node cannot even submit a CSR naming another node: the API
	// server's NodeRestriction refuses it.)
	t.Run("nobody renews another node's certificate", func(t *testing.T) {
		b.allowCSRs(t)
		a, other := b.env.Hosts[0], b.env.Hosts[1]
		wrongUser := b.csrAs(t, "wrong-requester", "intruder", []string{"system:authenticated"}, other.NodeName,
			certificatesv1.KubeAPIServerClientKubeletSignerName, nil, nil)
		otherSANs := b.nodeCSR(t, "other-node-sans", a.NodeName, certificatesv1.KubeletServingSignerName,
			[]string{a.NodeName, other.NodeName}, []string{a.IPv4, other.IPv4})
		b.waitEventMatching(t, other.Name, controller.ReasonCSRRefused, wrongUser)
		b.waitEventMatching(t, a.Name, controller.ReasonCSRRefused, otherSANs)
		assert.False(t, b.csrApproved(t, wrongUser), "a user that is not the node asking for its certificate")
		assert.False(t, b.csrApproved(t, otherSANs), "node %s asking for a serving certificate with %s's names", a.NodeName, other.NodeName)
	})

	// The second instance's changes now need an admin's approval.
	manual := b.env.Hosts[1]
	wi := b.get(t, manual.Name)
	orig := wi.DeepCopy()
	wi.Spec.Approval = wsuv1.ApprovalManual
	require.NoError(t, b.client.Patch(ctx, wi, client.MergeFrom(orig)))
	eventually(t, time.Minute, "the new spec observed", func() (bool, string) {
		wi := b.get(t, manual.Name)
		return wi.Status.ObservedGeneration == wi.Generation && wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
	})

	phases := b.trackPhases(t)
	m, err := b.env.BumpPayload(ctx, "kube-proxy", "v1.37.2-standin")
	require.NoError(t, err)
	require.NotEqual(t, old, m.Version)

	var hash string
	eventually(t, 3*time.Minute, "the Manual instance's upgrade awaits approval", func() (bool, string) {
		wi := b.get(t, manual.Name)
		if wi.Status.Phase == wsuv1.PhaseAwaitingApproval && wi.Status.LastPlan != nil && wi.Status.LastPlan.Playbook == "wsu:upgrade.hcl" {
			hash = wi.Status.LastPlan.Hash
			return true, ""
		}
		return false, describe(wi)
	})
	node, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, manual.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, node.Spec.Unschedulable, "not cordoned before approval")
	assert.Equal(t, old, node.Annotations["wsu.dev/version"], "not upgraded before approval (kubeadm: wsu's annotation)")
	require.NoError(t, approval.Approve(ctx, b.client, client.ObjectKey{Namespace: ns, Name: manual.Name}, hash))
	for _, h := range b.env.Hosts {
		eventually(t, 5*time.Minute, h.Name+" upgraded", func() (bool, string) {
			wi := b.get(t, h.Name)
			return wi.Status.Phase == wsuv1.PhaseJoined && wi.Status.AppliedVersion == m.Version &&
				meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionUpToDate), describe(wi)
		})
	}
	maxUpgrading, upgraded, err := phases.result()
	require.NoError(t, err, "the watch on WindowsInstances ran throughout")
	assert.Equal(t, 1, maxUpgrading, "at most maxUnavailable (1) instance Upgrading at once")
	assert.ElementsMatch(t, []string{b.env.Hosts[0].Name, b.env.Hosts[1].Name}, upgraded, "each instance went through Upgrading")
	for _, h := range b.env.Hosts {
		node, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.False(t, node.Spec.Unschedulable, "%s uncordoned", h.NodeName)
		assert.Equal(t, m.Version, node.Annotations["wsu.dev/version"])
		b.waitEvent(t, h.Name, controller.ReasonUpgrading)
		b.waitEvent(t, h.Name, controller.ReasonUpgraded)
		wi := b.get(t, h.Name)
		require.NotNil(t, wi.Status.LastApply)
		assert.Equal(t, "wsu:upgrade.hcl", wi.Status.LastApply.Playbook)
		assert.False(t, meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionDrifted), "an upgrade is not drift: %s", describe(wi))
	}
}

// TestRestartMidJoin: the controller is stopped (its context cancelled, as
// SIGTERM does) while a join runs on the host; a new controller converges:
// the instance joined, one Node, and no temp file of an interrupted atomic
// write left on the host.
func TestRestartMidJoin(t *testing.T) {
	t.Parallel()
	b := newBed(t, 1)
	h := b.env.Hosts[0]
	first := b.startController(t, controller.Options{}, controller.ManagerOptions{}, nil)
	require.NoError(t, b.client.Create(context.Background(), b.instance(t, h, wsuv1.ApprovalAuto)))
	b.interruptJoin(t, h, first)

	b.startController(t, controller.Options{}, controller.ManagerOptions{}, nil)
	b.waitJoined(t, h.Name)
	b.checkConverged(t, h)
}

// TestLeaderElection: two controllers elect a leader through a real Lease;
// only the leader runs playbooks. Stopped mid-join, it releases the Lease,
// the standby takes over and finishes the join.
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	b := newBed(t, 1)
	h := b.env.Hosts[0]
	m := controller.ManagerOptions{LeaderElection: true, LeaderElectionID: "wsu-controller-test"}
	// Short timings, so a takeover is quick (a stopped leader releases the
	// Lease; the standby retries every half second); the renew deadline
	// leaves the leader room on a loaded machine.
	short := func(o *ctrl.Options) {
		lease, renew, retry := 10*time.Second, 8*time.Second, 500*time.Millisecond
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = &lease, &renew, &retry
	}
	one := b.startController(t, controller.Options{}, m, short)
	two := b.startController(t, controller.Options{}, m, short)
	leader, standby := elected(t, one, two)
	lease := &coordinationv1.Lease{}
	require.NoError(t, b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: m.LeaderElectionID}, lease))
	require.NotNil(t, lease.Spec.HolderIdentity)
	holder := *lease.Spec.HolderIdentity
	assert.NotEmpty(t, holder)

	require.NoError(t, b.client.Create(context.Background(), b.instance(t, h, wsuv1.ApprovalAuto)))
	b.interruptJoin(t, h, leader)
	started, _ := standby.runs.record()
	assert.Zero(t, started, "the standby ran nothing while the other led")

	select {
	case <-standby.mgr.Elected():
	case <-time.After(time.Minute):
		t.Fatal("the standby was not elected within a minute of the leader releasing the Lease")
	}
	b.waitJoined(t, h.Name)
	started, _ = standby.runs.record()
	assert.NotZero(t, started, "the new leader finished the join")
	require.NoError(t, b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: m.LeaderElectionID}, lease))
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.NotEqual(t, holder, *lease.Spec.HolderIdentity, "the Lease changed hands")
	b.checkConverged(t, h)
}

// elected waits until one of two controllers leads.
func elected(t *testing.T, one, two *running) (leader, standby *running) {
	t.Helper()
	select {
	case <-one.mgr.Elected():
		return one, two
	case <-two.mgr.Elected():
		return two, one
	case <-time.After(time.Minute):
		t.Fatal("no controller was elected within a minute")
	}
	return nil, nil
}

// interruptJoin waits until the join of h's instance has changed the host
// and stops the controller c running it; the join must not have finished.
func (b *bed) interruptJoin(t *testing.T, h *harness.Host, c *running) {
	t.Helper()
	before, err := b.env.Snapshot(h)
	require.NoError(t, err)
	eventually(t, 3*time.Minute, "the join is under way on the host", func() (bool, string) {
		wi := b.get(t, h.Name)
		if wi == nil || wi.Status.Phase != wsuv1.PhaseJoining {
			return false, describe(wi)
		}
		now, err := b.env.Snapshot(h)
		require.NoError(t, err)
		return len(now) != len(before), "the host is unchanged"
	})
	c.stop(t)
	_, ended := c.runs.record()
	require.NotEmpty(t, ended)
	last := ended[len(ended)-1]
	require.Equal(t, engine.ModeApply, last.mode)
	require.True(t, last.cancelled && last.out.Failed, "the controller was stopped during the join's apply: %+v", last)
	wi := b.get(t, h.Name)
	require.False(t, meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined), describe(wi))
}

// checkConverged asserts a host joined once: one Node, its own; the last
// plan found nothing to change; and no temp file of an atomic write left
// anywhere in the host's state.
func (b *bed) checkConverged(t *testing.T, h *harness.Host) {
	t.Helper()
	nodes, err := b.env.Cluster.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	assert.Equal(t, []string{h.NodeName}, names, "one Node")
	wi := b.get(t, h.Name)
	assert.True(t, meta.IsStatusConditionFalse(wi.Status.Conditions, wsuv1.ConditionDrifted), describe(wi))
	assert.Empty(t, partialFiles(t, h.Root), "temp files of interrupted writes")
}

// partialFiles lists the temp files of atomic writes under root: the
// agent's (osfs) and the simulation's own tables.
func partialFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n := d.Name(); strings.HasPrefix(n, ".wsu-tmp-") || strings.HasPrefix(n, ".tmp-") {
			out = append(out, p)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// waitJoined waits for an instance joined with a Ready Node.
func (b *bed) waitJoined(t *testing.T, name string) {
	t.Helper()
	eventually(t, 5*time.Minute, name+" joined with a Ready Node", func() (bool, string) {
		wi := b.get(t, name)
		return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined) &&
			meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady), describe(wi)
	})
}

// waitEventMatching waits for an event of reason on name whose message
// contains text.
func (b *bed) waitEventMatching(t *testing.T, name, reason, text string) {
	t.Helper()
	eventually(t, 30*time.Second, "a "+reason+" event on "+name+" naming "+text, func() (bool, string) {
		var seen []string
		for _, e := range b.events(t, name, reason) {
			if strings.Contains(e.Message, text) {
				return true, ""
			}
			seen = append(seen, e.Message)
		}
		return false, strings.Join(seen, " | ")
	})
}

// phaseTracker follows every status change of the namespace's instances,
// in the order the API server made them, and keeps the most instances seen
// Upgrading at once.
type phaseTracker struct {
	mu       sync.Mutex
	phase    map[string]string
	max      int
	upgraded map[string]bool
	err      error
}

func (b *bed) trackPhases(t *testing.T) *phaseTracker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := b.client.Watch(ctx, &wsuv1.WindowsInstanceList{}, client.InNamespace(ns))
	require.NoError(t, err)
	p := &phaseTracker{phase: map[string]string{}, upgraded: map[string]bool{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p.see(ev)
		}
		p.mu.Lock()
		if p.err == nil {
			p.err = errors.New("the watch ended early")
		}
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return p
}

func (p *phaseTracker) see(ev watch.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	wi, ok := ev.Object.(*wsuv1.WindowsInstance)
	switch {
	case ev.Type == watch.Error:
		p.err = fmt.Errorf("watch: %w", apierrors.FromObject(ev.Object))
		return
	case !ok:
		return
	case ev.Type == watch.Deleted:
		delete(p.phase, wi.Name)
	default:
		p.phase[wi.Name] = wi.Status.Phase
	}
	n := 0
	for name, phase := range p.phase {
		if phase == wsuv1.PhaseUpgrading {
			n++
			p.upgraded[name] = true
		}
	}
	p.max = max(p.max, n)
}

// result is the most instances Upgrading at once, and which were.
func (p *phaseTracker) result() (int, []string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for n := range p.upgraded {
		names = append(names, n)
	}
	return p.max, names, p.err
}

// allowCSRs lets every authenticated user create CSRs, as the
// system:node-bootstrapper role allows kubelets.
//
// The API server's RBAC authorizer learns of the binding from its own
// informer, a moment after the create returns: the helper waits until
// the authorizer has seen it (kubetest's AwaitRBAC), so the test's first
// CSR is not refused by a binding the authorizer has not seen yet.
func (b *bed) allowCSRs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	_, err := b.env.Cluster.Client.RbacV1().ClusterRoleBindings().Create(ctx, csrCreators(), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, b.env.Cluster.AwaitRBAC(ctx))
}
