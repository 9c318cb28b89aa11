package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/kubetest"
)

func mirrorSet(t *testing.T, dc dynamic.Interface, gvr schema.GroupVersionResource, kind, name, field string, entries ...map[string]any) {
	t.Helper()
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = e
	}
	_, err := dc.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name}, "spec": map[string]any{field: list},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func mirrorObj(source string, resolve, never bool, mirrors ...string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"source": cty.StringVal(source), "mirrors": strList(mirrors),
		"resolve_tags": cty.BoolVal(resolve), "never_contact_source": cty.BoolVal(never),
	})
}

// TestOpenShiftConfigModules runs k8s_image_mirrors, k8s_trusted_ca and
// k8s_proxy against a real API server, before and after the OpenShift CRDs
// exist.
func TestOpenShiftConfigModules(t *testing.T) {
	// Its own cluster: the OpenShift CRDs must not leak into other tests.
	c := kubetest.Start(t)
	mirrors := ImageMirrors{testClusters}
	trusted := TrustedCA{testClusters}
	proxyMod := Proxy{testClusters}
	mcfg := kcfg(t, c, mirrors, nil)
	tcfg := kcfg(t, c, trusted, nil)
	pcfg := kcfg(t, c, proxyMod, nil)
	nullProxy := func(t *testing.T, res cty.Value) {
		t.Helper()
		for _, k := range []string{"http_proxy", "https_proxy", "no_proxy"} {
			assert.True(t, res.GetAttr(k).IsNull(), "%s: no proxy, nothing set", k)
		}
	}

	t.Run("not OpenShift", func(t *testing.T) {
		_, res := converge(t, mirrors, mcfg)
		assert.Equal(t, cty.ListValEmpty(mirrorType), res.GetAttr("mirrors"))
		assert.Contains(t, res.GetAttr("reason").AsString(), "serves neither")
		_, res = converge(t, trusted, tcfg)
		assert.Equal(t, cty.StringVal(""), res.GetAttr("bundle"))
		assert.Contains(t, res.GetAttr("reason").AsString(), "does not serve proxies")
		_, res = converge(t, proxyMod, pcfg)
		nullProxy(t, res)
		assert.Contains(t, res.GetAttr("reason").AsString(), "does not serve proxies")
	})

	require.NoError(t, c.InstallCRDFiles("testdata/openshift-config-crds.yaml"))
	dc, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)

	t.Run("no mirror sets, no proxy", func(t *testing.T) {
		_, res := converge(t, mirrors, mcfg)
		assert.Equal(t, cty.ListValEmpty(mirrorType), res.GetAttr("mirrors"))
		assert.Equal(t, "0 mirror entries from 0 ImageDigestMirrorSets and 0 ImageTagMirrorSets", res.GetAttr("reason").AsString())
		_, res = converge(t, trusted, tcfg)
		assert.Equal(t, cty.StringVal(""), res.GetAttr("bundle"))
		assert.Contains(t, res.GetAttr("reason").AsString(), "there is no proxy.config.openshift.io/cluster")
		_, res = converge(t, proxyMod, pcfg)
		nullProxy(t, res)
		assert.Contains(t, res.GetAttr("reason").AsString(), "there is no proxy.config.openshift.io/cluster")
	})

	t.Run("mirror sets", func(t *testing.T) {
		mirrorSet(t, dc, itmsGVR, "ImageTagMirrorSet", "a-tags", "imageTagMirrors",
			map[string]any{"source": "mcr.microsoft.com/oss/kubernetes/pause", "mirrors": []any{"mirror.local:5000/win/oss/kubernetes/pause"}})
		mirrorSet(t, dc, idmsGVR, "ImageDigestMirrorSet", "b-digests", "imageDigestMirrors",
			map[string]any{"source": "quay.io/org/img", "mirrors": []any{"mirror.local:5000/org/img"}, "mirrorSourcePolicy": "NeverContactSource"})
		mirrorSet(t, dc, idmsGVR, "ImageDigestMirrorSet", "a-digests", "imageDigestMirrors",
			map[string]any{"source": "registry.local/x", "mirrors": []any{"m1.local/x", "m2.local/x"}},
			map[string]any{"source": "registry.local/y", "mirrors": []any{"m1.local/y"}, "mirrorSourcePolicy": "AllowContactingSource"})
		p := plan(t, mirrors, mcfg)
		require.Empty(t, p.Diagnostics)
		require.Nil(t, p.Change, "reading never changes anything")
		assert.Equal(t, cty.ListVal([]cty.Value{
			mirrorObj("registry.local/x", false, false, "m1.local/x", "m2.local/x"),
			mirrorObj("registry.local/y", false, false, "m1.local/y"),
			mirrorObj("quay.io/org/img", false, true, "mirror.local:5000/org/img"),
			mirrorObj("mcr.microsoft.com/oss/kubernetes/pause", true, false, "mirror.local:5000/win/oss/kubernetes/pause"),
		}), p.Result.GetAttr("mirrors"))
		assert.Equal(t, "4 mirror entries from 2 ImageDigestMirrorSets and 1 ImageTagMirrorSets; no registry credentials: there is no Secret openshift-config/pull-secret", p.Result.GetAttr("reason").AsString())
	})

	// The mirrors' credentials from the cluster's pull secret: only the
	// mirror hosts' entries, sensitive, nothing of them in the reason.
	t.Run("pull secret", func(t *testing.T) {
		for _, r := range mirrors.Schema().Results {
			assert.Equal(t, r.Name == "auths", r.Sensitive, "%s: only the credentials are sensitive", r.Name)
		}
		_, res := converge(t, mirrors, mcfg)
		assert.Equal(t, cty.MapValEmpty(cty.String), res.GetAttr("auths"))
		assert.Contains(t, res.GetAttr("reason").AsString(), "no registry credentials: there is no Secret openshift-config/pull-secret")

		require.NoError(t, c.EnsureNamespace(ctx, kube.PullSecretNamespace))
		const mirrorAuth = "bWlycm9yOnMzY3JldA==" // mirror:s3cret
		pull := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: kube.PullSecretName, Namespace: kube.PullSecretNamespace},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{` +
				`"mirror.local:5000":{"auth":"` + mirrorAuth + `"},` +
				`"m1.local":{"username":"u","password":"p@ss"},` +
				`"quay.io":{"auth":"cXVheTpub3QtZm9yLXRoZS1ub2Rl"},` +
				`"registry.local":{"auth":"c291cmNlOm5vdC1hLW1pcnJvcg=="}}}`)},
		}
		_, err := c.Client.CoreV1().Secrets(kube.PullSecretNamespace).Create(ctx, pull, metav1.CreateOptions{})
		require.NoError(t, err)
		p := plan(t, mirrors, mcfg)
		require.Empty(t, p.Diagnostics)
		require.Nil(t, p.Change, "reading never changes anything")
		assert.Equal(t, cty.MapVal(map[string]cty.Value{
			"mirror.local:5000": cty.StringVal(mirrorAuth),
			"m1.local":          cty.StringVal("dTpwQHNz"), // u:p@ss
		}), p.Result.GetAttr("auths"), "the mirror hosts' entries only: not quay.io, not a source registry")
		reason := p.Result.GetAttr("reason").AsString()
		assert.Contains(t, reason, "credentials for m1.local, mirror.local:5000 from openshift-config/pull-secret")
		assert.NotContains(t, reason, mirrorAuth)

		off := kcfg(t, c, mirrors, map[string]cty.Value{"pull_secret": cty.StringVal("")})
		_, res = converge(t, mirrors, off)
		assert.Equal(t, cty.MapValEmpty(cty.String), res.GetAttr("auths"), `pull_secret = "" reads none`)

		bad := kcfg(t, c, mirrors, map[string]cty.Value{"pull_secret": cty.StringVal("pull-secret")})
		requireDiag(t, plan(t, mirrors, bad).Diagnostics, bad, "Invalid pull_secret", "pull_secret")

		pull.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths": "` + mirrorAuth + `"}`)
		_, err = c.Client.CoreV1().Secrets(kube.PullSecretNamespace).Update(ctx, pull, metav1.UpdateOptions{})
		require.NoError(t, err)
		d := requireDiag(t, plan(t, mirrors, mcfg).Diagnostics, mcfg, "Cannot read the pull secret", "pull_secret")
		assert.Contains(t, d.Detail, "is not a docker config")
		assert.NotContains(t, d.Detail, mirrorAuth, "a bad Secret's content is not quoted")
		require.NoError(t, c.Client.CoreV1().Secrets(kube.PullSecretNamespace).Delete(ctx, kube.PullSecretName, metav1.DeleteOptions{}))
	})

	t.Run("trusted CA", func(t *testing.T) {
		proxy := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
			"metadata": map[string]any{"name": "cluster"}, "spec": map[string]any{},
		}}
		_, err := dc.Resource(proxyGVR).Create(ctx, proxy, metav1.CreateOptions{})
		require.NoError(t, err)
		_, res := converge(t, trusted, tcfg)
		assert.Contains(t, res.GetAttr("reason").AsString(), "has no spec.trustedCA.name")

		cur, err := dc.Resource(proxyGVR).Get(ctx, "cluster", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(cur.Object, "user-ca-bundle", "spec", "trustedCA", "name"))
		_, err = dc.Resource(proxyGVR).Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		d := requireDiag(t, plan(t, trusted, tcfg).Diagnostics, tcfg, "Cannot read the trusted CA bundle", "kubeconfig")
		assert.Contains(t, d.Detail, "openshift-config/user-ca-bundle")

		require.NoError(t, c.EnsureNamespace(ctx, TrustedCANamespace))
		_, err = c.Client.CoreV1().ConfigMaps(TrustedCANamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "user-ca-bundle"}, Data: map[string]string{"other": "x"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		d = requireDiag(t, plan(t, trusted, tcfg).Diagnostics, tcfg, "Cannot read the trusted CA bundle", "kubeconfig")
		assert.Contains(t, d.Detail, "has no ca-bundle.crt")

		const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
		_, err = c.Client.CoreV1().ConfigMaps(TrustedCANamespace).Update(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "user-ca-bundle"}, Data: map[string]string{"ca-bundle.crt": pem}}, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, res = converge(t, trusted, tcfg)
		assert.Equal(t, cty.StringVal(pem), res.GetAttr("bundle"))
		assert.Equal(t, cty.StringVal("openshift-config/user-ca-bundle"), res.GetAttr("configmap"))
	})

	t.Run("proxy", func(t *testing.T) {
		cur, err := dc.Resource(proxyGVR).Get(ctx, "cluster", metav1.GetOptions{})
		require.NoError(t, err)
		p := plan(t, proxyMod, pcfg)
		require.Empty(t, p.Diagnostics)
		require.Nil(t, p.Change, "reading never changes anything")
		for _, k := range []string{"http_proxy", "https_proxy", "no_proxy"} {
			assert.Equal(t, cty.StringVal(""), p.Result.GetAttr(k), "%s: a Proxy without a proxy sets none", k)
		}

		require.NoError(t, unstructured.SetNestedField(cur.Object, "http://spec-proxy:3128", "spec", "httpProxy"))
		cur, err = dc.Resource(proxyGVR).Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, res := converge(t, proxyMod, pcfg)
		assert.Equal(t, cty.StringVal("http://spec-proxy:3128"), res.GetAttr("http_proxy"), "the spec while the status holds nothing")
		assert.Contains(t, res.GetAttr("reason").AsString(), "cluster spec")

		require.NoError(t, unstructured.SetNestedMap(cur.Object, map[string]any{
			"httpProxy": "http://proxy.local:3128", "httpsProxy": "http://proxy.local:3129", "noProxy": ".cluster.local,10.0.0.0/16",
		}, "status"))
		_, err = dc.Resource(proxyGVR).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, res = converge(t, proxyMod, pcfg)
		assert.Equal(t, cty.StringVal("http://proxy.local:3128"), res.GetAttr("http_proxy"))
		assert.Equal(t, cty.StringVal("http://proxy.local:3129"), res.GetAttr("https_proxy"))
		assert.Equal(t, cty.StringVal(".cluster.local,10.0.0.0/16"), res.GetAttr("no_proxy"))
		assert.Contains(t, res.GetAttr("reason").AsString(), "cluster status", "the status the network operator made effective wins")
	})
}
