package deploy

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var (
	bundleOut           = flag.String("bundle-out", "", "make bundle-release: write the bundle here instead (with the images below)")
	bundleImage         = flag.String("bundle-image", "", "make bundle-release: the wsu image's registry/repository")
	bundlePayloadImage  = flag.String("bundle-payload-image", "", "make bundle-release: the payload image's registry/repository")
	bundleImageDigest   = flag.String("bundle-image-digest", "", "make bundle-release: the wsu image's digest")
	bundlePayloadDigest = flag.String("bundle-payload-image-digest", "", "make bundle-release: the payload image's digest")
)

// TestBundle generates the OLM bundle from the openshift render and
// compares it with the checked-in deploy/olm, file by file (make bundle
// rewrites it; make bundle-release writes a release's, by digest,
// elsewhere).
func TestBundle(t *testing.T) {
	if *bundleOut != "" {
		got, err := BundleFiles(".", BundleOptions{
			ImageRepository: *bundleImage, PayloadImageRepository: *bundlePayloadImage,
			ImageDigest: *bundleImageDigest, PayloadImageDigest: *bundlePayloadDigest,
		})
		require.NoError(t, err)
		for name, data := range got {
			p := filepath.Join(*bundleOut, name)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, data, 0o644))
		}
		return
	}
	got, err := BundleFiles(".", BundleOptions{})
	require.NoError(t, err)
	if *update {
		require.NoError(t, WriteBundle(".", got))
		return
	}
	want, err := BundleOnDisk(".")
	require.NoError(t, err)
	require.NotEmpty(t, want, "no bundle in deploy/%s: run make bundle", OLMDir)
	for name, data := range got {
		assert.Equal(t, string(want[name]), string(data), "deploy/%s/%s is stale: run make bundle", OLMDir, name)
	}
	for name := range want {
		assert.Contains(t, got, name, "deploy/%s/%s is no longer generated: run make bundle", OLMDir, name)
	}
}

// csvOnDisk is the checked-in CSV, parsed.
func csvOnDisk(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(OLMDir, "bundle/manifests", BundlePackage+".clusterserviceversion.yaml"))
	require.NoError(t, err, "run make bundle")
	objs := decodeObjects(t, data)
	require.Len(t, objs, 1)
	require.Equal(t, "ClusterServiceVersion", objs[0].GetKind())
	return objs[0]
}

func nested(t *testing.T, obj map[string]any, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(obj, path...)
	require.NoError(t, err)
	require.True(t, ok, "no %s", strings.Join(path, "."))
	return v
}

