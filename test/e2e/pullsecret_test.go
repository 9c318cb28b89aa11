//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/test/harness"
)

// TestMirrorCredentialsFromPullSecret runs the stock check-runtime as on
// OpenShift (cluster_flavour = "openshift"; the config.openshift.io kinds
// are the stand-in CRDs modules/kube's tests install, on the real API
// server): the cluster's ImageDigestMirrorSet becomes a hosts.toml whose
// mirror carries the pull secret's credential for the mirror's registry
// host, and no other registry's; no output of the run shows either; a
// re-run changes nothing, and a new credential changes the file.
func TestMirrorCredentialsFromPullSecret(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	ctx := context.Background()
	c := env.Cluster
	require.NoError(t, c.InstallCRDFiles("../../modules/kube/testdata/openshift-config-crds.yaml"))
	require.NoError(t, c.InstallCRDFiles("../../modules/kube/testdata/openshift-network-crds.yaml"))
	dc, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	create := func(group, resource, kind, name string, fields map[string]any) {
		t.Helper()
		obj := map[string]any{"apiVersion": group + "/v1", "kind": kind, "metadata": map[string]any{"name": name}}
		for k, v := range fields {
			obj[k] = v
		}
		g, _, _ := strings.Cut(group, "/")
		_, err := dc.Resource(schema.GroupVersionResource{Group: g, Version: "v1", Resource: resource}).
			Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
		require.NoError(t, err, "creating %s %s", kind, name)
	}
	// What check-runtime's cluster check needs of an OpenShift cluster.
	create("config.openshift.io", "networks", "Network", "cluster", map[string]any{"spec": map[string]any{"networkType": "OVNKubernetes"}})
	create("operator.openshift.io", "networks", "Network", "cluster", map[string]any{"spec": map[string]any{
		"defaultNetwork": map[string]any{"type": "OVNKubernetes", "ovnKubernetesConfig": map[string]any{"hybridOverlayConfig": map[string]any{
			"hybridClusterNetwork": []any{map[string]any{"cidr": "10.132.0.0/14", "hostPrefix": int64(23)}}}}}}})
	create("config.openshift.io", "imagedigestmirrorsets", "ImageDigestMirrorSet", "mirrors", map[string]any{"spec": map[string]any{
		"imageDigestMirrors": []any{map[string]any{"source": "quay.io/org", "mirrors": []any{"mirror.local:5000/quay/org"}}}}})
	require.NoError(t, c.EnsureNamespace(ctx, "openshift-config"))
	const mirrorAuth, quayAuth, newAuth = "bWlycm9yOnMzY3JldA==", "cXVheTpub3QtZm9yLXRoZS1ub2Rl", "bWlycm9yOm5ldy1zM2NyZXQ="
	pull := func(mirror string) map[string][]byte {
		return map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"mirror.local:5000":{"auth":"` + mirror + `"},"quay.io":{"auth":"` + quayAuth + `"}}}`)}
	}
	secrets := c.Client.CoreV1().Secrets("openshift-config")
	_, err = secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pull-secret"},
		Type: corev1.SecretTypeDockerConfigJson, Data: pull(mirrorAuth)}, metav1.CreateOptions{})
	require.NoError(t, err)

	hostsToml := func() string {
		t.Helper()
		var out []byte
		require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
			var err error
			out, err = s.ReadFile(ctx, `C:\k\containerd\registries\quay.io\hosts.toml`, 1<<20)
			return err
		}))
		return string(out)
	}
	noSecretIn := func(r *harness.Result) {
		t.Helper()
		for _, s := range []string{mirrorAuth, quayAuth, newAuth} {
			assert.NotContains(t, r.Stdout+r.Stderr, s, "a credential in the run's output")
		}
	}

	checkRuntime := []string{"apply", "check-runtime", "-var", "cluster_flavour=openshift"}
	r := run(t, env, nil, checkRuntime...)
	requireSuccess(t, r)
	noSecretIn(r)
	toml := hostsToml()
	assert.Contains(t, toml, "[host.\"https://mirror.local:5000/v2/quay\".header]\n  Authorization = \"Basic "+mirrorAuth+"\"\n",
		"the mirror's registry host has the pull secret's credential")
	assert.NotContains(t, toml, quayAuth, "the source registry's credential stays in the cluster")

	again := run(t, env, nil, checkRuntime...)
	requireSuccess(t, again)
	assert.Empty(t, again.Changed(h.Name), "a re-run changes nothing")

	cur, err := secrets.Get(ctx, "pull-secret", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Data = pull(newAuth)
	_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	r = run(t, env, nil, checkRuntime...)
	requireSuccess(t, r)
	noSecretIn(r)
	changed := strings.Join(r.Changed(h.Name), " ")
	assert.Contains(t, changed, `task["registry mirrors"]`, "a new credential rewrites the file")
	assert.Contains(t, hostsToml(), "Authorization = \"Basic "+newAuth+"\"")
}
