//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/kubetest"
)

// nodesBed is a real API server with the shipped CRD, the key Secret and a
// controller whose runs are recorded (the hosts are unreachable). c acts
// as the site admin (escalation_bed_test.go): instances and ConfigMaps in
// the controller's namespace, nothing else.
type nodesBed struct {
	cluster *kubetest.Cluster
	c       client.Client
	runs    *requestRecorder
}

func newNodesBed(t *testing.T) *nodesBed {
	t.Helper()
	cluster, siteAdmin := escalationBed(t)
	return &nodesBed{cluster: cluster, c: siteAdmin, runs: &requestRecorder{}}
}

func (b *nodesBed) start(t *testing.T) {
	t.Helper()
	startHostVarsController(t, b.cluster, controller.Options{Namespace: ns, StateDir: t.TempDir(), Runner: b.runs})
}

// node registers a Node as a kubelet does, with labels, and returns it.
func (b *nodesBed) node(t *testing.T, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	_, err := b.cluster.CreateNode(context.Background(), name, labels)
	require.NoError(t, err)
	n, err := b.cluster.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

// unchanged asserts Node n is still there, as it was.
func (b *nodesBed) unchanged(t *testing.T, n *corev1.Node) {
	t.Helper()
	now, err := b.cluster.Client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	require.NoError(t, err, "Node %s is still there", n.Name)
	assert.Equal(t, n.UID, now.UID, "the same Node %s", n.Name)
	assert.Equal(t, n.ResourceVersion, now.ResourceVersion, "Node %s unchanged", n.Name)
}

func (b *nodesBed) get(t *testing.T, name string) (*wsuv1.WindowsInstance, error) {
	t.Helper()
	wi := &wsuv1.WindowsInstance{}
	return wi, b.c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, wi)
}

func (b *nodesBed) waitGone(t *testing.T, name string) {
	t.Helper()
	eventually(t, time.Minute, name+" gone", func() (bool, string) {
		wi, err := b.get(t, name)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, describe(wi)
	})
}

func (b *nodesBed) waitRefused(t *testing.T, name, reason, msg string) {
	t.Helper()
	eventually(t, time.Minute, name+" refused: "+reason, func() (bool, string) {
		wi, err := b.get(t, name)
		if err != nil {
			return false, err.Error()
		}
		v := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionValid)
		return v != nil && v.Status == metav1.ConditionFalse && v.Reason == reason && strings.Contains(v.Message, msg), describe(wi)
	})
	eventually(t, 30*time.Second, "a "+reason+" Warning event on "+name, func() (bool, string) {
		list, err := b.cluster.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range list.Items {
			if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, msg) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(list.Items))
	})
}

// runsOf are the recorded runs of instance name.
func (b *nodesBed) runsOf(name string) []run.Request {
	var out []run.Request
	for _, r := range b.runs.all() {
		if r.Instance == ns+"/"+name {
			out = append(out, r)
		}
	}
	return out
}

func instanceNamed(name string, vars map[string]string) *wsuv1.WindowsInstance {
	return &wsuv1.WindowsInstance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		// A closed port on this machine: unreachable.
		Spec: wsuv1.WindowsInstanceSpec{Address: "127.0.0.1", Username: "Administrator", Vars: vars,
			HostVars: map[string]string{"ansible_port": "1", "connect_retry_window": "0s"}},
	}
}

