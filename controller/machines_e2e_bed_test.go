//go:build linux

package controller_test

import (
	"context"
	"errors"
	"fmt"
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
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/machineapi"
	"github.com/wsu-project/wsu/userdata"
)

// TestMachineSetLifecycle: a Windows MachineSet's life end to end, against
// a real API server serving the Machine API's real CRDs, the controller in
// process, the Machine API's stand-in (test/machineapi: the MachineSet,
// machine and nodelink controllers, and a cloud of simulated hosts behind
// the test sshd), and real joins on those hosts:
//
//   - scaled 0 → 2: two Machines, each Running with a Ready Node that is
//     linked to it (the Node's providerID is the Machine's, the Machine's
//     nodeRef names the Node, the Node's machine.openshift.io/machine
//     annotation names the Machine: wsu's join writes it, the stand-in's
//     nodelink leaves it to the join), and its
//     instance Joined with the Node recorded;
//   - the key Secret's key replaced: windows-user-data authorises the new
//     key, and both Machines are replaced one at a time: never two of the
//     set's Machines out of service at once (being deleted, or not yet
//     linked to a Ready Node configured by wsu: a replaced Machine's
//     successor joins before the next Machine goes, as WMCO), nor two
//     Nodes marked out of service, read from the ordered stream of
//     changes; the set's new Machines join, logging in with the new key;
//   - scaled to 0: each instance's host is removed (remove's drain first),
//     the Nodes, Machines and instances are gone;
//   - a Linux MachineSet and its Machine are never touched: their
//     resourceVersions never change and no instance is made for them.
func TestMachineSetLifecycle(t *testing.T) {
	t.Parallel()
	start := time.Now()
	b := newBedWith(t, harness.Options{Hosts: 4})
	ctx := context.Background()
	require.NoError(t, b.env.Cluster.InstallMachineAPI(ctx))
	require.NoError(t, b.env.Cluster.EnsureNamespace(ctx, controller.MachineNamespace))
	cloud := &machineapi.SimCloud{Env: b.env, Hosts: b.env.Hosts, Client: b.client}
	standIn, err := machineapi.Start(b.env.Cluster.Config, cloud)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, standIn.Stop()) })

	// Each host is reached by the address its Machine gets (its IPv4).
	byAddress := map[string]map[string]string{}
	for _, h := range b.env.Hosts {
		vars, err := b.env.InstanceHostVars(h)
		require.NoError(t, err)
		byAddress[h.IPv4] = vars
	}
	run := b.startController(t, controller.Options{AddressHostVars: byAddress, MachineUsername: b.env.SSHUser},
		controller.ManagerOptions{}, nil)

	linuxSet := machineSet("linux-worker", "", 1)
	require.NoError(t, b.client.Create(ctx, linuxSet))
	linux := waitSetMachines(t, b.client, "linux-worker", 1, machineapi.PhaseProvisioned)[0]
	eventually(t, time.Minute, "the Linux MachineSet's status", func() (bool, string) {
		s := getMachineSet(t, b.client, "linux-worker")
		n, _, _ := unstructured.NestedInt64(s.Object, "status", "replicas")
		return n == 1, fmt.Sprint(s.Object["status"])
	})
	linuxRV := map[string]string{"MachineSet": getMachineSet(t, b.client, "linux-worker").GetResourceVersion(), "Machine": linux.GetResourceVersion()}

	eventually(t, time.Minute, "windows-user-data written", func() (bool, string) {
		s := &corev1.Secret{}
		err := b.client.Get(ctx, types.NamespacedName{Namespace: controller.MachineNamespace, Name: userdata.SecretName}, s)
		return err == nil, errString(err)
	})
	require.NoError(t, b.client.Create(ctx, machineSet("windows", "Windows", 0)))
	scaleSet(t, b.client, "windows", 2)
	first := waitWindowsSet(t, b, "windows", 2)
	t.Logf("scaled 0 → 2 in %s", time.Since(start).Round(time.Second))

	// Rotate: the key replaced in place, as an admin used to WMCO does.
	out := trackOutOfService(t, b, "windows", 2)
	newKey := privateKeyPEM(t)
	secret := &corev1.Secret{}
	require.NoError(t, b.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: kubeinv.KeySecret}, secret))
	secret.Data[kubeinv.KeySecretKey] = newKey
	require.NoError(t, b.client.Update(ctx, secret))
	newFP := fingerprintOf(t, newKey)
	eventually(t, time.Minute, "windows-user-data authorises the new key", func() (bool, string) {
		s := &corev1.Secret{}
		if err := b.client.Get(ctx, types.NamespacedName{Namespace: controller.MachineNamespace, Name: userdata.SecretName}, s); err != nil {
			return false, err.Error()
		}
		return s.Annotations[userdata.FingerprintAnnotation] == newFP, s.Annotations[userdata.FingerprintAnnotation]
	})
	second := waitWindowsSet(t, b, "windows", 2, first...)
	for _, m := range second {
		assert.Equal(t, newFP, b.get(t, m).Status.Identity.KeyFingerprint, "%s logs in with the new key", m)
	}
	for _, m := range first {
		assert.Nil(t, b.get(t, m), "the replaced Machine's instance is gone")
		waitMachineEvent(t, b.env.Cluster, m, controller.ReasonMachineReplaced)
	}
	outOfService, marked, err := out.result()
	require.NoError(t, err, "the watches ran throughout")
	assert.Equal(t, 1, outOfService, "the Machines were replaced one at a time: never two of the set out of service at once (maxUnavailable 1)")
	assert.Equal(t, 1, marked, "never two Nodes marked out of service at once")
	t.Logf("replaced both Machines by %s", time.Since(start).Round(time.Second))

	// Scale to 0: every host removed, its Node drained and gone.
	nodes := map[string]string{}
	for _, m := range second {
		nodes[m] = b.get(t, m).Status.NodeName
	}
	scaleSet(t, b.client, "windows", 0)
	eventually(t, 5*time.Minute, "no Windows Machine, instance or Node left", func() (bool, string) {
		left := setMachines(t, b.client, "windows")
		for _, m := range second {
			if b.get(t, m) != nil {
				return false, m + ": " + describe(b.get(t, m))
			}
		}
		return len(left) == 0, fmt.Sprintf("%d Machines", len(left))
	})
	for m, node := range nodes {
		_, err := b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s's Node %s is gone: %v", m, node, err)
		assert.True(t, removed(run, m), "%s's host was removed by the remove playbook (its first play drains the Node)", m)
	}

	assert.Equal(t, linuxRV["MachineSet"], getMachineSet(t, b.client, "linux-worker").GetResourceVersion(), "the Linux MachineSet is never touched")
	assert.Equal(t, linuxRV["Machine"], getMachine(t, b.client, linux.GetName()).GetResourceVersion(), "the Linux Machine is never touched")
	assert.Nil(t, b.get(t, linux.GetName()), "a Linux Machine makes no instance")
	t.Logf("the MachineSet's life took %s", time.Since(start).Round(time.Second))
}

