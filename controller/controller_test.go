//go:build linux

package controller_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/wsu-project/wsu/agent/platform/sim"
	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/transport/agentbin"
)

const ns = "wsu-system"

// wsuBin is built once for every test of the package (the harness would
// build it per bed otherwise); the agent is built beside it.
var wsuBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wsu-controller-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wsuBin = filepath.Join(dir, "wsu")
	if err := harness.BuildWSU(context.Background(), wsuBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// bed is a real kube-apiserver with the CRD installed, a real sshd with
// simulated Windows hosts behind it (stand-in kubelets in their payload),
// and controllers running in this process against them.
type bed struct {
	env    *harness.Env
	client client.WithWatch
}

// startBed starts a bed and one controller.
func startBed(t *testing.T, hosts int, opts controller.Options) *bed {
	t.Helper()
	b := newBed(t, hosts)
	b.startController(t, opts, controller.ManagerOptions{}, nil)
	return b
}

func newBed(t *testing.T, hosts int) *bed {
	t.Helper()
	return newBedWith(t, harness.Options{Hosts: hosts})
}

// newBedWith is newBed with the harness options given (a network).
func newBedWith(t *testing.T, hopts harness.Options) *bed {
	t.Helper()
	ctx := context.Background()
	hopts.WSU, hopts.Logf = wsuBin, t.Logf
	env, err := harness.Start(ctx, hopts)
	require.NoError(t, err)
	t.Cleanup(func() { env.Close() })
	crd, err := filepath.Abs("../deploy/crd/wsu.dev_windowsinstances.yaml")
	require.NoError(t, err)
	require.NoError(t, env.Cluster.InstallCRDFiles(crd))
	require.NoError(t, env.Cluster.EnsureNamespace(ctx, ns))
	key, err := os.ReadFile(env.KeyFile)
	require.NoError(t, err)
	_, err = env.Cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: key},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c, err := client.NewWithWatch(env.Cluster.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return &bed{env: env, client: c}
}

// running is one controller (a manager) started by a test.
type running struct {
	mgr    ctrl.Manager
	runs   *recordingRunner
	cancel context.CancelFunc
	done   chan error
}

// startController starts a controller as `wsu controller` configures its
// manager (controller.ManagerConfig), with the test bed's settings; tweak
// may change the manager's options (leader election timings).
func (b *bed) startController(t *testing.T, opts controller.Options, m controller.ManagerOptions, tweak func(*ctrl.Options)) *running {
	t.Helper()
	opts.Namespace = ns
	if opts.AddressHostVars == nil {
		opts.AddressHostVars = simHostVars(t, b.env)
	}
	opts.VarFiles = []string{b.env.VarFile}
	opts.StateDir = t.TempDir()
	runs := &recordingRunner{inner: run.InProcess{Agents: agentbin.New(agentbin.Options{Dir: filepath.Dir(b.env.Agent)})}}
	opts.Runner = runs
	opts.NodeReadyCheck = time.Second
	opts.Backoff = 2 * time.Second
	if opts.DriftInterval == 0 {
		opts.DriftInterval = time.Hour
	}
	if opts.PayloadCheck == 0 {
		opts.PayloadCheck = time.Second
	}
	m.MetricsAddr, m.ProbeAddr = "0", "0"
	mo, err := controller.ManagerConfig(opts, m)
	require.NoError(t, err)
	// Each test starts its own managers in this one process.
	skip := true
	mo.Controller = config.Controller{SkipNameValidation: &skip}
	if tweak != nil {
		tweak(&mo)
	}
	mgr, err := ctrl.NewManager(b.env.Cluster.Config, mo)
	require.NoError(t, err)
	require.NoError(t, controller.Setup(mgr, opts))
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{mgr: mgr, runs: runs, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the controller's context, as SIGTERM does, and waits for it
// to end; a second stop is a no-op.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		assert.NoError(t, err)
	case <-time.After(2 * time.Minute):
		t.Error("the controller did not stop within 2 minutes of its context ending")
	}
}

// recordingRunner runs playbooks in process and records each run: how
// many started, and how each ended.
type recordingRunner struct {
	inner run.Runner

	mu      sync.Mutex
	started int
	ended   []runRecord
}

type runRecord struct {
	instance string // NAMESPACE/NAME
	playbook string
	mode     engine.Mode
	out      run.Outcome
	// cancelled: the controller's context ended during the run.
	cancelled bool
}

func (r *recordingRunner) Run(ctx context.Context, req run.Request) run.Outcome {
	r.mu.Lock()
	r.started++
	r.mu.Unlock()
	out := r.inner.Run(ctx, req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = append(r.ended, runRecord{instance: req.Instance, playbook: req.Playbook, mode: req.Mode, out: out, cancelled: ctx.Err() != nil})
	return out
}

// record is what the runner saw so far.
func (r *recordingRunner) record() (started int, ended []runRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started, slices.Clone(r.ended)
}

// simHostVars are how the controller reaches each simulated host (through
// the one sshd) and runs its simulation (the agent's path and arguments),
// by address: the admin's trusted per-address variables
// (Options.AddressHostVars), since an instance may set none of them.
func simHostVars(t *testing.T, env *harness.Env) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, h := range env.Hosts {
		vars, err := env.InstanceHostVars(h)
		require.NoError(t, err)
		out[h.Name] = vars
	}
	return out
}

// instance is h's WindowsInstance: its address and user; the controller
// knows how to reach it (simHostVars).
func (b *bed) instance(_ *testing.T, h *harness.Host, approval wsuv1.Approval) *wsuv1.WindowsInstance {
	return &wsuv1.WindowsInstance{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: ns},
		Spec: wsuv1.WindowsInstanceSpec{
			Address: h.Name, Username: b.env.SSHUser, Approval: approval,
			HostVars: map[string]string{},
		},
	}
}

