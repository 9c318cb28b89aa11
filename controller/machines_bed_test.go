//go:build linux

package controller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/kubetest"
)

// machineBed is an OpenShift-shaped bed with the Machine API's real CRDs
// (from its module, kubetest.InstallMachineAPI) and the controller's
// shipped RBAC bound to its ServiceAccount.
func machineBed(t *testing.T) (*kubetest.Cluster, client.Client) {
	t.Helper()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t)))
	require.NoError(t, cluster.InstallMachineAPI(ctx))
	for _, n := range []string{ns, wmcoNamespace, controller.MachineNamespace} {
		require.NoError(t, cluster.EnsureNamespace(ctx, n))
	}
	_, err := cluster.Client.CoreV1().Secrets(wmcoNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: privateKeyPEM(t)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	bindRBAC(t, cluster, controllerServiceAccount, "../deploy/rbac/controller/role.yaml")
	bindRBAC(t, cluster, controllerServiceAccount, "../deploy/overlays/openshift/byoh.yaml")
	bindRBAC(t, cluster, controllerServiceAccount, "../deploy/rbac/wsu-cluster-role.yaml", "wsu-cluster-info")
	return cluster, hostVarsClient(t, cluster)
}

// newMachine is a Machine as a MachineSet makes it: labelled with its
// OS (osID "" for none, as a Linux worker's), its providerSpec of kind.
func newMachine(name, osID, kind, providerID string) *unstructured.Unstructured {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(controller.MachineGVK)
	m.SetNamespace(controller.MachineNamespace)
	m.SetName(name)
	if osID != "" {
		m.SetLabels(map[string]string{controller.MachineOSIDLabel: osID})
	}
	_ = unstructured.SetNestedField(m.Object, map[string]any{
		"value": map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": kind},
	}, "spec", "providerSpec")
	if providerID != "" {
		_ = unstructured.SetNestedField(m.Object, providerID, "spec", "providerID")
	}
	return m
}

// provision writes m's status as the machine controller does once its
// VM is up: phase, and an InternalIP.
func provision(t *testing.T, c client.Client, name, phase, ip string) {
	t.Helper()
	ctx := context.Background()
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(controller.MachineGVK)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: controller.MachineNamespace, Name: name}, m))
	require.NoError(t, unstructured.SetNestedField(m.Object, phase, "status", "phase"))
	require.NoError(t, unstructured.SetNestedSlice(m.Object, []any{
		map[string]any{"type": "InternalIP", "address": ip},
		map[string]any{"type": "InternalDNS", "address": name + ".ec2.internal"},
	}, "status", "addresses"))
	require.NoError(t, c.Status().Update(ctx, m))
}

