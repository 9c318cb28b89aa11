//go:build linux

package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestMissingWatchGrantReported: the controller, as its ServiceAccount
// with its generated Role but without the wsu-cluster-info Role bound,
// cannot watch the cluster CA in kube-public/cluster-info. It says so at
// its set-up, naming the object and the Role to bind, instead of waiting
// for a cache that never syncs.
func TestMissingWatchGrantReported(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t)))
	require.NoError(t, cluster.EnsureNamespace(ctx, ns))
	asController := asControllerSA(t, cluster) // no grantClusterInfo
	opts := controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: &inSyncRunner{}}
	mo, err := controller.ManagerConfig(opts, controller.ManagerOptions{MetricsAddr: "0", ProbeAddr: "0"})
	require.NoError(t, err)
	mo.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := ctrl.NewManager(asController, mo)
	require.NoError(t, err)
	setup := make(chan error, 1)
	go func() { setup <- controller.Setup(mgr, opts) }()
	select {
	case err = <-setup:
	case <-time.After(time.Minute):
		t.Fatal("the controller's set-up did not end within a minute")
	}
	require.Error(t, err, "a controller that may not watch kube-public/cluster-info")
	t.Logf("the set-up said: %v", err)
	assert.Contains(t, err.Error(), "kube-public/cluster-info")
	assert.Contains(t, err.Error(), "wsu-cluster-info", "names the Role to bind")
	assert.Contains(t, err.Error(), "deploy/rbac/wsu-cluster-role.yaml")
}