// TestBundleEquivalent reads the checked-in OLM bundle and the checked-in
// openshift render (what oc apply -k applies) and checks, parsed, that an
// OLM install is the same install: the CSV's deployment spec is the
// render's Deployment spec; each ServiceAccount's permissions and
// clusterPermissions are the rules of the Roles and ClusterRoles the
// render binds to it, in its namespace and cluster-wide; every other
// object of the render is in the bundle's manifests (namespace taken off)
// or in outside-bundle.yaml, unchanged; relatedImages names every image
// the Deployment runs.
func TestBundleEquivalent(t *testing.T) {
	data, err := os.ReadFile("rendered/openshift.yaml")
	require.NoError(t, err)
	render := decodeObjects(t, data)
	csv := csvOnDisk(t)
	ns := OpenShiftNamespace

	byKind := map[string][]*unstructured.Unstructured{}
	index := map[string]*unstructured.Unstructured{}
	for _, u := range render {
		byKind[u.GetKind()] = append(byKind[u.GetKind()], u)
		index[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u
	}

	t.Run("deployment spec", func(t *testing.T) {
		deps := nested(t, csv.Object, "spec", "install", "spec", "deployments").([]any)
		require.Len(t, deps, 1)
		d := deps[0].(map[string]any)
		want := index["Deployment/"+ns+"/wsu-controller"]
		require.NotNil(t, want)
		assert.Equal(t, "wsu-controller", d["name"])
		assert.Equal(t, want.Object["spec"], d["spec"])
		assert.Equal(t, nested(t, want.Object, "metadata", "labels"), d["label"])
		assert.Equal(t, "deployment", nested(t, csv.Object, "spec", "install", "strategy"))
	})

	// The render's rules per ServiceAccount of ns, from its bindings.
	wantPerms := map[string][]any{}
	wantCluster := map[string][]any{}
	boundToOthers := map[string]bool{}
	for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
		for _, b := range byKind[kind] {
			ref := b.Object["roleRef"].(map[string]any)
			roleNS := ""
			if ref["kind"] == "Role" {
				roleNS = b.GetNamespace()
			}
			roleKey := fmt.Sprintf("%s/%s/%s", ref["kind"], roleNS, ref["name"])
			role := index[roleKey]
			require.NotNil(t, role, "%s binds %s", b.GetName(), roleKey)
			ours := kind == "ClusterRoleBinding" || b.GetNamespace() == ns
			for _, s := range b.Object["subjects"].([]any) {
				m := s.(map[string]any)
				ours = ours && m["kind"] == "ServiceAccount" && m["namespace"] == ns
			}
			if !ours {
				boundToOthers[roleKey] = true
				continue
			}
			for _, s := range b.Object["subjects"].([]any) {
				sa := s.(map[string]any)["name"].(string)
				if kind == "RoleBinding" {
					wantPerms[sa] = append(wantPerms[sa], role.Object["rules"].([]any)...)
				} else {
					wantCluster[sa] = append(wantCluster[sa], role.Object["rules"].([]any)...)
				}
			}
		}
	}
	require.NotEmpty(t, wantCluster["wsu-controller"])
	require.NotEmpty(t, wantPerms["wsu-controller"])
	gotRules := func(field string) map[string][]any {
		out := map[string][]any{}
		for _, p := range nested(t, csv.Object, "spec", "install", "spec", field).([]any) {
			m := p.(map[string]any)
			sa := m["serviceAccountName"].(string)
			require.NotContains(t, out, sa, "%s lists %s twice", field, sa)
			out[sa] = m["rules"].([]any)
		}
		return out
	}
	t.Run("permissions", func(t *testing.T) {
		assert.Equal(t, wantPerms, gotRules("permissions"))
	})
	t.Run("clusterPermissions", func(t *testing.T) {
		assert.Equal(t, wantCluster, gotRules("clusterPermissions"))
	})

	t.Run("every other object, unchanged", func(t *testing.T) {
		carried := map[string]map[string]any{}
		entries, err := os.ReadDir(filepath.Join(OLMDir, "bundle/manifests"))
		require.NoError(t, err)
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(OLMDir, "bundle/manifests", e.Name()))
			require.NoError(t, err)
			for _, u := range decodeObjects(t, data) {
				if u.GetKind() == "ClusterServiceVersion" {
					continue
				}
				assert.Empty(t, u.GetNamespace(), "%s: OLM sets the namespace", e.Name())
				carried[u.GetKind()+"/"+u.GetName()] = u.Object
			}
		}
		data, err := os.ReadFile(filepath.Join(OLMDir, OutsideBundleFile))
		require.NoError(t, err)
		outside := map[string]map[string]any{}
		for _, u := range decodeObjects(t, data) {
			assert.NotEqual(t, ns, u.GetNamespace(), "%s/%s belongs in the bundle", u.GetKind(), u.GetName())
			outside[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u.Object
		}
		seen := 0
		for key, u := range index {
			switch {
			case u.GetKind() == "Namespace" || u.GetKind() == "Deployment" ||
				u.GetKind() == "ServiceAccount" && u.GetNamespace() == ns:
				continue // the CSV's namespace template, install strategy, permissions
			case (u.GetKind() == "RoleBinding" || u.GetKind() == "ClusterRoleBinding") && bindsOnlyOurs(u, ns),
				(u.GetKind() == "Role" || u.GetKind() == "ClusterRole") && !boundToOthers[key] && isBound(key, render):
				continue // in the permissions above
			}
			if o, ok := outside[key]; ok {
				assert.Equal(t, u.Object, o, "%s differs in %s", key, OutsideBundleFile)
				seen++
				continue
			}
			c, ok := carried[u.GetKind()+"/"+u.GetName()]
			if !assert.True(t, ok, "%s is neither in the bundle nor in %s", key, OutsideBundleFile) {
				continue
			}
			want := u.DeepCopy()
			want.SetNamespace("")
			assert.Equal(t, want.Object, c, "%s differs in the bundle", key)
			seen++
		}
		assert.Equal(t, len(carried)+len(outside), seen, "the bundle and %s hold only the render's objects", OutsideBundleFile)
	})

	t.Run("relatedImages", func(t *testing.T) {
		var imgs []string
		for _, r := range nested(t, csv.Object, "spec", "relatedImages").([]any) {
			imgs = append(imgs, r.(map[string]any)["image"].(string))
		}
		dep := index["Deployment/"+ns+"/wsu-controller"]
		for _, field := range []string{"containers", "initContainers"} {
			cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", field)
			for _, c := range cs {
				assert.Contains(t, imgs, c.(map[string]any)["image"])
			}
		}
	})
}

