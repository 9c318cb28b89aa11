package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

func testMachine(kind, providerID, phase string, addrs ...map[string]any) *unstructured.Unstructured {
	m := machineObject()
	m.SetNamespace(MachineNamespace)
	m.SetName("m")
	m.SetLabels(map[string]string{MachineOSIDLabel: "Windows"})
	_ = unstructured.SetNestedField(m.Object, kind, "spec", "providerSpec", "value", "kind")
	if providerID != "" {
		_ = unstructured.SetNestedField(m.Object, providerID, "spec", "providerID")
	}
	if phase != "" {
		_ = unstructured.SetNestedField(m.Object, phase, "status", "phase")
	}
	list := make([]any, len(addrs))
	for i, a := range addrs {
		list[i] = a
	}
	_ = unstructured.SetNestedSlice(m.Object, list, "status", "addresses")
	return m
}

// TestMachineUsername: the platform's user (capi on Azure, by
// providerSpec kind or providerID scheme; Administrator elsewhere), the
// controller's --machine-username over it, a Machine's annotation over
// both.
func TestMachineUsername(t *testing.T) {
	r := &MachineReconciler{}
	assert.Equal(t, "Administrator", r.username(testMachine("AWSMachineProviderConfig", "", "")))
	assert.Equal(t, "capi", r.username(testMachine("AzureMachineProviderSpec", "", "")))
	assert.Equal(t, "capi", r.username(testMachine("", "azure:///subscriptions/s/x", "")))
	assert.Equal(t, "Administrator", r.username(testMachine("VSphereMachineProviderSpec", "vsphere://42", "")))
	r.Username = "ops"
	assert.Equal(t, "ops", r.username(testMachine("AzureMachineProviderSpec", "", "")))
	m := testMachine("AzureMachineProviderSpec", "", "")
	m.SetAnnotations(map[string]string{MachineUsernameAnnotation: "mine"})
	assert.Equal(t, "mine", r.username(m))
}

// TestMachineInstanceReady: an instance only for a Provisioned or Running
// Machine with an InternalIP (the first), never its DNS name or external
// address.
func TestMachineInstanceReady(t *testing.T) {
	r := &MachineReconciler{InstanceNamespace: "wsu-system"}
	ext := map[string]any{"type": "ExternalIP", "address": "203.0.113.9"}
	dns := map[string]any{"type": "InternalDNS", "address": "m.internal"}
	ip := map[string]any{"type": "InternalIP", "address": "10.0.0.7"}
	for _, phase := range []string{"", "Provisioning", "Failed", "Deleting"} {
		_, ok := r.instance(testMachine("AWSMachineProviderConfig", "aws:///a/i-1", phase, ip))
		assert.False(t, ok, "phase %q", phase)
	}
	_, ok := r.instance(testMachine("AWSMachineProviderConfig", "aws:///a/i-1", "Running", ext, dns))
	assert.False(t, ok, "no InternalIP")
	wi, ok := r.instance(testMachine("AWSMachineProviderConfig", "aws:///a/i-1", "Provisioned", ext, dns, ip))
	assert.True(t, ok)
	assert.Equal(t, "10.0.0.7", wi.Spec.Address)
	assert.Equal(t, "wsu-system", wi.Namespace)
	assert.Equal(t, wsuv1.SourceMachine, wi.Labels[wsuv1.SourceLabel])
	assert.Equal(t, "aws:///a/i-1", wi.Annotations[InstanceProviderIDAnnotation])
	assert.Equal(t, MachineNamespace+"/m", wi.Annotations[InstanceMachineAnnotation])
}

// TestMachineVars: only a Machine's instance, only for join, gets the
// Node-to-Machine link; a BYOH instance's join is unchanged.
func TestMachineVars(t *testing.T) {
	r := &MachineReconciler{InstanceNamespace: "wsu-system"}
	wi, _ := r.instance(testMachine("AWSMachineProviderConfig", "aws:///a/i-1", "Running", map[string]any{"type": "InternalIP", "address": "10.0.0.7"}))
	assert.Equal(t, []string{"machine=" + MachineNamespace + "/m", "provider_id=aws:///a/i-1"}, machineVars(wi, "wsu:join.hcl"))
	assert.Nil(t, machineVars(wi, "wsu:remove.hcl"))
	assert.Nil(t, machineVars(wi, "wsu:upgrade.hcl"))
	byoh := &wsuv1.WindowsInstance{}
	byoh.Labels = map[string]string{wsuv1.SourceLabel: wsuv1.SourceConfigMap}
	assert.Nil(t, machineVars(byoh, "wsu:join.hcl"))
	assert.Equal(t, []string{"node_owner=" + nodeOwner(byoh), "adopt_node=false"}, nodeVars(byoh, "wsu:join.hcl"))
}

// TestMachineKeyStale: a Machine instance's key is stale when it is not
// the one the user data authorises (KEY.new while a rotation is under
// way, else KEY); one that recorded none yet is not.
func TestMachineKeyStale(t *testing.T) {
	rotating := instanceKeys{current: "k", currentFP: "SHA256:old", next: "n", nextFP: "SHA256:new"}
	settled := instanceKeys{current: "k", currentFP: "SHA256:new"}
	for _, c := range []struct {
		recorded string
		keys     instanceKeys
		stale    bool
	}{
		{"", rotating, false},
		{"SHA256:old", rotating, true},
		{"SHA256:new", rotating, false},
		{"SHA256:new", settled, false},
		{"SHA256:old", settled, true},
	} {
		wi := &wsuv1.WindowsInstance{}
		wi.Status.Identity.KeyFingerprint = c.recorded
		assert.Equal(t, c.stale, machineKeyStale(wi, c.keys), "recorded %q, user data %s", c.recorded, c.keys.userDataFP())
	}
}
