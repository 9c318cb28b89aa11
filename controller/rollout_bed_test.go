//go:build linux

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/payload"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestRolloutLimitAcrossRestart is issue 27's item 3: the rollout limit
// lived in the controller's memory, so a controller restarted while a Node
// was cordoned mid-upgrade upgraded another beside it. Against a real API
// server, with runs scripted (an upgrade apply cordons the Node and holds
// until the test lets it finish), maxUnavailable 1:
//
//   - controller 1 starts a's upgrade; while it holds, a's Node carries
//     the out-of-service mark; controller 1 stops (a's run cut short, its
//     Node left cordoned, as after SIGTERM or a lost lease);
//   - a is paused (its upgrade cannot resume yet) and b, outdated, is
//     added; controller 2, a new manager, waits with b (WaitingForRollout)
//     and runs no upgrade of it;
//   - a unpaused resumes its upgrade (its own mark holds its slot); b's
//     upgrade starts only after a's ended, and a's mark is gone;
//   - the mark does not leak: a mark on a Node whose instance is gone is
//     not counted and is cleared; an instance whose upgrade failed keeps
//     its Node marked and the other waits, until the failed instance is
//     deleted (removed, its Node deleted), when the other upgrades; the
//     same when only the failed instance's Node is deleted.
func TestRolloutLimitAcrossRestart(t *testing.T) {
	t.Parallel()
	cluster, admin, runs, opts, payloadDir := rolloutBed(t)
	ctx := context.Background()

	rolloutNode(t, cluster, "a", "1.0.0")
	runs.holdUpgrade("a")
	first := startRolloutController(t, cluster, opts, runs)
	require.NoError(t, admin.Create(ctx, rolloutInstance("a")))
	runs.waitStarted(t, "a", "wsu:upgrade.hcl", 1)
	node := getNode(t, cluster, "win-a")
	assert.Equal(t, "upgrade", node.Labels[controller.UnavailableLabel], "marked before the upgrade touched it")
	assert.True(t, node.Spec.Unschedulable, "cordoned by the upgrade")
	first()
	require.Equal(t, 0, runs.ended("a", "wsu:upgrade.hcl", engine.ModeApply), "a's upgrade was cut short")

	pauseInstance(t, admin, "a", true)
	rolloutNode(t, cluster, "b", "1.0.0")
	require.NoError(t, admin.Create(ctx, rolloutInstance("b")))
	second := newRolloutRunner(cluster.Client, "2.0.0")
	second.holdUpgrade("a")
	startRolloutController(t, cluster, opts, second)
	eventually(t, time.Minute, "a paused", func() (bool, string) {
		wi := getInstance(t, admin, "a")
		return wi.Status.Phase == wsuv1.PhasePaused, describe(wi)
	})
	eventually(t, time.Minute, "b waits for a rollout slot, or upgrades", func() (bool, string) {
		wi := getInstance(t, admin, "b")
		c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionUpToDate)
		return (c != nil && c.Reason == controller.ReasonRolloutWait) || second.started("b", "wsu:upgrade.hcl") > 0, describe(wi)
	})
	require.Zero(t, second.started("b", "wsu:upgrade.hcl"), "b's upgrade must wait: a's Node is cordoned mid-upgrade")

	pauseInstance(t, admin, "a", false)
	second.waitStarted(t, "a", "wsu:upgrade.hcl", 1)
	require.Zero(t, second.started("b", "wsu:upgrade.hcl"), "b waits while a upgrades")
	second.release("a")
	waitUpToDate(t, admin, "a", "2.0.0")
	waitUpToDate(t, admin, "b", "2.0.0")
	aEnd := second.endOf(t, "a", "wsu:upgrade.hcl", engine.ModeApply)
	bStart := second.startOf(t, "b", "wsu:upgrade.hcl", engine.ModeApply)
	assert.Greater(t, bStart, aEnd, "b's upgrade started after a's ended:\n%s", second.describe())
	for _, n := range []string{"win-a", "win-b"} {
		node := getNode(t, cluster, n)
		assert.Empty(t, node.Labels[controller.UnavailableLabel], "%s back in service: no mark", n)
		assert.False(t, node.Spec.Unschedulable, "%s uncordoned", n)
	}

	// A stale mark (its instance is gone) and a failed upgrade.
	ghost := rolloutNode(t, cluster, "ghost", "1.0.0")
	ghost.Labels[controller.UnavailableLabel] = "upgrade"
	_, err := cluster.Client.CoreV1().Nodes().Update(ctx, ghost, metav1.UpdateOptions{})
	require.NoError(t, err)
	second.failUpgrades(true)
	second.setVersion("3.0.0")
	writePayloadVersion(t, payloadDir, "3.0.0")
	failed, waiting := oneFailedOneWaiting(t, admin, "a", "b")
	assert.Equal(t, "upgrade", getNode(t, cluster, "win-"+failed).Labels[controller.UnavailableLabel], "a failed upgrade keeps its Node counted")
	assert.Empty(t, getNode(t, cluster, "win-ghost").Labels[controller.UnavailableLabel], "the stale mark was cleared")
	assert.Zero(t, second.startedApply(waiting, "wsu:upgrade.hcl", "3.0.0"), "%s waits while %s's Node is out of service", waiting, failed)

	second.failUpgrades(false)
	wi := getInstance(t, admin, failed)
	require.NoError(t, admin.Delete(ctx, wi))
	eventually(t, time.Minute, failed+" removed", func() (bool, string) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: failed}, &wsuv1.WindowsInstance{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	_, err = cluster.Client.CoreV1().Nodes().Get(ctx, "win-"+failed, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the removed instance's Node (and its mark) is gone: %v", err)
	waitUpToDate(t, admin, waiting, "3.0.0")
	assert.Greater(t, second.startOfVersion(t, waiting, "3.0.0"), second.endOf(t, failed, "wsu:remove.hcl", engine.ModeApply),
		"%s upgraded once %s was removed:\n%s", waiting, failed, second.describe())

	// A Node deleted while its upgrade failed takes its mark along.
	rolloutNode(t, cluster, "c", "3.0.0")
	require.NoError(t, admin.Create(ctx, rolloutInstance("c")))
	waitUpToDate(t, admin, "c", "3.0.0")
	second.failUpgrades(true)
	second.setVersion("4.0.0")
	writePayloadVersion(t, payloadDir, "4.0.0")
	failed, waiting = oneFailedOneWaiting(t, admin, waiting, "c")
	require.NoError(t, cluster.Client.CoreV1().Nodes().Delete(ctx, "win-"+failed, metav1.DeleteOptions{}))
	second.failUpgrades(false)
	waitUpToDate(t, admin, waiting, "4.0.0")
}

// TestRolloutSlotWakesWaiting is issue 28's "no fixed requeue where an
// event will come": an upgrade waiting for a rollout slot starts when the
// slot frees (the other upgrade ends and its Node's mark is cleared), not
// at the next timed look. The timed looks are an hour apart here, so only
// the wake can start it within the test's minute.
func TestRolloutSlotWakesWaiting(t *testing.T) {
	t.Parallel()
	cluster, admin, runs, opts, _ := rolloutBed(t)
	ctx := context.Background()
	opts.NodeReadyCheck, opts.PayloadCheck = time.Hour, time.Hour

	rolloutNode(t, cluster, "a", "1.0.0")
	runs.holdUpgrade("a")
	startRolloutController(t, cluster, opts, runs)
	require.NoError(t, admin.Create(ctx, rolloutInstance("a")))
	runs.waitStarted(t, "a", "wsu:upgrade.hcl", 1)

	rolloutNode(t, cluster, "b", "1.0.0")
	require.NoError(t, admin.Create(ctx, rolloutInstance("b")))
	eventually(t, time.Minute, "b waits for a rollout slot", func() (bool, string) {
		wi := getInstance(t, admin, "b")
		c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionUpToDate)
		return c != nil && c.Reason == controller.ReasonRolloutWait, describe(wi)
	})
	require.Zero(t, runs.started("b", "wsu:upgrade.hcl"))

	runs.release("a")
	waitUpToDate(t, admin, "a", "2.0.0")
	waitUpToDate(t, admin, "b", "2.0.0")
	assert.Greater(t, runs.startOf(t, "b", "wsu:upgrade.hcl", engine.ModeApply), runs.endOf(t, "a", "wsu:upgrade.hcl", engine.ModeApply),
		"b's upgrade started after a's ended:\n%s", runs.describe())
}

