//go:build linux

package controller_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/userdata"
)

// keyRunner finds every host in line with its playbook and reports its
// host name win-NAME (so the instance records Node win-NAME); the hosts
// named in refuse refuse every login, as a host that lost the key does.
type keyRunner struct {
	mu     sync.Mutex
	refuse map[string]bool
	reqs   []run.Request
}

func (r *keyRunner) Run(_ context.Context, req run.Request) run.Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	_, name, _ := strings.Cut(req.Instance, "/")
	if r.refuse[name] {
		return run.Outcome{Failed: true, Unreachable: true, LoginRefused: true,
			Message: "ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]"}
	}
	return run.Outcome{Hash: "0123456789abcdef0123456789abcdef", Facts: &host.Facts{Hostname: "WIN-" + strings.ToUpper(name)}}
}

// runs are the runs of playbook (any mode) for instance name.
func (r *keyRunner) runs(name, playbook string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, req := range r.reqs {
		if req.Instance == ns+"/"+name && req.Playbook == playbook {
			n++
		}
	}
	return n
}

func (r *keyRunner) refuseLogins(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse[name] = true
}

// hold is the finalizer the test keeps on an instance and its Node, so a
// replaced Machine's removal stays under way (its Node out of service)
// until the test lets it go.
const hold = "test.wsu.dev/hold"