// eventually polls cond until it holds, failing with what was last seen.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		ok, seen := cond()
		if ok {
			return
		}
		last = seen
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s; last seen: %s", what, within, last)
}

func (b *bed) get(t *testing.T, name string) *wsuv1.WindowsInstance {
	t.Helper()
	wi := &wsuv1.WindowsInstance{}
	err := b.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, wi)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return wi
}

// waitEvent waits for an event of reason on the object name: the recorder
// writes events asynchronously.
func (b *bed) waitEvent(t *testing.T, name, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, "a "+reason+" event on "+name, func() (bool, string) {
		return len(b.events(t, name, reason)) > 0, "none"
	})
}

func describe(wi *wsuv1.WindowsInstance) string {
	if wi == nil {
		return "(gone)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s failures=%d", wi.Status.Phase, wi.Status.Failures)
	for _, c := range wi.Status.Conditions {
		fmt.Fprintf(&b, " %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func (b *bed) events(t *testing.T, name, reason string) []corev1.Event {
	t.Helper()
	list, err := b.env.Cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && (reason == "" || e.Reason == reason) {
			out = append(out, e)
		}
	}
	return out
}

// TestManualApprovalJoinThenRemove: a Manual instance stops at its plan;
// approving another hash does nothing; approving the plan's hash joins it
// (a Ready Node, conditions true, events); meanwhile an unreachable
// instance backs off without holding it up; deleting the instance runs the
// remove playbook, deletes the Node and lets the object go.
func TestManualApprovalJoinThenRemove(t *testing.T) {
	t.Parallel()
	// A short drift interval: the joined host is planned again every few
	// seconds, so tampering with it shows up within the test.
	b := startBed(t, 1, controller.Options{DriftInterval: 5 * time.Second})
	ctx := context.Background()
	h := b.env.Hosts[0]
	before, err := b.env.Snapshot(h)
	require.NoError(t, err)

	gone := &wsuv1.WindowsInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "win-gone", Namespace: ns},
		Spec: wsuv1.WindowsInstanceSpec{Address: "127.0.0.1", Username: b.env.SSHUser,
			HostVars: map[string]string{"ansible_port": fmt.Sprint(closedPort(t)), "connect_retry_window": "0s"}},
	}
	require.NoError(t, b.client.Create(ctx, gone))
	require.NoError(t, b.client.Create(ctx, b.instance(t, h, wsuv1.ApprovalManual)))

	var hash string
	eventually(t, 3*time.Minute, "the Manual instance awaits approval", func() (bool, string) {
		wi := b.get(t, h.Name)
		if wi != nil && wi.Status.Phase == wsuv1.PhaseAwaitingApproval && wi.Status.LastPlan != nil {
			hash = wi.Status.LastPlan.Hash
			return true, ""
		}
		return false, describe(wi)
	})
	wi := b.get(t, h.Name)
	assert.NotZero(t, wi.Status.LastPlan.Add+wi.Status.LastPlan.Change+wi.Status.LastPlan.Run, "a fresh host has changes planned")
	assert.Equal(t, strings.ToUpper(h.Name), wi.Status.Identity.Hostname, "facts recorded")
	assert.NotEmpty(t, wi.Status.Identity.HostKeySHA256, "the host key is pinned")
	b.waitEvent(t, h.Name, controller.ReasonAwaitingApproval)
	now, err := b.env.Snapshot(h)
	require.NoError(t, err)
	assert.Equal(t, before, now, "nothing is applied before approval")

	t.Run("unreachable backs off alone", func(t *testing.T) {
		eventually(t, time.Minute, "the unreachable instance backs off", func() (bool, string) {
			g := b.get(t, "win-gone")
			return g != nil && g.Status.Failures >= 1 && meta.IsStatusConditionFalse(g.Status.Conditions, wsuv1.ConditionReachable) && g.Status.NextRetry != nil, describe(g)
		})
		b.waitEvent(t, "win-gone", controller.ReasonUnreachable)
	})

	t.Run("a stale approval does nothing", func(t *testing.T) {
		annotate(t, b, h.Name, wsuv1.ApprovedPlanAnnotation, "0123456789abcdef0123456789abcdef")
		time.Sleep(3 * time.Second)
		wi := b.get(t, h.Name)
		assert.Equal(t, wsuv1.PhaseAwaitingApproval, wi.Status.Phase, describe(wi))
		assert.Equal(t, hash, wi.Status.LastPlan.Hash, "the same state plans to the same hash")
		now, err := b.env.Snapshot(h)
		require.NoError(t, err)
		assert.Equal(t, before, now, "nothing applied for another plan's hash")
	})

	t.Run("approving the plan joins", func(t *testing.T) {
		key := client.ObjectKey{Namespace: ns, Name: h.Name}
		err := approval.Approve(ctx, b.client, key, "0123456789abcdef0123456789abcdef")
		require.Error(t, err, "wsu approve refuses a hash that is not the last plan")
		assert.Contains(t, err.Error(), hash, "and names the last plan")
		require.NoError(t, approval.Approve(ctx, b.client, key, hash))
		eventually(t, 5*time.Minute, "joined with a Ready Node", func() (bool, string) {
			wi := b.get(t, h.Name)
			return wi != nil && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined) &&
				meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady), describe(wi)
		})
		wi := b.get(t, h.Name)
		assert.Equal(t, h.NodeName, wi.Status.NodeName)
		assert.Equal(t, wsuv1.PhaseJoined, wi.Status.Phase)
		require.NotNil(t, wi.Status.LastApply)
		assert.Equal(t, "Succeeded", wi.Status.LastApply.Result)
		assert.Equal(t, wi.Generation, wi.Status.ObservedGeneration)
		b.waitEvent(t, h.Name, controller.ReasonSetup)
		node, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotNil(t, node)
	})
	if t.Failed() {
		return
	}

	t.Run("renewal CSRs", func(t *testing.T) {
		// Who may create CSRs here: every authenticated user, as the
		// system:node-bootstrapper role allows kubelets.
		b.allowCSRs(t)
		renewal := b.nodeCSR(t, "renew-client", h.NodeName, certificatesv1.KubeAPIServerClientKubeletSignerName, nil, nil)
		extraSAN := b.nodeCSR(t, "renew-serving-extra-san", h.NodeName, certificatesv1.KubeletServingSignerName,
			[]string{h.NodeName}, []string{h.IPv4, "10.9.9.9"})
		unmanaged := b.nodeCSR(t, "renew-unmanaged", "not-managed", certificatesv1.KubeAPIServerClientKubeletSignerName, nil, nil)
		// The API server's in-cluster name: refused outright, whatever the
		// instance or the node says.
		clusterName := b.nodeCSR(t, "renew-serving-kubernetes", h.NodeName, certificatesv1.KubeletServingSignerName,
			[]string{h.NodeName, "kubernetes.default.svc"}, []string{h.IPv4})
		servingOK := b.nodeCSR(t, "renew-serving-ok", h.NodeName, certificatesv1.KubeletServingSignerName,
			[]string{h.NodeName}, []string{h.IPv4})
		eventually(t, time.Minute, "the managed node's renewals are approved", func() (bool, string) {
			return b.csrApproved(t, renewal) && b.csrApproved(t, servingOK), "pending"
		})
		b.waitEvent(t, h.Name, controller.ReasonCSRRefused)
		time.Sleep(2 * time.Second)
		assert.False(t, b.csrApproved(t, extraSAN), "a serving CSR with a SAN the host does not have")
		assert.False(t, b.csrApproved(t, unmanaged), "a CSR for a node no instance manages")
		assert.False(t, b.csrApproved(t, clusterName), "a serving CSR naming kubernetes.default.svc")
		var msgs []string
		for _, e := range b.events(t, h.Name, controller.ReasonCSRRefused) {
			msgs = append(msgs, e.Message)
		}
		assert.Contains(t, strings.Join(msgs, "\n"), `renew-serving-kubernetes (serving) for node `+h.NodeName+` not approved: rule serving-cluster-names: DNS name "kubernetes.default.svc" is the API server's in-cluster name`,
			"the event says why")
	})

	t.Run("drift is reported", func(t *testing.T) {
		require.NoError(t, b.env.WithSim(h, func(s *sim.Host) error {
			return s.WriteFile(ctx, `C:\k\kubelet.conf`, strings.NewReader("tampered\n"), 0o644)
		}))
		// Drifted may be True already, from a drift plan that found the
		// renewal CSRs above pending (its approve csrs task would act):
		// wait for the plan after the tampering, whose condition names the
		// changed task.
		eventually(t, time.Minute, "Drifted, naming the kubelet config, within a drift interval", func() (bool, string) {
			wi := b.get(t, h.Name)
			if wi == nil {
				return false, "(gone)"
			}
			c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionDrifted)
			return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "kubelet config"), describe(wi)
		})
		b.waitEvent(t, h.Name, controller.ReasonDrifted)
		// driftPolicy Report: the host is left as it is.
		require.NoError(t, b.env.WithSim(h, func(s *sim.Host) error {
			data, err := s.ReadFile(ctx, `C:\k\kubelet.conf`, 1<<20)
			assert.Equal(t, "tampered\n", string(data), "Report does not correct")
			return err
		}))
	})

	t.Run("delete removes", func(t *testing.T) {
		require.NoError(t, b.client.Delete(ctx, b.get(t, h.Name)))
		eventually(t, 5*time.Minute, "the instance is gone", func() (bool, string) {
			wi := b.get(t, h.Name)
			return wi == nil, describe(wi)
		})
		_, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "Node deleted: %v", err)
		after, err := b.env.Snapshot(h)
		require.NoError(t, err)
		assert.Equal(t, before, after, "the host is back to its pre-join state")
		b.waitEvent(t, h.Name, controller.ReasonTeardown)
	})

	t.Run("forget an unreachable host", func(t *testing.T) {
		require.NoError(t, b.client.Delete(ctx, b.get(t, "win-gone")))
		time.Sleep(2 * time.Second)
		require.NotNil(t, b.get(t, "win-gone"), "an unreachable host keeps its finalizer")
		annotate(t, b, "win-gone", wsuv1.ForgetAnnotation, "true")
		eventually(t, time.Minute, "a forgotten instance goes", func() (bool, string) {
			g := b.get(t, "win-gone")
			return g == nil, describe(g)
		})
	})
}