// TestForgetNeverJoinedLeavesControlPlaneNode is issue 26's reproduction:
// an instance at an unreachable address that never joined, with
// vars.node_name naming the control-plane Node, annotated forget and
// deleted, deleted that Node within seconds. Now the instance is refused
// (NodeNotOwned) and nothing runs for it; forgotten and deleted, it goes,
// and the Node stays as it was. Deleted without forget, its removal run
// is told there is no Node to touch.
func TestForgetNeverJoinedLeavesControlPlaneNode(t *testing.T) {
	t.Parallel()
	b := newNodesBed(t)
	ctx := context.Background()
	cp := b.node(t, "cp-1", map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""})
	b.start(t)

	hostile := instanceNamed("hostile", map[string]string{"node_name": "cp-1"})
	require.NoError(t, b.c.Create(ctx, hostile))
	b.waitRefused(t, "hostile", controller.ReasonNodeNotOwned, "Node cp-1 is not a Windows Node")
	assert.Empty(t, b.runsOf("hostile"), "a refused instance runs nothing")

	wi, err := b.get(t, "hostile")
	require.NoError(t, err)
	orig := wi.DeepCopy()
	wi.Annotations = map[string]string{wsuv1.ForgetAnnotation: "true"}
	require.NoError(t, b.c.Patch(ctx, wi, client.MergeFrom(orig)))
	require.NoError(t, b.c.Delete(ctx, wi))
	b.waitGone(t, "hostile")
	time.Sleep(2 * time.Second) // what the old controller needed to delete it
	b.unchanged(t, cp)

	// Without forget: the removal run (the host is unreachable, so it is
	// retried) is told that this instance never registered a Node.
	again := instanceNamed("hostile-2", map[string]string{"node_name": "cp-1"})
	require.NoError(t, b.c.Create(ctx, again))
	b.waitRefused(t, "hostile-2", controller.ReasonNodeNotOwned, "Node cp-1 is not a Windows Node")
	require.NoError(t, b.c.Delete(ctx, again))
	var remove run.Request
	eventually(t, time.Minute, "a remove run", func() (bool, string) {
		for _, r := range b.runsOf("hostile-2") {
			if r.Playbook == "wsu:remove.hcl" {
				remove = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d runs", len(b.runsOf("hostile-2")))
	})
	assert.Contains(t, remove.Vars, "node_registered=false")
	assert.Contains(t, remove.Vars, "node_owner=windowsinstance/"+ns+"/hostile-2")
	for _, v := range remove.Vars {
		assert.False(t, strings.HasPrefix(v, "node_uid="), "no UID recorded, none passed: %s", v)
	}
	b.unchanged(t, cp)
}

// TestReplacedNodeIsNotRemoved: a joined instance recorded its Node's UID;
// the Node was deleted and another registered under the name (a foreign
// host's, marked as wsu's even). The instance is refused (NodeNotOwned),
// its removal run gets the recorded UID (the playbook's node tasks refuse
// any other), and forgetting it deletes nothing. Instances claiming the
// Node, by spec.vars or by the name their host reports, are refused
// (NodeNameTaken) and never run.
func TestReplacedNodeIsNotRemoved(t *testing.T) {
	t.Parallel()
	b := newNodesBed(t)
	ctx := context.Background()
	windows := map[string]string{"kubernetes.io/os": "windows"}
	old := b.node(t, "win-1", windows)
	require.NoError(t, b.cluster.Client.CoreV1().Nodes().Delete(ctx, "win-1", metav1.DeleteOptions{}))
	b.node(t, "win-1", windows)
	require.NoError(t, b.cluster.AnnotateNode(ctx, "win-1", kube.OwnerAnnotation, "windowsinstance/"+ns+"/joined"))
	foreign, err := b.cluster.Client.CoreV1().Nodes().Get(ctx, "win-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, old.UID, foreign.UID)

	// The instance as the controller left it after its join.
	wi := instanceNamed("joined", nil)
	wi.Finalizers = []string{wsuv1.Finalizer}
	require.NoError(t, b.c.Create(ctx, wi))
	orig := wi.DeepCopy()
	wi.Status.NodeName, wi.Status.NodeUID = "win-1", string(old.UID)
	wi.Status.Identity.Hostname = "WIN-1"
	meta.SetStatusCondition(&wi.Status.Conditions, metav1.Condition{Type: wsuv1.ConditionJoined, Status: metav1.ConditionTrue, Reason: controller.ReasonInSync, Message: "joined"})
	// (The controller's write: the site admin may not write status.)
	require.Error(t, b.c.Status().Patch(ctx, wi.DeepCopy(), client.MergeFrom(orig)), "a site admin writes no status")
	require.NoError(t, hostVarsClient(t, b.cluster).Status().Patch(ctx, wi, client.MergeFrom(orig)))

	// Another instance whose vars name win-1.
	claims := instanceNamed("claims", map[string]string{"node_name": "win-1"})
	require.NoError(t, b.c.Create(ctx, claims))
	// And one whose host reported itself as WIN-1 (its facts, recorded in
	// status by an earlier plan): a compromised host claiming the Node.
	facts := instanceNamed("facts", nil)
	require.NoError(t, b.c.Create(ctx, facts))
	orig = facts.DeepCopy()
	facts.Status.Identity.Hostname = "WIN-1"
	require.NoError(t, hostVarsClient(t, b.cluster).Status().Patch(ctx, facts, client.MergeFrom(orig)))

	b.start(t)
	b.waitRefused(t, "joined", controller.ReasonNodeNotOwned, "Node win-1 has UID "+string(foreign.UID)+", not "+string(old.UID))
	b.waitRefused(t, "claims", controller.ReasonNodeNameTaken, "Node win-1 is WindowsInstance joined's")
	b.waitRefused(t, "facts", controller.ReasonNodeNameTaken, "Node win-1 is WindowsInstance joined's")
	assert.Empty(t, b.runsOf("joined"))
	assert.Empty(t, b.runsOf("claims"))
	assert.Empty(t, b.runsOf("facts"))

	require.NoError(t, b.c.Delete(ctx, wi))
	var remove run.Request
	eventually(t, time.Minute, "a remove run", func() (bool, string) {
		for _, r := range b.runsOf("joined") {
			if r.Playbook == "wsu:remove.hcl" {
				remove = r
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d runs", len(b.runsOf("joined")))
	})
	for _, v := range []string{"node_uid=" + string(old.UID), "node_name=win-1", "node_registered=true", "node_owner=windowsinstance/" + ns + "/joined"} {
		assert.True(t, slices.Contains(remove.Vars, v), "remove gets %s: %v", v, remove.Vars)
	}
	assert.Equal(t, "node_owner=windowsinstance/"+ns+"/joined", remove.Vars[len(remove.Vars)-4], "the controller's variables come last")

	wi, err = b.get(t, "joined")
	require.NoError(t, err)
	orig = wi.DeepCopy()
	wi.Annotations = map[string]string{wsuv1.ForgetAnnotation: "true"}
	require.NoError(t, b.c.Patch(ctx, wi, client.MergeFrom(orig)))
	b.waitGone(t, "joined")
	b.unchanged(t, foreign)
}

// TestControllerVarsRefused: spec.vars may not set the variables that say
// which Node an instance owns (the CRD's rule); from a varsFrom ConfigMap
// the controller refuses them (VarRefused), and runs nothing.
func TestControllerVarsRefused(t *testing.T) {
	t.Parallel()
	b := newNodesBed(t)
	ctx := context.Background()
	for _, v := range wsuv1.ControllerVars() {
		err := b.c.Create(ctx, instanceNamed("set-"+strings.ReplaceAll(v, "_", "-"), map[string]string{v: "x"}))
		require.Error(t, err, v)
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", v, err)
		assert.Contains(t, err.Error(), "vars may not set node_owner, node_uid, node_registered or adopt_node", v)
	}
	require.NoError(t, b.c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "adopt", Namespace: ns}, Data: map[string]string{"adopt_node": "true", "node_owner": "windowsinstance/" + ns + "/other"},
	}))
	wi := instanceNamed("from-configmap", nil)
	wi.Spec.VarsFrom = []wsuv1.VarSource{{ConfigMap: "adopt"}}
	require.NoError(t, b.c.Create(ctx, wi))
	b.start(t)
	b.waitRefused(t, "from-configmap", controller.ReasonVarRefused, "spec.vars and varsFrom may not set adopt_node, node_owner")
	assert.Empty(t, b.runsOf("from-configmap"))
}