func bindsOnlyOurs(b *unstructured.Unstructured, ns string) bool {
	if b.GetKind() == "RoleBinding" && b.GetNamespace() != ns {
		return false
	}
	subjects, _ := b.Object["subjects"].([]any)
	for _, s := range subjects {
		m := s.(map[string]any)
		if m["kind"] != "ServiceAccount" || m["namespace"] != ns {
			return false
		}
	}
	return len(subjects) > 0
}

func isBound(roleKey string, render []*unstructured.Unstructured) bool {
	for _, b := range render {
		if b.GetKind() != "RoleBinding" && b.GetKind() != "ClusterRoleBinding" {
			continue
		}
		ref := b.Object["roleRef"].(map[string]any)
		ns := ""
		if ref["kind"] == "Role" {
			ns = b.GetNamespace()
		}
		if fmt.Sprintf("%s/%s/%s", ref["kind"], ns, ref["name"]) == roleKey {
			return true
		}
	}
	return false
}

// TestBundleDigests: a release's or a site's bundle (make bundle-release)
// names the images by the repositories and digests given, in the
// Deployment and in relatedImages, and refuses what is not a sha256
// digest or a bare repository.
func TestBundleDigests(t *testing.T) {
	d1 := "sha256:" + strings.Repeat("a", 64)
	d2 := "sha256:" + strings.Repeat("b", 64)
	files, err := BundleFiles(".", BundleOptions{ImageDigest: d1, PayloadImageDigest: d2})
	require.NoError(t, err)
	objs := decodeObjects(t, files["bundle/manifests/"+BundlePackage+".clusterserviceversion.yaml"])
	require.Len(t, objs, 1)
	csv := objs[0].Object
	wsu, payload := ImageRepository+"@"+d1, PayloadImageRepository+"@"+d2
	assert.Equal(t, []any{
		map[string]any{"name": "wsu", "image": wsu},
		map[string]any{"name": "wsu-payload", "image": payload},
	}, nested(t, csv, "spec", "relatedImages"))
	dep := nested(t, csv, "spec", "install", "spec", "deployments").([]any)[0].(map[string]any)
	spec := dep["spec"].(map[string]any)
	c, _, _ := unstructured.NestedSlice(spec, "template", "spec", "containers")
	i, _, _ := unstructured.NestedSlice(spec, "template", "spec", "initContainers")
	assert.Equal(t, wsu, c[0].(map[string]any)["image"])
	assert.Equal(t, payload, i[0].(map[string]any)["image"])
	assert.Equal(t, wsu, nested(t, csv, "metadata", "annotations", "containerImage"))

	_, err = BundleFiles(".", BundleOptions{ImageDigest: "latest"})
	assert.ErrorContains(t, err, "not a sha256 digest")

	// A site's own payload image, by tag: the repository changes, the
	// version tag stays; the wsu image is left as it was.
	files, err = BundleFiles(".", BundleOptions{PayloadImageRepository: "registry.example.com/wsu/wsu-payload"})
	require.NoError(t, err)
	objs = decodeObjects(t, files["bundle/manifests/"+BundlePackage+".clusterserviceversion.yaml"])
	assert.Equal(t, []any{
		map[string]any{"name": "wsu", "image": ImageRepository + ":" + ImageTag()},
		map[string]any{"name": "wsu-payload", "image": "registry.example.com/wsu/wsu-payload:" + ImageTag()},
	}, nested(t, objs[0].Object, "spec", "relatedImages"))
	_, err = BundleFiles(".", BundleOptions{ImageRepository: "registry.example.com/wsu/wsu:v1"})
	assert.ErrorContains(t, err, "without a tag or digest")
}
