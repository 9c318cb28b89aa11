package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/test/kubetest"
)

// podOpt shapes a test pod.
type podOpt func(*corev1.Pod)

func ownedBy(kind string) podOpt {
	return func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: p.Name + "-owner", UID: "uid-" + types.UID(p.Name), Controller: &yes}}
	}
}

func withLabels(l map[string]string) podOpt { return func(p *corev1.Pod) { p.Labels = l } }

func mirror(p *corev1.Pod) { p.Annotations = map[string]string{mirrorPodAnnotation: "hash"} }

func withEmptyDir(p *corev1.Pod) {
	p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
}

// runPod creates a pod bound to node (there is no scheduler) and plays its
// kubelet reporting it Running.
func runPod(t *testing.T, c *kubetest.Cluster, ns, name, node string, opts ...podOpt) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}}},
	}
	for _, o := range opts {
		o(p)
	}
	_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.SetPodRunning(ctx, ns, name))
}

func podExists(t *testing.T, c *kubetest.Cluster, ns, name string) bool {
	t.Helper()
	_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// drainNode registers a node and a namespace of the same name.
func drainNode(t *testing.T, c *kubetest.Cluster, name string) {
	t.Helper()
	joinedNode(t, c, name, nil)
	require.NoError(t, c.SetNodeReady(ctx, name))
	require.NoError(t, c.EnsureNamespace(ctx, name))
}

func TestNodeDrain(t *testing.T) {
	c := cluster(t)
	m := NodeDrain{testClusters}
	const node, ns = "drain-1", "drain-1"
	drainNode(t, c, node)
	runPod(t, c, ns, "web", node, ownedBy("ReplicaSet"))
	runPod(t, c, ns, "agent", node, ownedBy("DaemonSet"))
	runPod(t, c, ns, "static", node, mirror)
	runPod(t, c, ns, "elsewhere", "other-node", ownedBy("ReplicaSet"))

	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal(node), "grace_period": cty.NumberIntVal(0), "interval": cty.NumberFloatVal(0.05)})
	p := plan(t, m, cfg)
	require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
	require.NotNil(t, p.Change)
	assert.Equal(t, modules.Run, p.Change.Action)
	assert.Equal(t, "drain node drain-1", p.Change.Subject)
	assert.Equal(t, cty.False, field(t, p.Change, "unschedulable").Old)
	assert.Equal(t, strs("drain-1/web"), field(t, p.Change, "pods").Old)

	a := apply(t, m, cfg, p.Change)
	require.False(t, a.Diagnostics.HasErrors(), "%v", a.Diagnostics)
	assert.Equal(t, strs("drain-1/web"), a.Result.GetAttr("evicted"))
	assert.Equal(t, strs("drain-1/agent", "drain-1/static"), a.Result.GetAttr("skipped"))
	assert.False(t, podExists(t, c, ns, "web"), "evicted")
	assert.True(t, podExists(t, c, ns, "agent"), "DaemonSet pod left alone")
	assert.True(t, podExists(t, c, ns, "static"), "mirror pod left alone")
	assert.True(t, podExists(t, c, ns, "elsewhere"), "another node's pod left alone")

	// Cordoned and only skipped pods left: nothing to do.
	p = plan(t, m, cfg)
	require.Nil(t, p.Change)
	assert.Equal(t, strs("drain-1/agent", "drain-1/static"), p.Result.GetAttr("skipped"))

	// DaemonSet pods stop the drain when they may not be ignored.
	cfg = kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal(node), "ignore_daemonsets": cty.False})
	d := requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Cannot drain node drain-1", "name")
	assert.Contains(t, d.Detail, "DaemonSet pods (set ignore_daemonsets = true to leave them running): drain-1/agent")
}

