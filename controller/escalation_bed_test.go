//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/kubetest"
)

// siteAdmin is the user issue 26's escalation tests act as: one who may
// edit WindowsInstances and ConfigMaps in the controller's namespace and
// nothing else, the rights an admin delegates to the owners of Windows
// hosts.
func siteAdmin(t *testing.T, cluster *kubetest.Cluster) client.Client {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-host-owners", Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{wsuv1.GroupVersion.Group}, Resources: []string{"windowsinstances"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		},
	}
	_, err := cluster.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cluster.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-host-owners", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "site-admin"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	kc, err := cluster.User("site-admin")
	require.NoError(t, err)
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	require.NoError(t, err)
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)
	// The RBAC authorizer learns of the binding from its informer, a
	// moment after the create: the tests' first writes must not be
	// judged without it.
	require.NoError(t, cluster.AwaitRBAC(ctx))
	// The user holds what the tests assume, and no more.
	require.Error(t, c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)), "a site admin reads no Secrets")
	return c
}

// escalationBed is a test bed with the CRD, the namespace and the key
// Secret, and the site admin's client.
func escalationBed(t *testing.T) (*kubetest.Cluster, client.Client) {
	t.Helper()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t)))
	require.NoError(t, cluster.EnsureNamespace(ctx, ns))
	_, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: privateKeyPEM(t)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return cluster, siteAdmin(t, cluster)
}

// sitePlaybook creates, as c, a playbook ConfigMap and an instance that
// runs it.
func sitePlaybook(t *testing.T, c client.Client, name, src string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       map[string]string{"playbook.hcl": src},
	}))
	wi := hvInstance(name, nil)
	wi.Spec.Address = "127.0.0.1"
	wi.Spec.Playbook.ConfigMap = name
	require.NoError(t, c.Create(ctx, wi))
}

func condition(t *testing.T, c client.Client, name, typ string) (*metav1.Condition, *wsuv1.WindowsInstance) {
	t.Helper()
	wi := &wsuv1.WindowsInstance{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, wi); err != nil {
		return nil, nil
	}
	return meta.FindStatusCondition(wi.Status.Conditions, typ), wi
}

func warningEvent(t *testing.T, cluster *kubetest.Cluster, name, reason, contains string) func() (bool, string) {
	return func() (bool, string) {
		list, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, contains) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	}
}

// TestPlaybookConfigMapRefusedByDefault: a site admin's instance naming
// a playbook ConfigMap gets Valid=False PlaybookConfigMapRefused and a
// Warning event, and never runs, unless the controller was started with
// --allow-playbook-configmaps; a stock instance beside it runs.
func TestPlaybookConfigMapRefusedByDefault(t *testing.T) {
	t.Parallel()
	cluster, c := escalationBed(t)
	sitePlaybook(t, c, "site", "# a site playbook\n")
	require.NoError(t, c.Create(context.Background(), hvInstance("stock", nil)))
	runs := &requestRecorder{}
	startHostVarsController(t, cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: runs})

	msg := `spec.playbook.configMap "site": this controller runs no playbook from a ConfigMap`
	eventually(t, time.Minute, "site refused", func() (bool, string) {
		v, wi := condition(t, c, "site", wsuv1.ConditionValid)
		return v != nil && v.Status == metav1.ConditionFalse && v.Reason == controller.ReasonPlaybookRefused &&
			strings.HasPrefix(v.Message, msg) && strings.Contains(v.Message, "--allow-playbook-configmaps"), describe(wi)
	})
	eventually(t, 30*time.Second, "a PlaybookConfigMapRefused event", warningEvent(t, cluster, "site", controller.ReasonPlaybookRefused, msg))
	eventually(t, time.Minute, "a run of the stock instance", func() (bool, string) {
		for _, r := range runs.all() {
			if r.Instance == ns+"/stock" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d runs", len(runs.all()))
	})
	for _, r := range runs.all() {
		assert.Equal(t, ns+"/stock", r.Instance, "the site playbook never runs")
	}
}

// TestPlaybookConfigMapConfined: with --allow-playbook-configmaps, a
// site playbook that reads the pod's ServiceAccount token (a stand-in
// file outside its directory, at a path as absolute as the token's) is
// refused before its host is touched, the token quoted nowhere; a site
// playbook reading its own template runs.
func TestPlaybookConfigMapConfined(t *testing.T) {
	t.Parallel()
	cluster, c := escalationBed(t)
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte(podToken), 0o600))
	sitePlaybook(t, c, "steal", fmt.Sprintf(`play "steal" {
  hosts = "windows"

  task "token" {
    print {
      msg = file(%q)
    }
  }
}
`, token))
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: ns},
		Data: map[string]string{"motd.txt": "welcome", "playbook.hcl": `play "own" {
  hosts = "windows"

  task "motd" {
    print {
      msg = file("motd.txt")
    }
  }
}
`},
	}))
	own := hvInstance("own", nil)
	own.Spec.Address = "127.0.0.1"
	own.Spec.Playbook.ConfigMap = "own"
	require.NoError(t, c.Create(ctx, own))
	startHostVarsController(t, cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), AllowPlaybookConfigMaps: true})

	eventually(t, time.Minute, "the own-files playbook planned", func() (bool, string) {
		_, wi := condition(t, c, "own", wsuv1.ConditionDegraded)
		return wi != nil && wi.Status.LastPlan != nil, describe(wi)
	})
	d, _ := condition(t, c, "own", wsuv1.ConditionDegraded)
	assert.True(t, d == nil || d.Status != metav1.ConditionTrue, "reading its own file: %v", d)

	eventually(t, time.Minute, "the steal refused", func() (bool, string) {
		v, wi := condition(t, c, "steal", wsuv1.ConditionDegraded)
		return v != nil && v.Status == metav1.ConditionTrue && strings.Contains(v.Message, "a playbook from a ConfigMap reads only its own files and the payload"), describe(wi)
	})
	_, wi := condition(t, c, "steal", wsuv1.ConditionDegraded)
	assert.NotContains(t, describe(wi), podToken)
	assert.Empty(t, wi.Status.Identity.Hostname, "the host was never reached")
	list, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range list.Items {
		assert.NotContains(t, e.Message, podToken)
	}
}

const podToken = "eyJhbGciOiJSUzI1NiJ9.the-pod-token"