// rolloutBed is a rollout test's set-up: a cluster, the admin's client, a
// scripted runner whose upgrades reach payload 2.0.0, the controller's
// options and its payload directory (at 2.0.0).
func rolloutBed(t *testing.T) (*kubetest.Cluster, client.Client, *rolloutRunner, controller.Options, string) {
	t.Helper()
	cluster, _ := escalationBed(t)
	payloadDir := t.TempDir()
	writePayloadVersion(t, payloadDir, "2.0.0")
	opts := controller.Options{Namespace: ns, StateDir: t.TempDir(), Vars: []string{"payload_dir=" + payloadDir}}
	return cluster, hostVarsClient(t, cluster), newRolloutRunner(cluster.Client, "2.0.0"), opts, payloadDir
}

// oneFailedOneWaiting waits until one of two instances' upgrade failed
// and the other waits for a rollout slot, and names them.
func oneFailedOneWaiting(t *testing.T, c client.Client, one, other string) (failed, waiting string) {
	t.Helper()
	eventually(t, time.Minute, "one upgrade failed, the other waits", func() (bool, string) {
		failed, waiting = "", ""
		var out []string
		for _, name := range []string{one, other} {
			wi := getInstance(t, c, name)
			c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionUpToDate)
			switch {
			case c != nil && c.Reason == controller.ReasonUpgradeFailed:
				failed = name
			case c != nil && c.Reason == controller.ReasonRolloutWait:
				waiting = name
			}
			out = append(out, name+": "+describe(wi))
		}
		return failed != "" && waiting != "", strings.Join(out, "\n")
	})
	return failed, waiting
}