// TestConfigMapEntries: each valid entry of the BYOH ConfigMap becomes a
// WindowsInstance the controller owns; a bad entry gets a Warning event
// naming it and the others go on; an entry taken out deletes its instance.
// The entries' hosts cannot be reached (no host listens on them), which
// also shows each backing off on its own.
func TestConfigMapEntries(t *testing.T) {
	t.Parallel()
	port := closedPort(t)
	b := startBed(t, 1, controller.Options{ConfigMap: "windows-instances",
		HostVars: map[string]string{"ansible_port": fmt.Sprint(port), "connect_retry_window": "0s"}})
	ctx := context.Background()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "windows-instances", Namespace: ns},
		Data: map[string]string{
			"127.0.20.1":  "username=Administrator",
			"127.0.20.2":  "username=Administrator",
			"127.0.20.3":  "username=Administrator",
			"bad_name_":   "username=Administrator",
			"127.0.20.4":  "user=Administrator",
			"win-dns.LAN": "username=admin",
		},
	}
	require.NoError(t, b.client.Create(ctx, cm))

	want := []string{"127.0.20.1", "127.0.20.2", "127.0.20.3", "win-dns.lan"}
	eventually(t, time.Minute, "one instance per valid entry", func() (bool, string) {
		list := &wsuv1.WindowsInstanceList{}
		require.NoError(t, b.client.List(ctx, list, client.InNamespace(ns)))
		var names []string
		for _, wi := range list.Items {
			names = append(names, wi.Name)
		}
		return len(names) == len(want), strings.Join(names, ",")
	})
	for _, name := range want {
		wi := b.get(t, name)
		require.NotNil(t, wi, name)
		assert.Equal(t, wsuv1.SourceConfigMap, wi.Labels[wsuv1.SourceLabel])
		require.Len(t, wi.OwnerReferences, 1)
		assert.Equal(t, "ConfigMap", wi.OwnerReferences[0].Kind)
	}
	assert.Equal(t, "win-dns.LAN", b.get(t, "win-dns.lan").Spec.Address)
	assert.Equal(t, "admin", b.get(t, "win-dns.lan").Spec.Username)

	eventually(t, time.Minute, "a Warning event for each bad entry", func() (bool, string) {
		evs := b.events(t, "windows-instances", controller.ReasonInvalidEntry)
		var notes []string
		for _, e := range evs {
			notes = append(notes, e.Message)
		}
		all := strings.Join(notes, " | ")
		return strings.Contains(all, "bad_name_") && strings.Contains(all, "127.0.20.4"), all
	})

	eventually(t, time.Minute, "each unreachable instance backs off", func() (bool, string) {
		for _, name := range want {
			wi := b.get(t, name)
			if wi == nil || wi.Status.Failures < 1 || !meta.IsStatusConditionFalse(wi.Status.Conditions, wsuv1.ConditionReachable) {
				return false, name + ": " + describe(wi)
			}
		}
		return true, ""
	})

	// An entry taken out: its instance is deleted; its host cannot be
	// reached to deconfigure, so it waits on its finalizer until forgotten.
	cur := &corev1.ConfigMap{}
	require.NoError(t, b.client.Get(ctx, client.ObjectKeyFromObject(cm), cur))
	delete(cur.Data, "127.0.20.3")
	require.NoError(t, b.client.Update(ctx, cur))
	eventually(t, time.Minute, "the removed entry's instance is being deleted", func() (bool, string) {
		wi := b.get(t, "127.0.20.3")
		return wi != nil && !wi.DeletionTimestamp.IsZero(), describe(wi)
	})
	annotate(t, b, "127.0.20.3", wsuv1.ForgetAnnotation, "true")
	eventually(t, time.Minute, "the removed entry's instance is gone", func() (bool, string) {
		wi := b.get(t, "127.0.20.3")
		return wi == nil, describe(wi)
	})
	assert.NotNil(t, b.get(t, "127.0.20.1"), "the other entries stay")
}

