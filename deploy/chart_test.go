package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wsu-project/wsu/test/helmtool"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestChart generates the Helm chart from the kustomize renders and
// compares it with the checked-in deploy/helm/wsu, file by file (make
// chart rewrites it).
func TestChart(t *testing.T) {
	got, err := ChartFiles(".")
	require.NoError(t, err)
	if *update {
		require.NoError(t, WriteChart(".", got))
		return
	}
	want, err := ChartOnDisk(".")
	require.NoError(t, err)
	require.NotEmpty(t, want, "no chart in deploy/%s: run make chart", ChartDir)
	for name, data := range got {
		assert.Equal(t, string(want[name]), string(data), "deploy/%s/%s is stale: run make chart", ChartDir, name)
	}
	for name := range want {
		assert.Contains(t, got, name, "deploy/%s/%s is no longer generated: run make chart", ChartDir, name)
	}
}

// helmTemplate renders the checked-in chart with the real helm into
// objects, as helm install would apply them.
func helmTemplate(t *testing.T, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "wsu", ChartDir, "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return decodeObjects(t, runHelm(t, args...))
}

func runHelm(t *testing.T, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helmtool.Binary(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	require.NoError(t, cmd.Run(), "helm %s:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.Bytes()
}

// kustomizeObjects renders a kustomization (relative to deploy/) into
// objects.
func kustomizeObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	out, err := Render(dir, dir)
	require.NoError(t, err)
	return decodeObjects(t, out)
}

// byKey indexes objects by kind/namespace/name; the chart's one addition
// to an object (helm uninstall keeps the CRD) is taken off, after checking
// it is there.
func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, u := range objs {
		u = u.DeepCopy()
		ann := u.GetAnnotations()
		if _, ok := ann[HelmKeepAnnotation]; ok {
			delete(ann, HelmKeepAnnotation)
			if len(ann) == 0 {
				ann = nil
			}
			u.SetAnnotations(ann)
		}
		k := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		require.NotContains(t, out, k, "two objects %s", k)
		out[k] = u.Object
	}
	return out
}

