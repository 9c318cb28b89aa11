//go:build linux

package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/userdata"
)

// TestUserDataSecret: on an OpenShift-shaped bed (the Machine API's and
// the Cluster API's namespaces exist) the controller, as its ServiceAccount
// with the shipped Roles, writes windows-user-data into both once the key
// Secret appears in WMCO's namespace, with the script `wsu user-data`
// renders for the key's public half; replacing the key rewrites both.
func TestUserDataSecret(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t)))
	for _, n := range append([]string{ns, wmcoNamespace}, controller.UserDataNamespaces()...) {
		require.NoError(t, cluster.EnsureNamespace(ctx, n))
	}
	startControllerAs(t, asControllerSA(t, cluster, grantBYOH, grantClusterInfo), controller.Options{Namespace: ns, BYOHNamespace: wmcoNamespace,
		ConfigMap: "windows-instances", StateDir: t.TempDir(), Runner: &inSyncRunner{}})

	secrets := cluster.Client.CoreV1().Secrets(wmcoNamespace)
	key := privateKeyPEM(t)
	_, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: key},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	first := awaitUserData(t, cluster, key)

	rotated := privateKeyPEM(t)
	s, err := secrets.Get(ctx, kubeinv.KeySecret, metav1.GetOptions{})
	require.NoError(t, err)
	s.Data[kubeinv.KeySecretKey] = rotated
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	second := awaitUserData(t, cluster, rotated)
	assert.NotEqual(t, first, second, "the user data changed with the key")
}

// awaitUserData waits until windows-user-data in each of the Machine API
// namespaces authorises key's public half, and returns the script.
func awaitUserData(t *testing.T, cluster *kubetest.Cluster, key []byte) string {
	t.Helper()
	pub, err := userdata.PublicKey(key)
	require.NoError(t, err)
	want := userdata.Script(pub)
	for _, n := range controller.UserDataNamespaces() {
		eventually(t, time.Minute, "windows-user-data in "+n+" authorises the key", func() (bool, string) {
			s, err := cluster.Client.CoreV1().Secrets(n).Get(context.Background(), userdata.SecretName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			got := string(s.Data[userdata.SecretKey])
			return got == want && s.Annotations[userdata.FingerprintAnnotation] == gossh.FingerprintSHA256(pub), got
		})
	}
	return want
}

// TestUserDataSecretVanilla: on a cluster without OpenShift's Machine API
// namespaces the same pass, as the controller's ServiceAccount with the
// Roles a vanilla install binds, succeeds and creates nothing: no Secret
// and no namespace.
func TestUserDataSecretVanilla(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	require.NoError(t, cluster.EnsureNamespace(ctx, ns))
	asController := asControllerSA(t, cluster) // the Machine API Roles skipped: no such namespace
	_, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: privateKeyPEM(t)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c, err := client.New(asController, client.Options{Scheme: scheme})
	require.NoError(t, err)
	r := &controller.UserDataReconciler{Client: c, Reader: c, Namespaces: controller.UserDataNamespaces(),
		KeySecret: types.NamespacedName{Namespace: ns, Name: kubeinv.KeySecret}}
	_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: r.KeySecret})
	require.NoError(t, err)

	all, err := cluster.Client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + userdata.SecretName})
	require.NoError(t, err)
	assert.Empty(t, all.Items, "no user-data Secret on a vanilla cluster")
	for _, n := range controller.UserDataNamespaces() {
		_, err := cluster.Client.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "namespace %s not created: %v", n, err)
	}
}