func annotate(t *testing.T, b *bed, name, key, value string) {
	t.Helper()
	wi := b.get(t, name)
	require.NotNil(t, wi, name)
	orig := wi.DeepCopy()
	if wi.Annotations == nil {
		wi.Annotations = map[string]string{}
	}
	wi.Annotations[key] = value
	require.NoError(t, b.client.Patch(context.Background(), wi, client.MergeFrom(orig)))
}

// nodeCSR submits a kubelet CSR as the node itself.
func (b *bed) nodeCSR(t *testing.T, name, node, signer string, dns, ips []string) string {
	t.Helper()
	return b.csrAs(t, name, "system:node:"+node, []string{"system:nodes"}, node, signer, dns, ips)
}

// csrAs submits a kubelet CSR for node as user (impersonated by the admin,
// so the API server records that requester).
func (b *bed) csrAs(t *testing.T, name, user string, groups []string, node, signer string, dns, ips []string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, DNSNames: dns}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	require.NoError(t, err)
	usages := []certificatesv1.KeyUsage{"digital signature", "client auth"}
	if signer == certificatesv1.KubeletServingSignerName {
		usages = []certificatesv1.KeyUsage{"digital signature", "server auth"}
	}
	cfg := rest.CopyConfig(b.env.Cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	kc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = kc.CertificatesV1().CertificateSigningRequests().Create(context.Background(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: signer, Usages: usages,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return name
}

// csrCreators lets every authenticated user create CSRs, as the
// system:node-bootstrapper role allows kubelets.
func csrCreators() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-csr-creators"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:authenticated"}},
	}
}

func (b *bed) csrApproved(t *testing.T, name string) bool {
	t.Helper()
	csr, err := b.env.Cluster.Client.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			return true
		}
	}
	return false
}

// closedPort is a port on 127.0.0.1 nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}