// startRolloutController starts a controller (a manager, as `wsu
// controller` configures it) with runner; the returned func stops it, as
// SIGTERM does (also at the test's end).
func startRolloutController(t *testing.T, cluster *kubetest.Cluster, opts controller.Options, runner run.Runner) func() {
	t.Helper()
	opts.Runner = runner
	if opts.NodeReadyCheck == 0 {
		opts.NodeReadyCheck = time.Second
	}
	if opts.PayloadCheck == 0 {
		opts.PayloadCheck = time.Second
	}
	opts.DriftInterval = time.Hour
	opts.Backoff, opts.MaxBackoff = time.Second, 2*time.Second
	mo, err := controller.ManagerConfig(opts, controller.ManagerOptions{MetricsAddr: "0", ProbeAddr: "0"})
	require.NoError(t, err)
	skip := true
	mo.Controller = config.Controller{SkipNameValidation: &skip}
	mgr, err := ctrl.NewManager(cluster.Config, mo)
	require.NoError(t, err)
	require.NoError(t, controller.Setup(mgr, opts))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err)
			case <-time.After(2 * time.Minute):
				t.Error("the controller did not stop within 2 minutes of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func writePayloadVersion(t *testing.T, dir, version string) {
	t.Helper()
	data, err := json.Marshal(payload.Manifest{Version: version, Components: []payload.Component{{
		Name: "kubelet", File: "kubelet.exe", Version: "v1.31.0", SHA256: strings.Repeat("ab", 32), Destination: `C:\k\kubelet.exe`,
	}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, payload.ManifestFile), data, 0o644))
}

