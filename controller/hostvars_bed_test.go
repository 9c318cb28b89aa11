//go:build linux

package controller_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/yaml"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/kubetest"
)

// stealing are spec.hostVars a WindowsInstance writer would use to steer
// the controller (issue 26, finding 1): run the playbook in the
// controller's pod, upload its ServiceAccount token as "the agent", trust
// any host key, or run a command through ssh.
var stealing = []struct{ name, value string }{
	{"ansible_connection", "local"},
	{"wsu_agent_path", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
	{"wsu_agent_binary", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
	{"ssh_host_key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"},
	{"ssh_trust_on_first_use", "true"},
	{"ssh_known_hosts_file", "/dev/null"},
	{"ansible_ssh_private_key_file", "/var/run/secrets/kubernetes.io/serviceaccount/token"},
	{"ansible_ssh_common_args", `-o ProxyCommand="sh -c id"`},
	{"ansible_host", "10.96.0.1"},
}

func crdFile(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../deploy/crd/wsu.dev_windowsinstances.yaml")
	require.NoError(t, err)
	return p
}

// TestHostVarsRefusedAtAdmission: the API server refuses a site admin's
// instance whose spec.hostVars set anything but the allowed connection settings
// (the CRD's CEL rule, its message listing what may be set; a
// messageExpression naming the refused keys costs too much for the API
// server's budget, keys being unbounded); the allowed ones are accepted.
func TestHostVarsRefusedAtAdmission(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t)))
	ctx := context.Background()
	require.NoError(t, cluster.EnsureNamespace(ctx, ns))
	c := siteAdmin(t, cluster) // who may write instances, not the admin

	for i, s := range stealing {
		wi := hvInstance(fmt.Sprintf("steal-%d", i), map[string]string{"ansible_port": "2222", s.name: s.value})
		err := c.Create(ctx, wi)
		require.Error(t, err, s.name)
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", s.name, err)
		assert.Contains(t, err.Error(), "spec.hostVars: Invalid value: hostVars may set only ansible_port, ", s.name)
		assert.Contains(t, err.Error(), "; the controller decides the connection, key, host key, known_hosts file and agent", s.name)
	}

	ok := hvInstance("allowed", map[string]string{"ansible_port": "2222", "ansible_user": "admin", "connect_timeout": "10s",
		"connect_retry_window": "0s", "reconnect_timeout": "5m", "ansible_timeout": "30", "proxy_jump": "bastion.example.com"})
	require.NoError(t, c.Create(ctx, ok), "the connection settings an instance may set")
}