// TestMachinesReplacedOnKeyChange: cattle, not pets. Against a real API
// server with the Machine API's CRDs, the controller as its ServiceAccount
// (the shipped RBAC, delete on Machines in openshift-machine-api),
// maxUnavailable 1, two Windows Machines' instances and one BYOH instance
// joined, each with its Node:
//
//   - a new key is added to the key Secret (private-key.pem.new): the
//     user data switches to it; one Machine is deleted (a MachineReplaced
//     event, its Node marked out of service) while the other waits
//     (KeyRotated=False, WaitingForRollout) and stays, as long as the first
//     one's removal is under way; once that Node is gone, the second
//     Machine is deleted. No rotate-key runs on a Machine's host; the
//     replaced instances are removed without running remove on the hosts
//     (forgotten: their VMs are the Machine API's);
//   - the BYOH instance is rotated instead (rotate-key, KeyRotated with the
//     new key's fingerprint), and its host is not replaced;
//   - a Machine whose host refuses every key is replaced too.
func TestMachinesReplacedOnKeyChange(t *testing.T) {
	t.Parallel()
	cluster, admin := machineBed(t)
	ctx := context.Background()
	runs := &keyRunner{refuse: map[string]bool{}}
	startControllerAs(t, controllerIdentity(t, cluster), controller.Options{Namespace: ns, BYOHNamespace: wmcoNamespace,
		StateDir: t.TempDir(), Runner: runs}) // maxUnavailable: 1, the default

	machines := []string{"m1", "m2"}
	for i, name := range machines {
		rolloutNode(t, cluster, name, "1.0.0")
		require.NoError(t, admin.Create(ctx, newMachine(name, "Windows", "AWSMachineProviderConfig", "aws:///us-east-1a/i-0"+name)))
		provision(t, admin, name, "Running", "10.1.45."+string(rune('1'+i)))
	}
	rolloutNode(t, cluster, "byoh", "1.0.0")
	require.NoError(t, admin.Create(ctx, rolloutInstance("byoh")))
	first := map[string]string{}
	for _, name := range append(machines, "byoh") {
		eventually(t, time.Minute, name+" joined with its Node and key recorded", func() (bool, string) {
			wi := getInstance(t, admin, name)
			return wi.Status.Phase == wsuv1.PhaseJoined && wi.Status.NodeUID != "" && wi.Status.Identity.KeyFingerprint != "", describe(wi)
		})
		first[name] = getInstance(t, admin, name).Status.Identity.KeyFingerprint
	}
	for _, name := range machines {
		addFinalizer(t, admin, &wsuv1.WindowsInstance{}, types.NamespacedName{Namespace: ns, Name: name})
		addFinalizer(t, admin, &corev1.Node{}, types.NamespacedName{Name: "win-" + name})
	}

	newKey := privateKeyPEM(t)
	secret := &corev1.Secret{}
	require.NoError(t, admin.Get(ctx, types.NamespacedName{Namespace: wmcoNamespace, Name: kubeinv.KeySecret}, secret))
	secret.Data[kubeinv.KeySecretKey+controller.NewKeySuffix] = newKey
	require.NoError(t, admin.Update(ctx, secret))
	pub, err := userdata.PublicKey(newKey)
	require.NoError(t, err)
	eventually(t, time.Minute, "windows-user-data authorises the new key", func() (bool, string) {
		s, err := cluster.Client.CoreV1().Secrets(controller.MachineNamespace).Get(ctx, userdata.SecretName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return string(s.Data[userdata.SecretKey]) == userdata.Script(pub), s.Annotations[userdata.FingerprintAnnotation]
	})

	var gone, waiting string
	eventually(t, time.Minute, "one Machine deleted, the other waiting for the rollout limit", func() (bool, string) {
		gone, waiting = "", ""
		for _, name := range machines {
			if !machineExists(t, admin, name) {
				gone = name
			} else if c := meta.FindStatusCondition(getInstance(t, admin, name).Status.Conditions, wsuv1.ConditionKeyRotated); c != nil && c.Reason == controller.ReasonRolloutWait {
				waiting = name
			}
		}
		return gone != "" && waiting != "", "gone " + gone + ", waiting " + waiting
	})
	assert.True(t, machineExists(t, admin, waiting), "never both Machines at once under maxUnavailable 1")
	assert.Equal(t, "remove", getNode(t, cluster, "win-"+gone).Labels[controller.UnavailableLabel], "the replaced Machine's Node counts as out of service")
	eventually(t, 30*time.Second, "the replaced Machine's instance removed (forgotten)", func() (bool, string) {
		wi := getInstance(t, admin, gone)
		return wi.DeletionTimestamp != nil && !slices.Contains(wi.Finalizers, wsuv1.Finalizer), describe(wi)
	})
	assert.True(t, machineExists(t, admin, waiting), "the second waits while the first's Node is not gone")

	removeFinalizer(t, admin, &wsuv1.WindowsInstance{}, types.NamespacedName{Namespace: ns, Name: gone})
	removeFinalizer(t, admin, &corev1.Node{}, types.NamespacedName{Name: "win-" + gone})
	eventually(t, time.Minute, "the second Machine deleted once the first's Node is gone", func() (bool, string) {
		return !machineExists(t, admin, waiting), describe(getInstance(t, admin, waiting))
	})
	removeFinalizer(t, admin, &wsuv1.WindowsInstance{}, types.NamespacedName{Namespace: ns, Name: waiting})
	removeFinalizer(t, admin, &corev1.Node{}, types.NamespacedName{Name: "win-" + waiting})

	newFP := fingerprintOf(t, newKey)
	eventually(t, time.Minute, "the BYOH host rotated to the new key", func() (bool, string) {
		wi := getInstance(t, admin, "byoh")
		c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionKeyRotated)
		return wi.Status.Identity.KeyFingerprint == newFP && c != nil && c.Reason == controller.ReasonKeyRotated, describe(wi)
	})
	assert.Equal(t, 1, runs.runs("byoh", "wsu:rotate-key.hcl"), "the BYOH host takes rotate-key")
	for _, name := range machines {
		assert.Zero(t, runs.runs(name, "wsu:rotate-key.hcl"), name+": a Machine's host is replaced, not rotated")
		assert.Zero(t, runs.runs(name, "wsu:remove.hcl"), name+": its VM is the Machine API's to delete")
		assert.NotEqual(t, newFP, first[name])
		waitMachineEvent(t, cluster, name, controller.ReasonMachineReplaced)
	}

	// A Machine made meanwhile logs in with the user data's key and is
	// kept; one whose host refuses every key is replaced.
	require.NoError(t, admin.Create(ctx, newMachine("m3", "Windows", "AWSMachineProviderConfig", "aws:///us-east-1a/i-0m3")))
	rolloutNode(t, cluster, "m3", "1.0.0")
	provision(t, admin, "m3", "Running", "10.1.45.3")
	eventually(t, time.Minute, "m3 joined with the new key", func() (bool, string) {
		wi := &wsuv1.WindowsInstance{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "m3"}, wi); err != nil {
			return false, err.Error()
		}
		return wi.Status.Phase == wsuv1.PhaseJoined && wi.Status.NodeUID != "", describe(wi)
	})
	assert.Equal(t, newFP, getInstance(t, admin, "m3").Status.Identity.KeyFingerprint, "a new Machine authorises the user data's key")
	assert.True(t, machineExists(t, admin, "m3"), "a Machine with the current key is kept")
	runs.refuseLogins("m3")
	wi := getInstance(t, admin, "m3")
	orig := wi.DeepCopy()
	wi.Spec.Vars = map[string]string{"log_level": "debug"} // a new generation: planned at once
	require.NoError(t, admin.Patch(ctx, wi, client.MergeFrom(orig)))
	eventually(t, time.Minute, "m3 replaced: its host refuses the key", func() (bool, string) {
		return !machineExists(t, admin, "m3"), "the Machine is there"
	})
	waitMachineEvent(t, cluster, "m3", controller.ReasonMachineReplaced)
	assert.True(t, meta.IsStatusConditionTrue(getInstance(t, admin, "byoh").Status.Conditions, wsuv1.ConditionJoined), "the BYOH instance stays")
}

func machineExists(t *testing.T, c client.Client, name string) bool {
	t.Helper()
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(controller.MachineGVK)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: controller.MachineNamespace, Name: name}, m)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

func addFinalizer(t *testing.T, c client.Client, obj client.Object, key types.NamespacedName) {
	t.Helper()
	require.NoError(t, c.Get(context.Background(), key, obj))
	obj.SetFinalizers(append(obj.GetFinalizers(), hold))
	require.NoError(t, c.Update(context.Background(), obj))
}

func removeFinalizer(t *testing.T, c client.Client, obj client.Object, key types.NamespacedName) {
	t.Helper()
	eventually(t, 30*time.Second, "the test's finalizer off "+key.String(), func() (bool, string) {
		err := c.Get(context.Background(), key, obj)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		obj.SetFinalizers(slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool { return f == hold }))
		err = c.Update(context.Background(), obj)
		return err == nil || apierrors.IsNotFound(err), errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// waitMachineEvent waits for an event of reason on instance name.
func waitMachineEvent(t *testing.T, cluster *kubetest.Cluster, name, reason string) {
	t.Helper()
	eventually(t, 30*time.Second, "a "+reason+" event on "+name, func() (bool, string) {
		list, err := cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Name == name && e.Reason == reason
		}), "none"
	})
}