// rolloutNode registers Node win-NAME as joined by instance NAME at
// version, Ready.
func rolloutNode(t *testing.T, cluster *kubetest.Cluster, name, version string) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	_, err := cluster.CreateNode(ctx, "win-"+name, map[string]string{kube.OSLabel: "windows"})
	require.NoError(t, err)
	require.NoError(t, cluster.SetNodeReady(ctx, "win-"+name))
	n := getNode(t, cluster, "win-"+name)
	n.Annotations = map[string]string{kube.OwnerAnnotation: kube.InstanceOwner(ns, name), "wsu.dev/version": version}
	n, err = cluster.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	return n
}

func rolloutInstance(name string) *wsuv1.WindowsInstance {
	return &wsuv1.WindowsInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: wsuv1.WindowsInstanceSpec{Address: name + ".example.com", Username: "Administrator",
			Vars: map[string]string{"node_name": "win-" + name}},
	}
}

func getNode(t *testing.T, cluster *kubetest.Cluster, name string) *corev1.Node {
	t.Helper()
	n, err := cluster.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

func getInstance(t *testing.T, c client.Client, name string) *wsuv1.WindowsInstance {
	t.Helper()
	wi := &wsuv1.WindowsInstance{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, wi))
	return wi
}

// instanceIfAny is the named instance, or nil when there is none.
func instanceIfAny(t *testing.T, c client.Client, name string) *wsuv1.WindowsInstance {
	t.Helper()
	wi := &wsuv1.WindowsInstance{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, wi)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return wi
}

func pauseInstance(t *testing.T, c client.Client, name string, paused bool) {
	t.Helper()
	wi := getInstance(t, c, name)
	orig := wi.DeepCopy()
	wi.Spec.Paused = paused
	require.NoError(t, c.Patch(context.Background(), wi, client.MergeFrom(orig)))
}

func waitUpToDate(t *testing.T, c client.Client, name, version string) {
	t.Helper()
	eventually(t, time.Minute, name+" at "+version, func() (bool, string) {
		wi := getInstance(t, c, name)
		return wi.Status.AppliedVersion == version && wi.Status.Phase == wsuv1.PhaseJoined &&
			meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionUpToDate), describe(wi)
	})
}

// rolloutRunner scripts runs: every plan of join finds nothing to change;
// an upgrade plans one change; an upgrade apply cordons the Node (as the
// stock upgrade does), then holds while the test says so, fails when told
// to, or annotates the Node with the payload version and uncordons it; a
// remove applies. Each run's start and end are numbered in one sequence.
type rolloutRunner struct {
	kc kubernetes.Interface

	mu      sync.Mutex
	version string
	hold    map[string]chan struct{}
	fail    bool
	seq     int
	log     []*rolloutRun
}

type rolloutRun struct {
	instance, playbook, version string
	mode                        engine.Mode
	start, end                  int // end 0: running, or cut short
}

func newRolloutRunner(kc kubernetes.Interface, version string) *rolloutRunner {
	return &rolloutRunner{kc: kc, version: version, hold: map[string]chan struct{}{}}
}

func (r *rolloutRunner) holdUpgrade(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold[name] = make(chan struct{})
}

func (r *rolloutRunner) release(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.hold[name])
	delete(r.hold, name)
}

func (r *rolloutRunner) failUpgrades(fail bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = fail
}

func (r *rolloutRunner) setVersion(v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.version = v
}

func (r *rolloutRunner) Run(ctx context.Context, req run.Request) run.Outcome {
	name := strings.TrimPrefix(req.Instance, ns+"/")
	r.mu.Lock()
	r.seq++
	run := &rolloutRun{instance: name, playbook: req.Playbook, mode: req.Mode, version: r.version, start: r.seq}
	r.log = append(r.log, run)
	hold, fail := r.hold[name], r.fail
	r.mu.Unlock()
	out := r.run(ctx, req, name, run.version, hold, fail)
	if !out.Failed || !strings.Contains(out.Message, "cancelled") {
		r.mu.Lock()
		r.seq++
		run.end = r.seq
		r.mu.Unlock()
	}
	return out
}

