//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/kubetest"
)

const wmcoNamespace = "openshift-windows-machine-config-operator"

// TestWMCORunningLeavesConfigMapAlone: on OpenShift's layout (the BYOH
// ConfigMap in WMCO's namespace, the controller running as its
// ServiceAccount with the shipped Roles: its generated one and the
// overlay's by-name Role in WMCO's namespace), WMCO's operator Deployment
// coming up stops wsu managing the ConfigMap: its instances show
// ConfigMapManaged=False WMCORunning and phase Paused with a Warning
// event, the ConfigMap a Warning event; an entry added makes no instance
// and an entry taken out removes no host. WMCO scaled to zero (there is
// no kubelet: the test writes the Deployment's status), wsu resumes on the
// watch event: the condition goes, the new entry's instance joins and the
// removed entry's host is removed.
func TestWMCORunningLeavesConfigMapAlone(t *testing.T) {
	t.Parallel()
	cluster, asController, admin := wmcoBed(t)
	ctx := context.Background()
	cs := cluster.Client
	runs := &inSyncRunner{}
	startControllerAs(t, asController, controller.Options{Namespace: ns, BYOHNamespace: wmcoNamespace,
		ConfigMap: "windows-instances", StateDir: t.TempDir(), Runner: runs})
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-instances", Namespace: wmcoNamespace},
		Data:       map[string]string{"10.1.43.1": "username=Administrator", "10.1.43.4": "username=Administrator"},
	}
	require.NoError(t, admin.Create(ctx, cm))
	get := func(name string) *wsuv1.WindowsInstance { return instanceIfAny(t, admin, name) }
	for _, name := range []string{"10.1.43.1", "10.1.43.4"} {
		eventually(t, time.Minute, name+" joined", func() (bool, string) {
			wi := get(name)
			return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
		})
	}

	wmco := wmcoDeployment(t, cs, 1)
	for _, name := range []string{"10.1.43.1", "10.1.43.4"} {
		eventually(t, time.Minute, name+" left to WMCO", func() (bool, string) {
			wi := get(name)
			c := meta.FindStatusCondition(wiConditions(wi), wsuv1.ConditionConfigMapManaged)
			return c != nil && c.Status == metav1.ConditionFalse && c.Reason == controller.ReasonWMCORunning &&
				strings.Contains(c.Message, wmcoNamespace+"/"+controller.WMCODeployment) && wi.Status.Phase == wsuv1.PhasePaused, describe(wi)
		})
	}
	eventually(t, 30*time.Second, "a Warning event on the instance", warningEvent(t, cluster, "10.1.43.1", controller.ReasonWMCORunning, "--wmco-check=false"))

	// Entries added, one taken out: the ConfigMap's event naming them
	// shows the reconciler saw this version, and left it.
	cur := &corev1.ConfigMap{}
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(cm), cur))
	delete(cur.Data, "10.1.43.4")
	cur.Data["10.1.43.2"] = "username=Administrator"
	cur.Data["10.1.43.3"] = "username=Administrator"
	require.NoError(t, admin.Update(ctx, cur))
	eventually(t, time.Minute, "a Warning event on the ConfigMap naming what waits", configMapEvent(t, cluster, controller.ReasonWMCORunning,
		"; new entries waiting (2): 10.1.43.2, 10.1.43.3; entries taken out, their instances kept (1): 10.1.43.4"))
	assert.Nil(t, get("10.1.43.2"), "no instance made while WMCO runs")
	assert.Nil(t, get("10.1.43.3"), "no instance made while WMCO runs")
	gone := get("10.1.43.4")
	require.NotNil(t, gone, "a removed entry's instance stays while WMCO runs")
	assert.True(t, gone.DeletionTimestamp.IsZero(), "a removed entry's instance is not deleted while WMCO runs")
	assert.Zero(t, runs.removals("10.1.43.4"), "no remove run while WMCO runs")

	// Scaled to zero: no replica wanted, and (the test plays the
	// Deployment controller) none left.
	wmco.Spec.Replicas = ptr.To(int32(0))
	wmco, err := cs.AppsV1().Deployments(wmcoNamespace).Update(ctx, wmco, metav1.UpdateOptions{})
	require.NoError(t, err)
	wmco.Status = appsv1.DeploymentStatus{ObservedGeneration: wmco.Generation}
	_, err = cs.AppsV1().Deployments(wmcoNamespace).UpdateStatus(ctx, wmco, metav1.UpdateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"10.1.43.1", "10.1.43.2", "10.1.43.3"} {
		eventually(t, time.Minute, name+" managed by wsu", func() (bool, string) {
			wi := get(name)
			return wi != nil && meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionConfigMapManaged) == nil &&
				wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
		})
	}
	eventually(t, time.Minute, "the removed entry's host removed", func() (bool, string) {
		wi := get("10.1.43.4")
		return wi == nil, describe(wi)
	})
	assert.Equal(t, 1, runs.removals("10.1.43.4"), "one remove run, once WMCO stopped")
	assert.Zero(t, runs.removals("10.1.43.1"), "the kept entry's host is not removed")
}

