package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/modules"
)

func TestNodePodsWait(t *testing.T) {
	c := cluster(t)
	m := NodePodsWait{testClusters}
	ns := "pods-wait"
	ds := createDS(t, c.Client, testDaemonSet(ns, "cni-windows", false))
	cfg := kcfg(t, c, m, map[string]cty.Value{
		"node_name":  cty.StringVal("win-pods-1"),
		"daemonsets": strs(ns + "/cni-windows"),
		"timeout":    cty.NumberIntVal(1),
		"interval":   cty.NumberFloatVal(0.1),
	})

	// No pod on the node: a wait is planned, and apply names what it saw.
	p := plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	require.NotNil(t, p.Change)
	assert.Equal(t, modules.Run, p.Change.Action)
	d := requireDiag(t, apply(t, m, cfg, p.Change).Diagnostics, cfg, "Timed out waiting for the network pods on node win-pods-1", "daemonsets")
	assert.Contains(t, d.Detail, ns+"/cni-windows: no pod on the node yet")

	// Its pod, pulling: the state says why.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cni-windows-abcde",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}}},
		Spec: corev1.PodSpec{NodeName: "win-pods-1", Containers: []corev1.Container{{Name: "main", Image: "example.invalid/cni:1"}}},
	}
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	pod.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}}
	pod, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	d = requireDiag(t, apply(t, m, cfg, p.Change).Diagnostics, cfg, "Timed out waiting for the network pods on node win-pods-1", "daemonsets")
	assert.Contains(t, d.Detail, "pod cni-windows-abcde Pending, container main waiting: ImagePullBackOff no such image")

	// Running and Ready: nothing to wait for.
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	p = plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	require.Nil(t, p.Change)
	assert.Equal(t, "cni-windows-abcde", p.Result.GetAttr("pods").Index(cty.StringVal(ns+"/cni-windows")).AsString())
	ar := apply(t, m, cfg, nil)
	require.Empty(t, ar.Diagnostics)

	// A DaemonSet that does not exist fails at plan.
	missing := kcfg(t, c, m, map[string]cty.Value{"node_name": cty.StringVal("win-pods-1"), "daemonsets": strs(ns + "/nope")})
	requireDiag(t, plan(t, m, missing).Diagnostics, missing, "Cannot find a DaemonSet", "daemonsets")
}

// TestNodePodsWaitReactsToItsPods: with an hour's interval, the wait ends
// when its node's pod becomes Ready: the node's pod watch wakes it
// (without it the wait would sleep an hour; the minute below bounds a hung
// test, it is not a speed goal).
func TestNodePodsWaitReactsToItsPods(t *testing.T) {
	c := cluster(t)
	m := NodePodsWait{testClusters}
	ns := "pods-watch"
	ds := createDS(t, c.Client, testDaemonSet(ns, "cni-windows", false))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cni-windows-watch",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}}},
		Spec: corev1.PodSpec{NodeName: "win-pods-watch", Containers: []corev1.Container{{Name: "main", Image: "example.invalid/cni:1"}}},
	}
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := kcfg(t, c, m, map[string]cty.Value{
		"node_name": cty.StringVal("win-pods-watch"), "daemonsets": strs(ns + "/cni-windows"),
		"timeout": cty.NumberIntVal(7200), "interval": cty.NumberIntVal(3600),
	})
	p := plan(t, m, cfg)
	require.NotNil(t, p.Change)

	applied := make(chan modules.ApplyResponse, 1)
	go func() { applied <- m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: p.Change}) }()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	_, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case a := <-applied:
		require.Empty(t, a.Diagnostics)
		assert.Equal(t, "cni-windows-watch", a.Result.GetAttr("pods").Index(cty.StringVal(ns+"/cni-windows")).AsString())
	case <-time.After(time.Minute):
		t.Fatal("the wait did not end when its pod became Ready")
	}
}
