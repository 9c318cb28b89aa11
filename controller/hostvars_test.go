package controller

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/inventory/kubeinv"
)

// refusedHostVars are what a WindowsInstance must not set, each with a
// value that would steer the controller (issue 26, finding 1).
var refusedHostVars = map[string]string{
	"ansible_connection":           "local",
	"connection":                   "local",
	"wsu_agent_path":               "/var/run/secrets/kubernetes.io/serviceaccount/token",
	"wsu_agent_binary":             "/var/run/secrets/kubernetes.io/serviceaccount/token",
	"wsu_agent_args":               "--platform sim",
	"wsu_remote_os":                "linux",
	"ssh_host_key":                 "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
	"ssh_trust_on_first_use":       "true",
	"ssh_known_hosts_file":         "/dev/null",
	"ssh_private_key":              "-----BEGIN OPENSSH PRIVATE KEY-----",
	"ansible_ssh_private_key_file": "/var/run/secrets/kubernetes.io/serviceaccount/token",
	"ansible_ssh_common_args":      `-o ProxyCommand="sh -c 'cat /var/run/secrets/kubernetes.io/serviceaccount/token'"`,
	"ansible_host":                 "10.96.0.1",
}

// hostVarsBed is an InstanceReconciler on a fake client holding the
// instance's key Secret, with a runner that counts its runs.
type hostVarsBed struct {
	r      *InstanceReconciler
	runs   *countingRunner
	events *record.FakeRecorder
}

type countingRunner struct {
	mu sync.Mutex
	n  int
}

func (c *countingRunner) Run(context.Context, run.Request) run.Outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return run.Outcome{Failed: true, Message: "no host in this test"}
}

func (c *countingRunner) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func newHostVarsBed(t *testing.T, o Options, objs ...client.Object) *hostVarsBed {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := gossh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: kubeinv.KeySecret},
		Data: map[string][]byte{kubeinv.KeySecretKey: pem.EncodeToMemory(block)}}
	// The CRD and the namespace are there: wsu is not being uninstalled
	// (uninstall.go), so a deleted instance's removal runs.
	crdGVK := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	scheme.AddKnownTypeWithName(crdGVK, &metav1.PartialObjectMetadata{})
	crd := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: crdName}}
	crd.SetGroupVersionKind(crdGVK)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&wsuv1.WindowsInstance{}).
		WithObjects(append(objs, sec, crd, nsObj)...).Build()
	runs := &countingRunner{}
	o.Runner = runs
	if o.Namespace == "" {
		o.Namespace = "ns" // the instances', the BYOH ConfigMap's and the key Secret's
	}
	o.StateDir = t.TempDir()
	o.defaults()
	require.NoError(t, o.check())
	events := record.NewFakeRecorder(10)
	return &hostVarsBed{
		r:    &InstanceReconciler{Client: c, Events: events, Options: o, metrics: newMetrics(), rollouts: newRolloutLimit()},
		runs: runs, events: events,
	}
}

func hostVarsInstance(vars map[string]string) *wsuv1.WindowsInstance {
	return &wsuv1.WindowsInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "win", Generation: 1},
		Spec:       wsuv1.WindowsInstanceSpec{Address: "10.0.0.11", Username: "Administrator", HostVars: vars},
	}
}

// TestInventoryRefusesInstanceHostVars: the inventory of an instance whose
// spec.hostVars sets what only the controller or an admin may is refused,
// naming the variable, whatever the API server let through.
func TestInventoryRefusesInstanceHostVars(t *testing.T) {
	b := newHostVarsBed(t, Options{})
	for k, v := range refusedHostVars {
		t.Run(k, func(t *testing.T) {
			inv, _, err := b.r.inventory(context.Background(), hostVarsInstance(map[string]string{"ansible_port": "2222", k: v}))
			var refused *HostVarsRefused
			require.ErrorAs(t, err, &refused)
			assert.Nil(t, inv)
			assert.Equal(t, []string{k}, refused.Names)
			assert.Contains(t, err.Error(), "spec.hostVars may not set "+k+":")
		})
	}
}