// TestMachinesBecomeInstances: with the Machine API's real CRDs served,
// the controller (as its ServiceAccount, with the shipped RBAC) turns each
// Windows Machine into a WindowsInstance it owns once the Machine is
// Provisioned with an InternalIP: named as the Machine, at that address,
// as the platform's user (Administrator on AWS, capi on Azure, a
// Machine's wsu.dev/username over both), carrying the Machine and its
// providerID, which its join gets as provider_id and machine. A Windows
// Machine not yet provisioned, and a Linux Machine, make none. A deleted
// Machine, and one being deleted (held by a finalizer), have their
// instance removed through the remove playbook.
func TestMachinesBecomeInstances(t *testing.T) {
	t.Parallel()
	cluster, admin := machineBed(t)
	ctx := context.Background()
	runs := &inSyncRunner{}
	startControllerAs(t, controllerIdentity(t, cluster), controller.Options{Namespace: ns, BYOHNamespace: wmcoNamespace,
		StateDir: t.TempDir(), Runner: runs})

	linux := newMachine("worker-a", "", "AWSMachineProviderConfig", "aws:///us-east-1a/i-0linux")
	require.NoError(t, admin.Create(ctx, linux))
	provision(t, admin, "worker-a", "Running", "10.1.44.9")
	pending := newMachine("win-pending", "Windows", "AWSMachineProviderConfig", "")
	require.NoError(t, admin.Create(ctx, pending))
	aws := newMachine("win-aws", "Windows", "AWSMachineProviderConfig", "aws:///us-east-1a/i-0aws")
	require.NoError(t, admin.Create(ctx, aws))
	azure := newMachine("win-azure", "Windows", "AzureMachineProviderSpec", "azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/win-azure")
	azure.SetFinalizers([]string{"machine.machine.openshift.io"}) // the machine controller's
	require.NoError(t, admin.Create(ctx, azure))
	named := newMachine("win-named", "Windows", "GCPMachineProviderSpec", "gce://p/us-central1-a/win-named")
	named.SetAnnotations(map[string]string{controller.MachineUsernameAnnotation: "wsu-admin"})
	require.NoError(t, admin.Create(ctx, named))
	provision(t, admin, "win-aws", "Provisioned", "10.1.44.1")
	provision(t, admin, "win-azure", "Running", "10.1.44.2")
	provision(t, admin, "win-named", "Running", "10.1.44.3")

	get := func(name string) *wsuv1.WindowsInstance { return instanceIfAny(t, admin, name) }
	want := map[string]struct{ address, user, providerID string }{
		"win-aws":   {"10.1.44.1", "Administrator", "aws:///us-east-1a/i-0aws"},
		"win-azure": {"10.1.44.2", "capi", "azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/win-azure"},
		"win-named": {"10.1.44.3", "wsu-admin", "gce://p/us-central1-a/win-named"},
	}
	for name, w := range want {
		eventually(t, time.Minute, name+" joined", func() (bool, string) {
			wi := get(name)
			return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
		})
		wi := get(name)
		assert.Equal(t, w.address, wi.Spec.Address, name)
		assert.Equal(t, w.user, wi.Spec.Username, name)
		assert.Equal(t, wsuv1.SourceMachine, wi.Labels[wsuv1.SourceLabel], name)
		assert.Equal(t, controller.MachineNamespace+"/"+name, wi.Annotations[controller.InstanceMachineAnnotation], name)
		assert.Equal(t, w.providerID, wi.Annotations[controller.InstanceProviderIDAnnotation], name)
		var join []string
		for _, req := range runs.all(name) {
			if req.Playbook == "wsu:join.hcl" {
				join = req.Inputs.Vars
			}
		}
		assert.Contains(t, join, "provider_id="+w.providerID, name+": the join gives the Node the Machine's providerID")
		assert.Contains(t, join, "machine="+controller.MachineNamespace+"/"+name, name+": the join links the Node to the Machine")
	}
	assert.Nil(t, get("win-pending"), "a Machine not provisioned makes no instance")
	assert.Nil(t, get("worker-a"), "a Linux Machine makes no instance")

	provision(t, admin, "win-pending", "Provisioned", "10.1.44.4")
	eventually(t, time.Minute, "win-pending's instance once provisioned", func() (bool, string) {
		wi := get("win-pending")
		return wi != nil && wi.Spec.Address == "10.1.44.4", describe(wi)
	})
	assert.Empty(t, get("win-pending").Annotations[controller.InstanceProviderIDAnnotation], "no providerID yet")
	assert.False(t, slices.ContainsFunc(runs.all("win-pending"), func(req run.Request) bool {
		return slices.ContainsFunc(req.Inputs.Vars, func(v string) bool { return len(v) > 12 && v[:12] == "provider_id=" })
	}), "no provider_id for a Machine without one")

	require.NoError(t, admin.Delete(ctx, newMachine("win-aws", "", "", "")))
	eventually(t, time.Minute, "a deleted Machine's instance removed", func() (bool, string) {
		wi := get("win-aws")
		return wi == nil, describe(wi)
	})
	assert.Equal(t, 1, runs.removals("win-aws"), "its host is removed by the remove playbook")

	require.NoError(t, admin.Delete(ctx, newMachine("win-azure", "", "", "")))
	eventually(t, time.Minute, "a Machine being deleted has its instance removed", func() (bool, string) {
		wi := get("win-azure")
		return wi == nil, describe(wi)
	})
	assert.Equal(t, 1, runs.removals("win-azure"))
	held := &unstructured.Unstructured{}
	held.SetGroupVersionKind(controller.MachineGVK)
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: controller.MachineNamespace, Name: "win-azure"}, held))
	assert.NotNil(t, held.GetDeletionTimestamp(), "the Machine is the Machine API's to finish deleting")

	assert.Nil(t, get("worker-a"), "a Linux Machine is never touched")
	assert.NotNil(t, get("win-named"), "the other Machines' instances stay")
	for _, name := range []string{"win-named", "win-pending", "worker-a"} {
		assert.Zero(t, runs.removals(name), name)
	}
}

// TestGoneMachineForgotten: a Machine being deleted has its instance
// removed, but its host no longer takes the login (the machine controller
// deleted its VM): remove fails, and the instance keeps its finalizer. Once
// the machine controller lets the Machine go (its VM and Node gone), the
// instance is forgotten: it goes without remove succeeding (a Forgotten
// event), instead of retrying remove on a host that is no more.
func TestGoneMachineForgotten(t *testing.T) {
	t.Parallel()
	cluster, admin := machineBed(t)
	ctx := context.Background()
	runs := &keyRunner{refuse: map[string]bool{}}
	startControllerAs(t, controllerIdentity(t, cluster), controller.Options{Namespace: ns, BYOHNamespace: wmcoNamespace,
		StateDir: t.TempDir(), Runner: runs})

	m := newMachine("win-vm", "Windows", "AWSMachineProviderConfig", "aws:///us-east-1a/i-0vm")
	m.SetFinalizers([]string{hold}) // the machine controller's, held by the test
	require.NoError(t, admin.Create(ctx, m))
	provision(t, admin, "win-vm", "Running", "10.1.46.1")
	eventually(t, time.Minute, "joined", func() (bool, string) {
		wi := instanceIfAny(t, admin, "win-vm")
		return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined, describe(wi)
	})

	runs.refuseLogins("win-vm") // its VM is being deleted
	require.NoError(t, admin.Delete(ctx, newMachine("win-vm", "", "", "")))
	waitMachineEvent(t, cluster, "win-vm", controller.ReasonTeardownFailure)
	wi := instanceIfAny(t, admin, "win-vm")
	require.NotNil(t, wi, "remove failed: the instance keeps its finalizer")
	assert.NotEqual(t, "true", wi.Annotations[wsuv1.ForgetAnnotation], "not forgotten while its Machine is there")

	removeFinalizer(t, admin, machineObjectFor("win-vm"), client.ObjectKey{Namespace: controller.MachineNamespace, Name: "win-vm"})
	eventually(t, time.Minute, "the instance of the gone Machine forgotten", func() (bool, string) {
		wi := instanceIfAny(t, admin, "win-vm")
		return wi == nil, describe(wi)
	})
	waitMachineEvent(t, cluster, "win-vm", controller.ReasonForgotten)
}

func machineObjectFor(name string) *unstructured.Unstructured {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(controller.MachineGVK)
	m.SetName(name)
	return m
}