func keys(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// assertEquivalent compares two installs object by object, parsed: the
// same objects, each with the same content (RBAC rules, Deployment spec).
func assertEquivalent(t *testing.T, want, got map[string]map[string]any) {
	t.Helper()
	assert.Equal(t, keys(want), keys(got), "the same objects")
	for k, w := range want {
		if g, ok := got[k]; ok {
			assert.Equal(t, w, g, "%s differs", k)
		}
	}
}

// TestChartHelm runs the real helm (helmtool: built from the Go module
// proxy, cached) on the checked-in chart: helm lint passes, and helm
// template with each run mode and option renders what the matching
// kustomize render applies, compared as parsed objects.
func TestChartHelm(t *testing.T) {
	t.Run("lint", func(t *testing.T) {
		for _, set := range [][]string{nil, {"runMode=job", "serviceMonitor.enabled=true", "namespace.create=true"}} {
			args := []string{"lint", "--strict", ChartDir}
			for _, s := range set {
				args = append(args, "--set", s)
			}
			out := runHelm(t, args...)
			assert.Contains(t, string(out), "0 chart(s) failed", "%s", out)
		}
	})
	t.Run("lint refuses a bad value", func(t *testing.T) {
		cmd := exec.Command(helmtool.Binary(t), "lint", ChartDir, "--set", "runMode=sometimes")
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%s", out)
		assert.Contains(t, string(out), "runMode")
	})

	kubernetes := byKey(t, kustomizeObjects(t, "overlays/kubernetes"))
	t.Run("defaults are the kubernetes overlay but its Namespace", func(t *testing.T) {
		want := map[string]map[string]any{}
		for k, v := range kubernetes {
			if !strings.HasPrefix(k, "Namespace/") {
				want[k] = v
			}
		}
		require.Len(t, want, len(kubernetes)-1, "the overlay has one Namespace")
		assertEquivalent(t, want, byKey(t, helmTemplate(t, KubernetesNamespace)))
	})
	t.Run("namespace.create is the kubernetes overlay", func(t *testing.T) {
		assertEquivalent(t, kubernetes, byKey(t, helmTemplate(t, KubernetesNamespace, "namespace.create=true")))
	})
	t.Run("runMode job is the kubernetes-job-mode overlay", func(t *testing.T) {
		assertEquivalent(t, byKey(t, kustomizeObjects(t, "overlays/kubernetes-job-mode")),
			byKey(t, helmTemplate(t, KubernetesNamespace, "namespace.create=true", "runMode=job")))
	})
	t.Run("serviceMonitor is the prometheus component", func(t *testing.T) {
		prom, err := renderWithComponent(".", chartSource, "components/prometheus")
		require.NoError(t, err)
		var text bytes.Buffer
		for _, o := range prom {
			data, err := json.Marshal(o.obj)
			require.NoError(t, err)
			text.Write(append(data, '\n'))
		}
		assertEquivalent(t, byKey(t, decodeObjects(t, text.Bytes())),
			byKey(t, helmTemplate(t, KubernetesNamespace, "namespace.create=true", "serviceMonitor.enabled=true")))
	})
	t.Run("the release namespace", func(t *testing.T) {
		objs := helmTemplate(t, "windows-nodes", "namespace.create=true", "runMode=job")
		require.NotEmpty(t, objs)
		for _, u := range objs {
			data, err := u.MarshalJSON()
			require.NoError(t, err)
			assert.NotContains(t, string(data), KubernetesNamespace, "%s %s", u.GetKind(), u.GetName())
			switch ns := u.GetNamespace(); ns {
			case "", "windows-nodes", "kube-system", "kube-public":
			default:
				t.Errorf("%s %s in %s", u.GetKind(), u.GetName(), ns)
			}
			if u.GetKind() == "Namespace" {
				assert.Equal(t, "windows-nodes", u.GetName())
			}
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, s := range subjects {
				s := s.(map[string]any)
				if s["kind"] == "ServiceAccount" && strings.HasPrefix(fmt.Sprint(s["name"]), "wsu-") {
					assert.Equal(t, "windows-nodes", s["namespace"], "%s %s binds %v", u.GetKind(), u.GetName(), s)
				}
			}
		}
	})
	t.Run("values an admin sets", testChartValues)
}

func testChartValues(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	objs := helmTemplate(t, KubernetesNamespace,
		"runMode=job",
		"image.registry=registry.example.com", "image.repository=wsu/wsu", "image.digest="+digest, "image.pullPolicy=Always",
		"payloadImage.registry=registry.example.com", "payloadImage.repository=wsu/payload", "payloadImage.tag=1.31.2",
		"resources.requests.cpu=250m", "resources.limits.memory=2Gi",
		"controller.defaultApproval=Manual", "controller.configMap=", "controller.byohNamespace=byoh",
		"controller.maxConcurrentRuns=4", "controller.maxUnavailable=25%", "controller.driftInterval=30m",
		"controller.allowPlaybookConfigMaps=true", "controller.allowedJumpHosts={bastion.example.com,admin@jump:2222}",
		"controller.vars.network=flannel", "controller.hostVars.ansible_port=2222",
		"controller.extraArgs={--payload-check=5m}",
		"controller.metricsBindAddress=0",
	)
	var dep, tmpl *unstructured.Unstructured
	for _, u := range objs {
		switch {
		case u.GetKind() == "Deployment" && u.GetName() == "wsu-controller":
			dep = u
		case u.GetKind() == "ConfigMap" && u.GetName() == "wsu-job-template":
			tmpl = u
		}
	}
	require.NotNil(t, dep)
	require.NotNil(t, tmpl)
	image := "registry.example.com/wsu/wsu@" + digest
	payload := "registry.example.com/wsu/payload:1.31.2"

	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	require.Len(t, cs, 1)
	c := cs[0].(map[string]any)
	assert.Equal(t, image, c["image"])
	assert.Equal(t, "Always", c["imagePullPolicy"])
	assert.Equal(t, map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "128Mi"}, "limits": map[string]any{"memory": "2Gi"}}, c["resources"])
	var args []string
	for _, a := range c["args"].([]any) {
		args = append(args, a.(string))
	}
	for _, want := range []string{
		"--metrics-bind-address=0", "--run-mode=job", "--job-image=" + image,
		"--default-approval=Manual", "--configmap=", "--byoh-namespace=byoh",
		"--max-concurrent-runs=4", "--max-unavailable=25%", "--drift-interval=30m",
		"--allow-playbook-configmaps", "--allowed-jump-hosts=bastion.example.com,admin@jump:2222",
		"--var=network=flannel", "--host-var=ansible_port=2222", "--payload-check=5m",
	} {
		assert.Contains(t, args, want)
	}
	assert.NotContains(t, args, "--metrics-bind-address=:8443")

	inits, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "initContainers")
	require.Len(t, inits, 1)
	assert.Equal(t, payload, inits[0].(map[string]any)["image"])
	assert.Equal(t, "IfNotPresent", inits[0].(map[string]any)["imagePullPolicy"], "a version tag")

	data, _, _ := unstructured.NestedString(tmpl.Object, "data", "template.yaml")
	assert.Contains(t, data, "image: "+payload+"\n    imagePullPolicy: IfNotPresent\n", "the Jobs' payload image")

	// A latest tag is pulled every time, unless pullPolicy says otherwise.
	for set, want := range map[string]string{"": "Always", "payloadImage.pullPolicy=Never": "Never"} {
		args := []string{"runMode=job", "payloadImage.tag=latest"}
		if set != "" {
			args = append(args, set)
		}
		for _, u := range helmTemplate(t, KubernetesNamespace, args...) {
			if u.GetKind() == "ConfigMap" && u.GetName() == "wsu-job-template" {
				data, _, _ := unstructured.NestedString(u.Object, "data", "template.yaml")
				assert.Contains(t, data, "imagePullPolicy: "+want, set)
			}
			if u.GetKind() == "Deployment" {
				inits, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "initContainers")
				assert.Equal(t, want, inits[0].(map[string]any)["imagePullPolicy"], set)
				cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				assert.Equal(t, "IfNotPresent", cs[0].(map[string]any)["imagePullPolicy"], "the wsu image keeps its version tag")
			}
		}
	}

	// Nothing names the default images any more.
	all := runHelm(t, "template", "wsu", ChartDir, "--set", "runMode=job",
		"--set", "image.registry=registry.example.com", "--set", "payloadImage.registry=registry.example.com")
	assert.NotContains(t, string(all), ImageRepository)
	assert.NotContains(t, string(all), PayloadImageRepository)
}