// TestUserDataSecretLeftToWMCO: while WMCO's operator runs, the pass (as
// the controller's ServiceAccount) writes no user-data Secret, which is
// WMCO's then; once WMCO is scaled to zero the same pass writes it.
func TestUserDataSecretLeftToWMCO(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	for _, n := range append([]string{ns, wmcoNamespace}, controller.UserDataNamespaces()...) {
		require.NoError(t, cluster.EnsureNamespace(ctx, n))
	}
	asController := asControllerSA(t, cluster, grantBYOH)
	key := privateKeyPEM(t)
	_, err := cluster.Client.CoreV1().Secrets(wmcoNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: key},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	wmco := wmcoDeployment(t, cluster.Client, 1)

	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c, err := client.New(asController, client.Options{Scheme: scheme})
	require.NoError(t, err)
	r := &controller.UserDataReconciler{Client: c, Reader: c, WMCO: c, WMCONamespace: wmcoNamespace,
		Namespaces: controller.UserDataNamespaces(), KeySecret: types.NamespacedName{Namespace: wmcoNamespace, Name: kubeinv.KeySecret}}
	_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: r.KeySecret})
	require.NoError(t, err)
	all, err := cluster.Client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + userdata.SecretName})
	require.NoError(t, err)
	assert.Empty(t, all.Items, "no user-data Secret while WMCO runs")

	// Scaled to zero: no replica wanted, and (the test plays the
	// Deployment controller) none left.
	wmco.Spec.Replicas = new(int32)
	wmco, err = cluster.Client.AppsV1().Deployments(wmcoNamespace).Update(ctx, wmco, metav1.UpdateOptions{})
	require.NoError(t, err)
	wmco.Status = appsv1.DeploymentStatus{ObservedGeneration: wmco.Generation}
	_, err = cluster.Client.AppsV1().Deployments(wmcoNamespace).UpdateStatus(ctx, wmco, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: r.KeySecret})
	require.NoError(t, err)
	awaitUserData(t, cluster, key)
}

// TestUserDataSecretForbidden: on an OpenShift cluster with
// openshift-cluster-api where the admin has not applied its optional Role
// (deploy/overlays/openshift/cluster-api), the pass, as the controller's
// ServiceAccount, still writes openshift-machine-api's Secret though the
// forbidden namespace comes first, returns no error, records a Warning on
// the key Secret naming what to apply, and comes back soon; once the Role
// is bound, the next pass writes both.
func TestUserDataSecretForbidden(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	for _, n := range []string{ns, userdata.MachineAPINamespace} {
		require.NoError(t, cluster.EnsureNamespace(ctx, n))
	}
	asController := asControllerSA(t, cluster)
	// Made after the binding: no Role of the controller's there.
	require.NoError(t, cluster.EnsureNamespace(ctx, userdata.ClusterAPINamespace))
	key := privateKeyPEM(t)
	_, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: key},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c, err := client.New(asController, client.Options{Scheme: scheme})
	require.NoError(t, err)
	events := record.NewFakeRecorder(10)
	r := &controller.UserDataReconciler{Client: c, Reader: c, Events: events, Resync: time.Hour,
		Namespaces: []string{userdata.ClusterAPINamespace, userdata.MachineAPINamespace},
		KeySecret:  types.NamespacedName{Namespace: ns, Name: kubeinv.KeySecret}}
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: r.KeySecret})
	require.NoError(t, err, "Forbidden in one namespace is no error")
	assert.Positive(t, res.RequeueAfter, "tried again")
	assert.Less(t, res.RequeueAfter, time.Hour, "sooner than the resync")

	_, err = cluster.Client.CoreV1().Secrets(userdata.MachineAPINamespace).Get(ctx, userdata.SecretName, metav1.GetOptions{})
	require.NoError(t, err, "the Machine API's Secret is written")
	_, err = cluster.Client.CoreV1().Secrets(userdata.ClusterAPINamespace).Get(ctx, userdata.SecretName, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no Secret where forbidden: %v", err)
	require.Len(t, events.Events, 1)
	ev := <-events.Events
	assert.Contains(t, ev, "Warning "+controller.ReasonUserDataForbidden)
	assert.Contains(t, ev, userdata.ClusterAPINamespace)
	assert.Contains(t, ev, "deploy/overlays/openshift/cluster-api", "names what to apply")

	// The admin applies the optional Role (bound, as the bed binds, to the
	// test's ServiceAccount).
	bindRBAC(t, cluster, controllerServiceAccount, "../deploy/rendered/openshift-cluster-api.yaml")
	res, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: r.KeySecret})
	require.NoError(t, err)
	assert.Equal(t, time.Hour, res.RequeueAfter, "back to the resync")
	assert.Empty(t, events.Events, "no Warning once granted")
	r.Namespaces = controller.UserDataNamespaces()
	awaitUserData(t, cluster, key)
}