// TestInventoryJumpHosts: proxy_jump passes only when it names one of the
// controller's allowed jump hosts.
func TestInventoryJumpHosts(t *testing.T) {
	ctx := context.Background()
	none := newHostVarsBed(t, Options{})
	_, _, err := none.r.inventory(ctx, hostVarsInstance(map[string]string{"proxy_jump": "bastion.example.com"}))
	require.EqualError(t, err, `spec.hostVars.proxy_jump "bastion.example.com" is not one of the controller's --allowed-jump-hosts (none are allowed)`)

	allowed := newHostVarsBed(t, Options{AllowedJumpHosts: []string{"jump@bastion.example.com:2222"}})
	_, _, err = allowed.r.inventory(ctx, hostVarsInstance(map[string]string{"proxy_jump": "evil.example.com"}))
	require.EqualError(t, err, `spec.hostVars.proxy_jump "evil.example.com" is not one of the controller's --allowed-jump-hosts (allowed: jump@bastion.example.com:2222)`)
	inv, _, err := allowed.r.inventory(ctx, hostVarsInstance(map[string]string{"proxy_jump": "jump@bastion.example.com:2222"}))
	require.NoError(t, err)
	assert.Equal(t, "jump@bastion.example.com:2222", inv.Hosts["10.0.0.11"].Vars["proxy_jump"].Value.AsString())
}

// TestInventoryControllerSettingsWin: an instance's allowed variables and
// an admin's (global, per address) reach the host; the controller's
// connection, key, known_hosts file and host key (pinned, or trust on
// first use before the first connection) are its own, even against
// options that slipped past Options.check.
func TestInventoryControllerSettingsWin(t *testing.T) {
	ctx := context.Background()
	b := newHostVarsBed(t, Options{
		HostVars:        map[string]string{"ansible_port": "2022", "wsu_agent_path": `C:\k\wsu\wsu.exe`},
		AddressHostVars: map[string]map[string]string{"10.0.0.11": {"reconnect_timeout": "5m", "ansible_ssh_common_args": "-o ServerAliveInterval=5"}},
	})
	// As if set past check (an embedding program changed the options).
	b.r.Options.HostVars["ssh_known_hosts_file"] = "/dev/null"
	b.r.Options.HostVars["ssh_trust_on_first_use"] = "true"
	b.r.Options.HostVars["ansible_connection"] = "local"

	wi := hostVarsInstance(map[string]string{"ansible_port": "2222", "ansible_user": "wsu-admin", "connect_timeout": "10s"})
	inv, _, err := b.r.inventory(ctx, wi)
	require.NoError(t, err)
	vars := inv.Hosts["10.0.0.11"].Vars
	str := func(k string) string {
		v, ok := vars[k]
		if !ok {
			return "(unset)"
		}
		return v.Value.AsString()
	}
	assert.Equal(t, "2222", str("ansible_port"), "the instance's port beats the admin's default")
	assert.Equal(t, "wsu-admin", str("ansible_user"))
	assert.Equal(t, "10s", str("connect_timeout"))
	assert.Equal(t, `C:\k\wsu\wsu.exe`, str("wsu_agent_path"), "the admin's agent path")
	assert.Equal(t, "5m", str("reconnect_timeout"), "the admin's per-address setting")
	assert.Equal(t, "-o ServerAliveInterval=5", str("ansible_ssh_common_args"))
	assert.Equal(t, "ssh", str("connection"))
	assert.Equal(t, "(unset)", str("ansible_connection"))
	assert.Equal(t, b.r.knownHostsFile(wi), str("ssh_known_hosts_file"))
	assert.Equal(t, "true", str("ssh_trust_on_first_use"), "no host key pinned yet")
	assert.Equal(t, "(unset)", str("ssh_host_key"))
	assert.True(t, vars[kubeinv.KeyVar].Value.IsMarked(), "the key stays sensitive")

	wi.Status.Identity.HostKey = refusedHostVars["ssh_host_key"]
	inv, _, err = b.r.inventory(ctx, wi)
	require.NoError(t, err)
	vars = inv.Hosts["10.0.0.11"].Vars
	assert.Equal(t, wi.Status.Identity.HostKey, str("ssh_host_key"), "the pinned key")
	assert.Equal(t, "false", str("ssh_trust_on_first_use"), "a pinned key is not trusted anew")
}