// TestHostVarsRefusedByController, against the real API server: instances
// stored before the CEL rule with variables they may not set, and one with
// a proxy_jump the controller does not allow (which no CRD rule can know),
// get Valid=False HostVarRefused and a Warning event, and nothing runs for
// them; an instance with allowed variables runs, with its port and user
// and the controller's own known_hosts file, trust on first use and
// connection.
func TestHostVarsRefusedByController(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	// The CRD as an older wsu installed it: no rule on hostVars.
	require.NoError(t, cluster.InstallCRDs(crdWithoutHostVarsRule(t)))
	require.NoError(t, cluster.EnsureNamespace(ctx, ns))
	c := hostVarsClient(t, cluster)
	_, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: privateKeyPEM(t)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	steal := map[string]string{}
	var names []string
	for _, s := range stealing {
		steal[s.name] = s.value
		names = append(names, s.name)
	}
	sort.Strings(names)
	require.NoError(t, c.Create(ctx, hvInstance("old-steal", steal)), "accepted without the rule")
	// Then the current CRD: the stored object stays as it was.
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t)))
	require.NoError(t, c.Create(ctx, hvInstance("jump", map[string]string{"proxy_jump": "evil.example.com"})), "the rule allows proxy_jump")
	allowed := hvInstance("allowed", map[string]string{"ansible_port": "2222", "ansible_user": "wsu-admin", "connect_retry_window": "0s"})
	allowed.Spec.Address = "127.0.0.1"
	require.NoError(t, c.Create(ctx, allowed))

	runs := &requestRecorder{}
	state := t.TempDir()
	startHostVarsController(t, cluster, controller.Options{
		Namespace: ns, StateDir: state, Runner: runs, AllowedJumpHosts: []string{"bastion.example.com"},
		HostVars: map[string]string{"wsu_agent_path": `C:\k\wsu\wsu.exe`},
	})

	want := map[string]string{
		"old-steal": "spec.hostVars may not set " + strings.Join(names, ", ") + ": an instance may set only ",
		"jump":      `spec.hostVars.proxy_jump "evil.example.com" is not one of the controller's --allowed-jump-hosts (allowed: bastion.example.com)`,
	}
	for name, msg := range want {
		eventually(t, time.Minute, name+" refused", func() (bool, string) {
			wi := &wsuv1.WindowsInstance{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, wi); err != nil {
				return false, err.Error()
			}
			v := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionValid)
			return v != nil && v.Status == metav1.ConditionFalse && v.Reason == controller.ReasonHostVarRefused &&
				strings.HasPrefix(v.Message, msg) && wi.Status.Phase == wsuv1.PhaseFailed, describe(wi)
		})
		eventually(t, 30*time.Second, "a HostVarRefused event on "+name, func() (bool, string) {
			list, err := cluster.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			for _, e := range list.Items {
				if e.InvolvedObject.Name == name && e.Reason == controller.ReasonHostVarRefused && e.Type == corev1.EventTypeWarning &&
					strings.HasPrefix(e.Message, msg) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d events", len(list.Items))
		})
	}

	// The allowed instance ran (its host is not there: the recorder says
	// unreachable), with the controller's settings.
	var req run.Request
	eventually(t, time.Minute, "a run of the allowed instance", func() (bool, string) {
		all := runs.all()
		for _, r := range all {
			if r.Instance == ns+"/allowed" {
				req = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d runs", len(all))
	})
	for _, r := range runs.all() {
		assert.Equal(t, ns+"/allowed", r.Instance, "only the allowed instance runs")
	}
	h := req.Inventory.Hosts["127.0.0.1"]
	require.NotNil(t, h)
	str := func(k string) string {
		v, ok := h.Vars[k]
		if !ok {
			return "(unset)"
		}
		return v.Value.AsString()
	}
	assert.Equal(t, "2222", str("ansible_port"))
	assert.Equal(t, "wsu-admin", str("ansible_user"))
	assert.Equal(t, `C:\k\wsu\wsu.exe`, str("wsu_agent_path"), "the admin's")
	assert.Equal(t, "ssh", str("connection"))
	assert.Equal(t, filepath.Join(state, ns, "allowed", "known_hosts"), str("ssh_known_hosts_file"))
	assert.Equal(t, "true", str("ssh_trust_on_first_use"), "no key pinned yet")
	assert.Equal(t, "(unset)", str("ssh_host_key"))
}

// requestRecorder records each run's request and reports the host
// unreachable (there is none).
type requestRecorder struct {
	mu   sync.Mutex
	reqs []run.Request
}

func (r *requestRecorder) Run(_ context.Context, req run.Request) run.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return run.Outcome{Failed: true, Unreachable: true, Message: "no host in this test"}
}

func (r *requestRecorder) all() []run.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]run.Request(nil), r.reqs...)
}

func hvInstance(name string, vars map[string]string) *wsuv1.WindowsInstance {
	return &wsuv1.WindowsInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       wsuv1.WindowsInstanceSpec{Address: name + ".example.com", Username: "Administrator", HostVars: vars},
	}
}

func hostVarsClient(t *testing.T, cluster *kubetest.Cluster) client.Client {
	t.Helper()
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return c
}

// crdWithoutHostVarsRule is the shipped CRD without its hostVars rule.
func crdWithoutHostVarsRule(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(crdFile(t))
	require.NoError(t, err)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(data, crd))
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	hv := spec.Properties["hostVars"]
	require.NotEmpty(t, hv.XValidations, "the shipped CRD has the rule")
	hv.XValidations = nil
	spec.Properties["hostVars"] = hv
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	return crd
}

func privateKeyPEM(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := gossh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	return pem.EncodeToMemory(block)
}

// startHostVarsController runs a controller (a manager, as `wsu
// controller` configures it) against cluster until the test ends.
func startHostVarsController(t *testing.T, cluster *kubetest.Cluster, opts controller.Options) {
	t.Helper()
	opts.Backoff, opts.DriftInterval = time.Hour, time.Hour
	if opts.NodeReadyCheck == 0 {
		opts.NodeReadyCheck = time.Second
	}
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
