//go:build linux

package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestVanillaBYOHJoin: the controller joins a BYOH ConfigMap host to a
// kubeadm cluster whose Windows network is HostProcess DaemonSets (no
// OVN-Kubernetes), with join's default network for kubeadm.
func TestVanillaBYOHJoin(t *testing.T) {
	t.Parallel()
	b := newBedWith(t, harness.Options{Hosts: 1, Network: harness.NetworkHostProcess})
	b.startController(t, controller.Options{ConfigMap: "windows-instances"}, controller.ManagerOptions{}, nil)
	ctx := context.Background()
	h := b.env.Hosts[0]
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-instances", Namespace: ns},
		Data:       map[string]string{h.Name: "username=" + b.env.SSHUser},
	}
	require.NoError(t, b.client.Create(ctx, cm))

	eventually(t, 5*time.Minute, "the BYOH host is joined and its Node Ready", func() (bool, string) {
		wi := b.get(t, h.Name)
		return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady), describe(wi)
	})
	node, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "hostprocess", node.Annotations["wsu.dev/network"], "kubeadm's default network")
	for _, ns := range []string{kubetest.CalicoNamespace, "kube-system"} {
		pods, err := b.env.Cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", h.NodeName).String()})
		require.NoError(t, err)
		require.NotEmptyf(t, pods.Items, "the %s DaemonSet's pod on the node", ns)
		for _, p := range pods.Items {
			assert.Equalf(t, corev1.PodRunning, p.Status.Phase, "%s/%s", ns, p.Name)
		}
	}
}