// TestWMCOCheckOff: with --wmco-check=false a running WMCO Deployment beside
// the ConfigMap changes nothing: the entry's instance is made and joins,
// without the condition.
func TestWMCOCheckOff(t *testing.T) {
	t.Parallel()
	cluster, asController, admin := wmcoBed(t)
	ctx := context.Background()
	wmcoDeployment(t, cluster.Client, 1)
	startControllerAs(t, asController, controller.Options{Namespace: ns, BYOHNamespace: wmcoNamespace,
		ConfigMap: "windows-instances", StateDir: t.TempDir(), Runner: &inSyncRunner{}, IgnoreWMCO: true})
	require.NoError(t, admin.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-instances", Namespace: wmcoNamespace},
		Data:       map[string]string{"10.1.43.1": "username=Administrator"},
	}))
	wi := &wsuv1.WindowsInstance{}
	eventually(t, time.Minute, "the entry's instance joined", func() (bool, string) {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "10.1.43.1"}, wi); err != nil {
			return false, err.Error()
		}
		return wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
	})
	assert.Nil(t, meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionConfigMapManaged))
}

// wmcoBed is a test bed with the CRD, wsu's namespace and WMCO's (the key
// Secret in it), the controller's ServiceAccount bound to the shipped
// Roles (the config impersonating it), and an admin client.
func wmcoBed(t *testing.T) (*kubetest.Cluster, *rest.Config, client.Client) {
	t.Helper()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t)))
	for _, n := range []string{ns, wmcoNamespace} {
		require.NoError(t, cluster.EnsureNamespace(ctx, n))
	}
	_, err := cluster.Client.CoreV1().Secrets(wmcoNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: privateKeyPEM(t)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	asController := asControllerSA(t, cluster, grantBYOH, grantClusterInfo)
	return cluster, asController, hostVarsClient(t, cluster)
}

// wmcoDeployment creates WMCO's operator Deployment with replicas wanted
// and, as its pods would once up, as many in its status.
func wmcoDeployment(t *testing.T, cs kubernetes.Interface, replicas int32) *appsv1.Deployment {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"name": controller.WMCODeployment}
	d, err := cs.AppsV1().Deployments(wmcoNamespace).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: controller.WMCODeployment},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "test.local/wmco:never-run"}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	d.Status = appsv1.DeploymentStatus{Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, UpdatedReplicas: replicas}
	d, err = cs.AppsV1().Deployments(wmcoNamespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	return d
}

// configMapEvent finds a Warning event on the BYOH ConfigMap in WMCO's
// namespace.
func configMapEvent(t *testing.T, cluster *kubetest.Cluster, reason, contains string) func() (bool, string) {
	return func() (bool, string) {
		list, err := cluster.Client.CoreV1().Events(wmcoNamespace).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		var seen []string
		for _, e := range list.Items {
			if e.InvolvedObject.Name == "windows-instances" && e.Reason == reason && e.Type == corev1.EventTypeWarning {
				if strings.Contains(e.Message, contains) {
					return true, ""
				}
				seen = append(seen, e.Message)
			}
		}
		return false, fmt.Sprintf("%d events, of %s: %q", len(list.Items), reason, seen)
	}
}

// startControllerAs runs a controller (a manager, as `wsu controller`
// configures it) against the cluster of cfg until the test ends.
func startControllerAs(t *testing.T, cfg *rest.Config, opts controller.Options) {
	t.Helper()
	opts.NodeReadyCheck, opts.Backoff, opts.DriftInterval = time.Second, time.Hour, time.Hour
	mo, err := controller.ManagerConfig(opts, controller.ManagerOptions{MetricsAddr: "0", ProbeAddr: "0"})
	require.NoError(t, err)
	mo.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := ctrl.NewManager(cfg, mo)
	require.NoError(t, err)
	require.NoError(t, controller.Setup(mgr, opts))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(2 * time.Minute):
			t.Error("the controller did not stop within 2 minutes of its context ending")
		}
	})
}
