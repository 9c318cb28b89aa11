package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/test/kubetest"
)

// schemalessCRD is a cluster-scoped CRD that keeps whatever it is given,
// enough to stand in for OpenShift's types.
func schemalessCRD(gvr schema.GroupVersionResource, kind string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: gvr.Resource + "." + gvr.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvr.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: gvr.Resource, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvr.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}},
			}},
		},
	}
}

func createObject(t *testing.T, dc dynamic.Interface, gvr schema.GroupVersionResource, kind, name string, fields map[string]any) {
	t.Helper()
	obj := map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name},
	}
	for k, v := range fields {
		obj[k] = v
	}
	_, err := dc.Resource(gvr).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	require.NoError(t, err, "creating %s %s", kind, name)
}

// machineConfig is a rendered MachineConfig whose kubelet runs with flags.
func machineConfig(t *testing.T, flags string) map[string]any {
	t.Helper()
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(ignFixture(t, "machineconfig-3.2.json"), &cfg))
	units := cfg["systemd"].(map[string]any)["units"].([]any)
	units[0].(map[string]any)["contents"] = "[Service]\nExecStart=/usr/bin/kubelet " + flags + "\n"
	return map[string]any{"spec": map[string]any{"config": cfg}}
}

func TestIgnitionFromMachineConfig(t *testing.T) {
	c := kubetest.Start(t)
	require.NoError(t, c.InstallCRDs(
		schemalessCRD(kube.MachineConfigGVR, "MachineConfig"),
		schemalessCRD(kube.ControllerConfigGVR, "ControllerConfig"),
	))
	cl, err := kube.NewClient(c.Config, "test")
	require.NoError(t, err)
	m := Ignition{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{"source": cty.StringVal("machineconfig"), "kubeconfig": cty.StringVal(c.Kubeconfig)})

	fail := func(want string) {
		t.Helper()
		resp := m.Plan(ctx, modules.PlanRequest{Config: cfg})
		require.True(t, resp.Diagnostics.HasErrors(), "want an error about %s", want)
		assert.Contains(t, resp.Diagnostics[0].Detail, want)
		checkResult(t, m, resp.Result)
	}
	fail("no rendered-worker-* MachineConfig")

	// The MCO renders a new config for every change; the newest wins.
	// Creation timestamps have one-second resolution.
	createObject(t, cl.Dynamic, kube.MachineConfigGVR, "MachineConfig", "rendered-worker-aaa", machineConfig(t, "--cloud-provider=aws --v=2"))
	time.Sleep(1100 * time.Millisecond)
	createObject(t, cl.Dynamic, kube.MachineConfigGVR, "MachineConfig", "rendered-worker-bbb",
		machineConfig(t, "--cloud-provider=vsphere --cloud-config=/etc/kubernetes/cloud.conf --v=${LEVEL}"))
	time.Sleep(1100 * time.Millisecond)
	createObject(t, cl.Dynamic, kube.MachineConfigGVR, "MachineConfig", "rendered-master-ccc", machineConfig(t, "--v=9"))
	createObject(t, cl.Dynamic, kube.MachineConfigGVR, "MachineConfig", "99-worker-ssh", machineConfig(t, "--v=8"))
	createObject(t, cl.Dynamic, kube.MachineConfigGVR, "MachineConfig", "rendered-worker-empty", map[string]any{"spec": map[string]any{}})
	fail("ControllerConfig machine-config-controller")

	kubeletCA := "-----BEGIN CERTIFICATE-----\nkubelet-ca\n-----END CERTIFICATE-----\n"
	createObject(t, cl.Dynamic, kube.ControllerConfigGVR, "ControllerConfig", "machine-config-controller", map[string]any{
		"spec": map[string]any{"kubeAPIServerServingCAData": base64.StdEncoding.EncodeToString([]byte(kubeletCA))}})
	fail("openshift-machine-config-operator/node-bootstrapper-token")

	require.NoError(t, c.EnsureNamespace(ctx, kube.MCONamespace))
	_, err = c.Client.CoreV1().Secrets(kube.MCONamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kube.NodeBootstrapperSecret, Namespace: kube.MCONamespace},
		Data:       map[string][]byte{"token": []byte("sa-token"), "ca.crt": []byte("api CA")},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	resp := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	assert.Nil(t, resp.Change, "a read never plans a change")
	checkResult(t, m, resp.Result)
	require.True(t, resp.Result.IsWhollyKnown())
	r := resp.Result.AsValueMap()
	assert.Equal(t, "MachineConfig rendered-worker-bbb", r["from"].AsString())
	assert.Equal(t, "3.2.0", r["spec_version"].AsString())
	assert.Equal(t, kubeletCA, r["kubelet_ca"].AsString())
	assert.Equal(t, "vsphere", r["cloud_provider"].AsString())
	assert.Equal(t, "cloud.conf", r["cloud_config_name"].AsString())
	assert.Equal(t, string(ignFixture(t, "want-cloud-vsphere.conf")), r["cloud_config"].AsString())
	assert.True(t, r["kubelet_verbosity"].IsNull(), "${LEVEL} comes from a file wsu cannot read")
	server, ca, token := kubeconfigParts(t, r["bootstrap_kubeconfig"].AsString())
	assert.Equal(t, strings.TrimSuffix(c.Config.Host, "/"), strings.TrimSuffix(server, "/"), "no Infrastructure: the URL wsu talks to")
	assert.Equal(t, []byte("api CA"), ca)
	assert.Equal(t, "sa-token", token)
	assert.Equal(t, server, r["api_server"].AsString(), "hybrid-overlay-node's --k8s-apiserver: the bootstrap kubeconfig's")
	assert.Equal(t, "api CA", r["api_ca"].AsString(), "and its CA (bootstrap-ca.crt)")

	// With the Infrastructure object, nodes get the internal API URL.
	require.NoError(t, c.InstallCRDs(schemalessCRD(kube.InfrastructureGVR, "Infrastructure")))
	createObject(t, cl.Dynamic, kube.InfrastructureGVR, "Infrastructure", "cluster", map[string]any{
		"status": map[string]any{"apiServerInternalURI": "https://api-int.c.example.com:6443"}})
	resp = m.Plan(ctx, modules.PlanRequest{Config: cfg})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	server, _, _ = kubeconfigParts(t, resp.Result.GetAttr("bootstrap_kubeconfig").AsString())
	assert.Equal(t, "https://api-int.c.example.com:6443", server)

	// An explicit api_server wins.
	explicit := cfgFor(t, m, map[string]cty.Value{"source": cty.StringVal("machineconfig"), "kubeconfig": cty.StringVal(c.Kubeconfig),
		"api_server": cty.StringVal("https://10.0.0.1:6443")})
	resp = m.Plan(ctx, modules.PlanRequest{Config: explicit})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	server, _, _ = kubeconfigParts(t, resp.Result.GetAttr("bootstrap_kubeconfig").AsString())
	assert.Equal(t, "https://10.0.0.1:6443", server)
}