func TestNodeDrainFilters(t *testing.T) {
	c := cluster(t)
	m := NodeDrain{testClusters}
	const node, ns = "drain-2", "drain-2"
	drainNode(t, c, node)
	runPod(t, c, ns, "bare", node)
	runPod(t, c, ns, "scratch", node, ownedBy("ReplicaSet"), withEmptyDir)

	tests := []struct {
		name     string
		attrs    map[string]cty.Value
		blockers []string // substrings of the plan error; none: the plan passes
	}{
		{name: "defaults", blockers: []string{"pods no controller manages", "drain-2/bare", "set force = true", "pods with emptyDir data", "drain-2/scratch"}},
		{name: "force", attrs: map[string]cty.Value{"force": cty.True}, blockers: []string{"emptyDir", "drain-2/scratch"}},
		{name: "emptydir", attrs: map[string]cty.Value{"delete_emptydir_data": cty.True}, blockers: []string{"drain-2/bare"}},
		{name: "both", attrs: map[string]cty.Value{"force": cty.True, "delete_emptydir_data": cty.True}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := map[string]cty.Value{"name": cty.StringVal(node), "grace_period": cty.NumberIntVal(0)}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := kcfg(t, c, m, attrs)
			p := plan(t, m, cfg)
			if len(tt.blockers) == 0 {
				require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
				assert.Equal(t, strs("drain-2/bare", "drain-2/scratch"), field(t, p.Change, "pods").Old)
				return
			}
			d := requireDiag(t, p.Diagnostics, cfg, "Cannot drain node drain-2", "name")
			for _, b := range tt.blockers {
				assert.Contains(t, d.Detail, b)
			}
		})
	}
	assert.True(t, podExists(t, c, ns, "bare"), "plans evict nothing")

	// A node that is gone has nothing to drain.
	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("gone-node")})
	p := plan(t, m, cfg)
	require.False(t, p.Diagnostics.HasErrors())
	require.Nil(t, p.Change)
	require.Len(t, p.Diagnostics, 1)
	assert.Equal(t, "Node gone-node does not exist", p.Diagnostics[0].Summary)
}

func TestNodeDrainPodDisruptionBudget(t *testing.T) {
	c := cluster(t)
	m := NodeDrain{testClusters}
	const node, ns = "drain-3", "drain-3"
	drainNode(t, c, node)
	runPod(t, c, ns, "db-0", node, ownedBy("StatefulSet"), withLabels(map[string]string{"app": "db"}))
	one := intstr.FromInt32(1)
	_, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, c.UpdatePDBStatus(ctx, ns, "db"))

	// minAvailable 1 with one pod: every eviction is refused until the
	// timeout, and the failure names the pod and the budget.
	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal(node), "timeout": cty.NumberFloatVal(0.5), "interval": cty.NumberFloatVal(0.05), "grace_period": cty.NumberIntVal(0)})
	p := plan(t, m, cfg)
	require.NotNil(t, p.Change)
	a := apply(t, m, cfg, p.Change)
	d := requireDiag(t, a.Diagnostics, cfg, "Timed out draining node drain-3", "name")
	assert.Contains(t, d.Detail, "pod drain-3/db-0: eviction refused")
	assert.Contains(t, d.Detail, "The disruption budget db needs 1 healthy pods and has 1 currently")
	assert.True(t, podExists(t, c, ns, "db-0"))

	// Without the budget the drain goes through.
	require.NoError(t, c.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "db", metav1.DeleteOptions{}))
	cfg = kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal(node), "interval": cty.NumberFloatVal(0.05), "grace_period": cty.NumberIntVal(0)})
	change, res := converge(t, m, cfg)
	require.NotNil(t, change)
	assert.Equal(t, strs("drain-3/db-0"), res.GetAttr("evicted"))
	assert.False(t, podExists(t, c, ns, "db-0"))
}

// TestNodeDrainWaitsForTermination evicts with the pod's own grace period:
// the pod stays Terminating until its kubelet (played by the test) reports
// the containers stopped, and the drain waits for that.
func TestNodeDrainWaitsForTermination(t *testing.T) {
	c := cluster(t)
	m := NodeDrain{testClusters}
	const node, ns = "drain-4", "drain-4"
	drainNode(t, c, node)
	runPod(t, c, ns, "slow", node, ownedBy("ReplicaSet"))

	kubelet := make(chan error, 1)
	go func() {
		// Wait for the eviction, then finish the pod's termination.
		for range 400 {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "slow", metav1.GetOptions{})
			if err != nil {
				kubelet <- err
				return
			}
			if p.DeletionTimestamp != nil {
				kubelet <- c.FinishPodDeletion(ctx, ns, "slow")
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
		kubelet <- assert.AnError
	}()
	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal(node), "timeout": cty.NumberIntVal(60), "interval": cty.NumberFloatVal(0.05)})
	p := plan(t, m, cfg)
	a := apply(t, m, cfg, p.Change)
	require.NoError(t, <-kubelet)
	require.False(t, a.Diagnostics.HasErrors(), "%v", a.Diagnostics)
	assert.Equal(t, strs("drain-4/slow"), a.Result.GetAttr("evicted"))
	assert.False(t, podExists(t, c, ns, "slow"))

	// A pod whose kubelet never confirms: the timeout says it is terminating.
	runPod(t, c, ns, "stuck", node, ownedBy("ReplicaSet"))
	cfg = kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal(node), "timeout": cty.NumberFloatVal(0.3), "interval": cty.NumberFloatVal(0.05)})
	p = plan(t, m, cfg)
	a = apply(t, m, cfg, p.Change)
	d := requireDiag(t, a.Diagnostics, cfg, "Timed out draining node drain-4", "name")
	assert.Contains(t, d.Detail, "pod drain-4/stuck was evicted but is still terminating")
}