// machineSet is a MachineSet of replicas Machines labelled osID ("" for
// none), whose providerSpec names the user data.
func machineSet(name, osID string, replicas int64) *unstructured.Unstructured {
	s := machineapi.NewObject(machineapi.MachineSetGVK)
	s.SetNamespace(controller.MachineNamespace)
	s.SetName(name)
	labels := map[string]any{"machine.openshift.io/cluster-api-cluster": "test", "machine.openshift.io/cluster-api-machineset": name}
	if osID != "" {
		labels[controller.MachineOSIDLabel] = osID
	}
	s.Object["spec"] = map[string]any{
		"replicas": replicas,
		"selector": map[string]any{"matchLabels": map[string]any{"machine.openshift.io/cluster-api-machineset": name}},
		"template": map[string]any{
			"metadata": map[string]any{"labels": labels},
			"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{
				"apiVersion": "machine.openshift.io/v1beta1", "kind": "AWSMachineProviderConfig",
				"userDataSecret": map[string]any{"name": userdata.SecretName},
			}}},
		},
	}
	return s
}

func scaleSet(t *testing.T, c client.Client, name string, replicas int64) {
	t.Helper()
	s := machineapi.NewObject(machineapi.MachineSetGVK)
	s.SetNamespace(controller.MachineNamespace)
	s.SetName(name)
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	require.NoError(t, c.Patch(context.Background(), s, patch))
}

func getMachineSet(t *testing.T, c client.Client, name string) *unstructured.Unstructured {
	t.Helper()
	s := machineapi.NewObject(machineapi.MachineSetGVK)
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: controller.MachineNamespace, Name: name}, s))
	return s
}

func getMachine(t *testing.T, c client.Client, name string) *unstructured.Unstructured {
	t.Helper()
	m := machineapi.NewObject(machineapi.MachineGVK)
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: controller.MachineNamespace, Name: name}, m))
	return m
}