func (r *rolloutRunner) run(ctx context.Context, req run.Request, name, version string, hold chan struct{}, fail bool) run.Outcome {
	switch {
	case req.Playbook != "wsu:upgrade.hcl" && req.Mode == engine.ModePlan:
		return run.Outcome{Hash: "nothing-to-do"}
	case req.Playbook != "wsu:upgrade.hcl":
		return run.Outcome{Changed: 1}
	case req.Mode == engine.ModePlan:
		return run.Outcome{Hash: "upgrade-to-" + version, Changed: 1, Change: 1, Tasks: []string{"task.join"}}
	}
	node := "win-" + name
	if err := r.patchNode(ctx, node, `{"spec":{"unschedulable":true}}`); err != nil {
		return run.Outcome{Failed: true, Message: err.Error()}
	}
	if fail {
		return run.Outcome{Failed: true, Changed: 1, Message: "draining: a PodDisruptionBudget refuses the eviction"}
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return run.Outcome{Failed: true, Message: "the run was cancelled"}
		}
	}
	if err := r.patchNode(ctx, node, fmt.Sprintf(`{"metadata":{"annotations":{"wsu.dev/version":%q}}}`, version)); err != nil {
		return run.Outcome{Failed: true, Message: err.Error()}
	}
	if err := r.patchNode(ctx, node, `{"spec":{"unschedulable":null}}`); err != nil {
		return run.Outcome{Failed: true, Message: err.Error()}
	}
	return run.Outcome{Changed: 3}
}

func (r *rolloutRunner) patchNode(ctx context.Context, name, patch string) error {
	_, err := r.kc.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (r *rolloutRunner) find(name, playbook string, mode engine.Mode, version string) []rolloutRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []rolloutRun
	for _, run := range r.log {
		if run.instance == name && run.playbook == playbook && run.mode == mode && (version == "" || run.version == version) {
			out = append(out, *run)
		}
	}
	return out
}

// started counts name's applies of playbook.
func (r *rolloutRunner) started(name, playbook string) int {
	return len(r.find(name, playbook, engine.ModeApply, ""))
}

func (r *rolloutRunner) startedApply(name, playbook, version string) int {
	return len(r.find(name, playbook, engine.ModeApply, version))
}

func (r *rolloutRunner) ended(name, playbook string, mode engine.Mode) int {
	n := 0
	for _, run := range r.find(name, playbook, mode, "") {
		if run.end > 0 {
			n++
		}
	}
	return n
}

func (r *rolloutRunner) waitStarted(t *testing.T, name, playbook string, n int) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("%s's apply of %s started", name, playbook), func() (bool, string) {
		return r.started(name, playbook) >= n, r.describe()
	})
}

// startOf is the first start of name's runs of playbook in mode.
func (r *rolloutRunner) startOf(t *testing.T, name, playbook string, mode engine.Mode) int {
	t.Helper()
	runs := r.find(name, playbook, mode, "")
	require.NotEmpty(t, runs, r.describe())
	return runs[0].start
}

func (r *rolloutRunner) startOfVersion(t *testing.T, name, version string) int {
	t.Helper()
	runs := r.find(name, "wsu:upgrade.hcl", engine.ModeApply, version)
	require.NotEmpty(t, runs, r.describe())
	return runs[0].start
}

// endOf is the last end of name's runs of playbook in mode.
func (r *rolloutRunner) endOf(t *testing.T, name, playbook string, mode engine.Mode) int {
	t.Helper()
	end := 0
	for _, run := range r.find(name, playbook, mode, "") {
		end = max(end, run.end)
	}
	require.NotZero(t, end, r.describe())
	return end
}

func (r *rolloutRunner) describe() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, run := range r.log {
		fmt.Fprintf(&b, "  %d-%d %s %s %s %s\n", run.start, run.end, run.instance, run.mode, run.playbook, run.version)
	}
	return b.String()
}