// TestOptionsRefuseControllerHostVars: an admin's --host-var and
// --address-host-var may not set what the controller decides.
func TestOptionsRefuseControllerHostVars(t *testing.T) {
	for _, k := range []string{"ansible_connection", "ssh_private_key", "ansible_ssh_private_key_file", "ssh_known_hosts_file", "ssh_host_key", "ssh_trust_on_first_use", "new_private_key"} {
		o := Options{StateDir: t.TempDir(), HostVars: map[string]string{k: "x", "ansible_port": "22"}}
		o.defaults()
		assert.EqualError(t, o.check(), "controller: --host-var "+k+": the controller sets it itself (the connection, the key from the instance's Secret, its known_hosts file and pinned host key)")
		o = Options{StateDir: t.TempDir(), AddressHostVars: map[string]map[string]string{"win1": {k: "x"}}}
		o.defaults()
		assert.ErrorContains(t, o.check(), "--address-host-var win1: "+k+": the controller sets it itself")
	}
	o := Options{StateDir: t.TempDir(), AllowedJumpHosts: []string{"a,b"}}
	o.defaults()
	assert.EqualError(t, o.check(), `controller: --allowed-jump-hosts: "a,b" is not one jump host ([user@]host[:port])`)
}

// TestReconcileRefusesHostVars: an instance stored with variables it may
// not set (before the CRD's rule, or without it) gets Valid=False
// HostVarRefused and a Warning event; no playbook runs; fixing the spec
// clears the condition and runs again.
func TestReconcileRefusesHostVars(t *testing.T) {
	ctx := context.Background()
	wi := hostVarsInstance(map[string]string{"ansible_connection": "local", "wsu_agent_path": "/var/run/secrets/kubernetes.io/serviceaccount/token"})
	b := newHostVarsBed(t, Options{}, wi)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(wi)}
	res, err := b.r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Zero(t, res.RequeueAfter, "nothing to retry until the spec changes")
	assert.Zero(t, b.runs.count(), "no run")

	got := &wsuv1.WindowsInstance{}
	require.NoError(t, b.r.Client.Get(ctx, req.NamespacedName, got))
	c := meta.FindStatusCondition(got.Status.Conditions, wsuv1.ConditionValid)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, ReasonHostVarRefused, c.Reason)
	assert.Contains(t, c.Message, "spec.hostVars may not set ansible_connection, wsu_agent_path:")
	assert.Equal(t, wsuv1.PhaseFailed, got.Status.Phase)
	require.Len(t, b.events.Events, 1)
	assert.Contains(t, <-b.events.Events, "Warning HostVarRefused spec.hostVars may not set ansible_connection, wsu_agent_path:")

	// A second pass says nothing new.
	_, err = b.r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, b.events.Events)
	assert.Zero(t, b.runs.count())

	// Deleting it does not run remove with those variables either.
	require.NoError(t, b.r.Client.Delete(ctx, got))
	_, err = b.r.Reconcile(ctx, req)
	require.NoError(t, err)
	assert.Zero(t, b.runs.count(), "no remove run")
	require.NoError(t, b.r.Client.Get(ctx, req.NamespacedName, got), "kept by its finalizer")
	assert.Equal(t, wsuv1.PhaseRemoving, got.Status.Phase)

	// Fixed: the condition goes and the controller runs.
	got.Spec.HostVars = map[string]string{"ansible_port": "2222"}
	got.Generation++
	require.NoError(t, b.r.Client.Update(ctx, got))
	_, err = b.r.Reconcile(ctx, req)
	require.NoError(t, err)
	require.NoError(t, b.r.Client.Get(ctx, req.NamespacedName, got))
	assert.Equal(t, 1, b.runs.count(), "the remove playbook ran")
}