// setMachines are the Machines of the set name (by its owner reference).
func setMachines(t *testing.T, c client.Client, set string) []*unstructured.Unstructured {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(machineapi.MachineGVK.GroupVersion().WithKind("MachineList"))
	require.NoError(t, c.List(context.Background(), list, client.InNamespace(controller.MachineNamespace)))
	var out []*unstructured.Unstructured
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.Name == set {
			out = append(out, &list.Items[i])
		}
	}
	return out
}

func machinePhase(m *unstructured.Unstructured) string {
	p, _, _ := unstructured.NestedString(m.Object, "status", "phase")
	return p
}

// waitSetMachines waits for n Machines of set in phase, none being
// deleted.
func waitSetMachines(t *testing.T, c client.Client, set string, n int, phase string) []*unstructured.Unstructured {
	t.Helper()
	var got []*unstructured.Unstructured
	eventually(t, time.Minute, fmt.Sprintf("%d Machines of %s %s", n, set, phase), func() (bool, string) {
		got = setMachines(t, c, set)
		var seen []string
		for _, m := range got {
			seen = append(seen, m.GetName()+"="+machinePhase(m))
			if machinePhase(m) != phase || m.GetDeletionTimestamp() != nil {
				return false, strings.Join(seen, " ")
			}
		}
		return len(got) == n, strings.Join(seen, " ")
	})
	return got
}

// waitWindowsSet waits until the Windows set has n Machines, none of
// those named in not, each Running and linked to its Ready Node, its
// instance Joined; it checks each link and returns the Machines' names.
func waitWindowsSet(t *testing.T, b *bed, set string, n int, not ...string) []string {
	t.Helper()
	var names []string
	eventually(t, 10*time.Minute, fmt.Sprintf("%d Windows Machines of %s joined", n, set), func() (bool, string) {
		ms := setMachines(t, b.client, set)
		names = names[:0]
		var seen []string
		for _, m := range ms {
			names = append(names, m.GetName())
			wi := b.get(t, m.GetName())
			seen = append(seen, m.GetName()+"="+machinePhase(m)+" "+describe(wi))
			if slices.Contains(not, m.GetName()) || m.GetDeletionTimestamp() != nil || machinePhase(m) != machineapi.PhaseRunning ||
				wi == nil || !meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionJoined) ||
				!meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady) {
				return false, strings.Join(seen, "; ")
			}
		}
		return len(ms) == n, strings.Join(seen, "; ")
	})
	for _, name := range names {
		checkLinked(t, b, name)
	}
	return slices.Clone(names)
}

// checkLinked checks Machine name, its Node and its instance name each
// other as machine-api's nodelink and wsu do.
func checkLinked(t *testing.T, b *bed, name string) {
	t.Helper()
	m := getMachine(t, b.client, name)
	wi := b.get(t, name)
	require.NotNil(t, wi)
	providerID, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
	nodeRef, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
	node := getNode(t, b.env.Cluster, wi.Status.NodeName)
	assert.Equal(t, "Windows", m.GetLabels()[controller.MachineOSIDLabel], name)
	assert.True(t, strings.HasPrefix(name, "windows-"), "%s: named after its MachineSet", name)
	assert.Equal(t, node.Name, nodeRef, "%s: the Machine's nodeRef names its instance's Node", name)
	assert.NotEmpty(t, providerID, name)
	assert.Equal(t, providerID, node.Spec.ProviderID, "%s: the Node registered with the Machine's providerID", name)
	assert.Equal(t, providerID, wi.Annotations[controller.InstanceProviderIDAnnotation], name)
	assert.Equal(t, controller.MachineNamespace+"/"+name, node.Annotations[controller.NodeMachineAnnotation], "%s: the Node names its Machine", name)
	assert.Equal(t, wsuv1.SourceMachine, wi.Labels[wsuv1.SourceLabel], name)
	assert.Equal(t, cloudAddress(m), wi.Spec.Address, "%s: the instance is at the Machine's InternalIP", name)
	assert.Equal(t, wsuv1.PhaseJoined, wi.Status.Phase, name)
	assert.NotEmpty(t, node.Annotations["wsu.dev/version"], "%s: configured by wsu", name)
}

