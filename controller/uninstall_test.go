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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
)

// byohNS plays WMCO's namespace: the BYOH ConfigMap and the key Secret,
// read by a controller whose instances are in ns.
const byohNS = "wmco"

// TestUninstallLeavesHostsJoined (issue 26, finding 6): uninstalling never
// starts removals. A host joined from a BYOH ConfigMap, then:
//
//   - OpenShift's layout (the ConfigMap and key in WMCO's namespace, the
//     instances in wsu's): deleting the CRD deletes the instance, and the
//     controller lets it go without running remove; the Node stays;
//   - the vanilla layout (all in one namespace; kube-controller-manager's
//     namespace controller deleting its objects): deleting the namespace
//     deletes the ConfigMap and the instance, and nothing is removed.
func TestUninstallLeavesHostsJoined(t *testing.T) {
	t.Run("CRD deleted, BYOH ConfigMap in WMCO's namespace", func(t *testing.T) {
		b := newBed(t, 1)
		ctx := context.Background()
		require.NoError(t, b.env.Cluster.EnsureNamespace(ctx, byohNS))
		h := b.env.Hosts[0]
		b.byohInventory(t, byohNS, h)
		err := b.env.Cluster.Client.CoreV1().Secrets(ns).Delete(ctx, kubeinv.KeySecret, metav1.DeleteOptions{})
		require.NoError(t, err, "the key is read from the BYOH namespace only")
		c := b.startController(t, controller.Options{ConfigMap: "windows-instances", BYOHNamespace: byohNS}, controller.ManagerOptions{}, nil)
		name := controller.InstanceName(h.Name)
		b.waitJoined(t, name)
		wi := b.get(t, name)
		assert.Empty(t, wi.OwnerReferences, "no owner reference across namespaces (the garbage collector would delete it)")
		assert.Equal(t, wsuv1.SourceConfigMap, wi.Labels[wsuv1.SourceLabel])
		joined, err := b.env.Snapshot(h)
		require.NoError(t, err)

		b.deleteCRD(t)
		b.waitGone(t, "the instance, let go", func() bool {
			_, err := b.env.Cluster.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return err == nil && b.crdGone(t)
		})
		b.assertStillJoined(t, c, h, joined)
	})

	t.Run("namespace deleted", func(t *testing.T) {
		b := newBedWith(t, harness.Options{Hosts: 1, Cluster: []kubetest.Option{kubetest.WithControllerManager()}})
		ctx := context.Background()
		h := b.env.Hosts[0]
		b.byohInventory(t, ns, h)
		c := b.startController(t, controller.Options{ConfigMap: "windows-instances"}, controller.ManagerOptions{}, nil)
		name := controller.InstanceName(h.Name)
		b.waitJoined(t, name)
		joined, err := b.env.Snapshot(h)
		require.NoError(t, err)
		require.NoError(t, b.env.Cluster.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
		b.waitGone(t, "the namespace, its instance let go", func() bool {
			_, err := b.env.Cluster.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		b.assertStillJoined(t, c, h, joined)
	})
}

// byohInventory writes the BYOH ConfigMap listing h and the key Secret in
// namespace.
func (b *bed) byohInventory(t *testing.T, namespace string, h *harness.Host) {
	t.Helper()
	ctx := context.Background()
	cs := b.env.Cluster.Client
	if namespace != ns {
		sec, err := cs.CoreV1().Secrets(ns).Get(ctx, kubeinv.KeySecret, metav1.GetOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret}, Data: sec.Data}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-instances"},
		Data:       map[string]string{h.Name: "username=" + b.env.SSHUser},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func (b *bed) crds(t *testing.T) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(b.env.Cluster.Config)
	require.NoError(t, err)
	return dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
}

func (b *bed) deleteCRD(t *testing.T) {
	t.Helper()
	require.NoError(t, b.crds(t).Delete(context.Background(), "windowsinstances.wsu.dev", metav1.DeleteOptions{}))
}

func (b *bed) crdGone(t *testing.T) bool {
	_, err := b.crds(t).Get(context.Background(), "windowsinstances.wsu.dev", metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// waitGone waits for cond: what an uninstall deletes is gone, its
// finalizers released.
func (b *bed) waitGone(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually(t, 2*time.Minute, what, func() (bool, string) { return cond(), "still there" })
}

// assertStillJoined: no remove ran, the Node stays, the host keeps its
// files.
func (b *bed) assertStillJoined(t *testing.T, c *running, h *harness.Host, joined map[string]string) {
	t.Helper()
	now, err := b.env.Snapshot(h)
	require.NoError(t, err)
	assert.Equal(t, joined, now, "the host is as joined")
	_, ended := c.runs.record()
	for _, r := range ended {
		assert.False(t, strings.Contains(r.playbook, "remove"), "an uninstall ran %s on %s", r.playbook, r.instance)
	}
	n, err := b.env.Cluster.Client.CoreV1().Nodes().Get(context.Background(), h.NodeName, metav1.GetOptions{})
	require.NoError(t, err, "the Node stays")
	assert.True(t, n.DeletionTimestamp.IsZero())
}