// TestImagesPinned: every image deploy/ names — containers', the Job
// mode's --job-image and the Jobs' pod template — in every rendered
// overlay and in the chart's default render (Job mode) is the release's,
// tagged with the version, never a mutable :latest or a localhost name.
func TestImagesPinned(t *testing.T) {
	wsu := ImageRepository + ":" + ImageTag()
	payload := PayloadImageRepository + ":" + ImageTag()
	assert.Regexp(t, `^v\d+\.\d+\.\d+`, ImageTag())
	imageRE := regexp.MustCompile(`(?m)(?:image: |--job-image=)(\S+)`)
	renders := map[string][]byte{}
	for _, o := range Overlays() {
		data, err := os.ReadFile(filepath.Join("rendered", o.Name+".yaml"))
		require.NoError(t, err)
		renders[o.Name] = data
	}
	renders["helm runMode=job"] = runHelm(t, "template", "wsu", ChartDir, "--set", "runMode=job")
	for name, data := range renders {
		refs := imageRE.FindAllStringSubmatch(string(data), -1)
		if strings.Contains(string(data), "containers:") { // not RBAC alone (openshift-cluster-api)
			require.NotEmpty(t, refs, name)
		}
		for _, m := range refs {
			assert.Contains(t, []string{wsu, payload}, m[1], "%s names %s", name, m[1])
		}
	}
}

// TestHelmInstall installs the chart with the real helm into the test
// bed's kube-apiserver as docs/install.md says (the namespace first), in
// Job mode: every object the chart renders is there, owned by the
// release; an upgrade to in-process runs takes Job mode's objects away;
// helm uninstall deletes the rest but the CRD (helm.sh/resource-policy:
// keep), so the WindowsInstances survive it.
func TestHelmInstall(t *testing.T) {
	ctx := context.Background()
	c := kubetest.Start(t)
	require.NoError(t, c.EnsureNamespace(ctx, KubernetesNamespace))
	a := newApplier(t, c.Config)
	helm := func(args ...string) {
		runHelm(t, append(args, "--kubeconfig", c.Kubeconfig, "--namespace", KubernetesNamespace)...)
	}
	get := func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		gvk := u.GroupVersionKind()
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s", gvk)
		ri := a.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			return ri.Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
		}
		return ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	}

	helm("install", "wsu", ChartDir, "--set", "runMode=job")
	jobMode := helmTemplate(t, KubernetesNamespace, "runMode=job")
	for _, u := range jobMode {
		got, err := get(u)
		if assert.NoError(t, err, "%s %s/%s installed", u.GetKind(), u.GetNamespace(), u.GetName()) {
			assert.Equal(t, "wsu", got.GetAnnotations()["meta.helm.sh/release-name"], "%s %s owned by the release", u.GetKind(), u.GetName())
		}
	}

	helm("upgrade", "wsu", ChartDir, "--set", "runMode=in-process")
	inProcess := byKey(t, helmTemplate(t, KubernetesNamespace))
	for _, u := range jobMode {
		_, err := get(u)
		if _, ok := inProcess[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()]; ok {
			assert.NoError(t, err, "%s %s kept", u.GetKind(), u.GetName())
		} else {
			assert.True(t, apierrors.IsNotFound(err), "%s %s (Job mode only) deleted by the upgrade: %v", u.GetKind(), u.GetName(), err)
		}
	}
	dep, err := c.Client.AppsV1().Deployments(KubernetesNamespace).Get(ctx, "wsu-controller", metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotContains(t, dep.Spec.Template.Spec.Containers[0].Args, "--run-mode=job")

	helm("uninstall", "wsu")
	for _, u := range jobMode {
		_, err := get(u)
		if u.GetKind() == "CustomResourceDefinition" {
			assert.NoError(t, err, "helm uninstall keeps the CRD")
			continue
		}
		// Deletion is immediate for all of these: none has a finalizer.
		assert.True(t, apierrors.IsNotFound(err), "%s %s deleted by helm uninstall: %v", u.GetKind(), u.GetName(), err)
	}
}