func cloudAddress(m *unstructured.Unstructured) string {
	addrs, _, _ := unstructured.NestedSlice(m.Object, "status", "addresses")
	for _, a := range addrs {
		if am, ok := a.(map[string]any); ok && am["type"] == "InternalIP" {
			s, _ := am["address"].(string)
			return s
		}
	}
	return ""
}

// removed says whether a remove run for instance name succeeded.
func removed(r *running, name string) bool {
	_, ended := r.runs.record()
	return slices.ContainsFunc(ended, func(rec runRecord) bool {
		return rec.instance == ns+"/"+name && rec.playbook == "wsu:remove.hcl" && !rec.out.Failed
	})
}

// outOfService follows, in the order the API server changed them, the
// Windows Machines and the Nodes, and keeps the most Machines of set out
// of service at once — its replicas less those in service: not being
// deleted, linked to a Node that is Ready, configured by wsu (its version
// annotation) and not marked out of service — and the most Nodes wsu
// marked out of service at once.
type outOfService struct {
	set      string
	replicas int

	mu       sync.Mutex
	machines map[string]*unstructured.Unstructured
	nodes    map[string]*corev1.Node
	maxOut   int
	maxMarks int
	err      error
}

func trackOutOfService(t *testing.T, b *bed, set string, replicas int) *outOfService {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &outOfService{set: set, replicas: replicas, machines: map[string]*unstructured.Unstructured{}, nodes: map[string]*corev1.Node{}}
	machines := &unstructured.UnstructuredList{}
	machines.SetGroupVersionKind(machineapi.MachineGVK.GroupVersion().WithKind("MachineList"))
	windows := client.MatchingLabels{controller.MachineOSIDLabel: "Windows"}
	require.NoError(t, b.client.List(ctx, machines, client.InNamespace(controller.MachineNamespace), windows))
	nodes := &corev1.NodeList{}
	require.NoError(t, b.client.List(ctx, nodes))
	for i := range machines.Items {
		o.machines[machines.Items[i].GetName()] = &machines.Items[i]
	}
	for i := range nodes.Items {
		o.nodes[nodes.Items[i].Name] = &nodes.Items[i]
	}
	o.count()
	from := func(rv string) *client.ListOptions {
		return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}}
	}
	mw, err := b.client.Watch(ctx, machines, client.InNamespace(controller.MachineNamespace), windows, from(machines.GetResourceVersion()))
	require.NoError(t, err)
	nw, err := b.client.Watch(ctx, &corev1.NodeList{}, from(nodes.ResourceVersion))
	require.NoError(t, err)
	var wg sync.WaitGroup
	for _, w := range []watch.Interface{mw, nw} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.ResultChan() {
				o.see(ev)
			}
			o.mu.Lock()
			if o.err == nil && ctx.Err() == nil {
				o.err = errors.New("a watch ended early")
			}
			o.mu.Unlock()
		}()
	}
	t.Cleanup(func() {
		cancel()
		mw.Stop()
		nw.Stop()
		wg.Wait()
	})
	return o
}

func (o *outOfService) see(ev watch.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch obj := ev.Object.(type) {
	case *unstructured.Unstructured:
		if ev.Type == watch.Deleted {
			delete(o.machines, obj.GetName())
		} else {
			o.machines[obj.GetName()] = obj
		}
	case *corev1.Node:
		if ev.Type == watch.Deleted {
			delete(o.nodes, obj.Name)
		} else {
			o.nodes[obj.Name] = obj
		}
	default:
		if ev.Type == watch.Error {
			o.err = fmt.Errorf("watch: %w", apierrors.FromObject(ev.Object))
		}
		return
	}
	o.count()
}

// count records the Machines out of service and the marked Nodes now.
func (o *outOfService) count() {
	inService := 0
	for _, m := range o.machines {
		ref := metav1.GetControllerOf(m)
		if ref == nil || ref.Name != o.set || m.GetDeletionTimestamp() != nil {
			continue
		}
		name, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		if n := o.nodes[name]; n != nil && nodeReady(n) && n.Annotations["wsu.dev/version"] != "" && n.Labels[controller.UnavailableLabel] == "" {
			inService++
		}
	}
	marks := 0
	for _, n := range o.nodes {
		if n.Labels[controller.UnavailableLabel] != "" {
			marks++
		}
	}
	o.maxOut = max(o.maxOut, o.replicas-inService)
	o.maxMarks = max(o.maxMarks, marks)
}

// result is the most Machines out of service, and Nodes marked, at once.
func (o *outOfService) result() (out, marked int, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.maxOut, o.maxMarks, o.err
}
