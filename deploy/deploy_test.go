package deploy

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/test/kubetest"
)

var update = flag.Bool("update", false, "rewrite deploy/rendered (make manifests)")

// TestRendered renders every overlay with kustomize's API and compares it
// with the checked-in deploy/rendered file (make manifests rewrites them).
func TestRendered(t *testing.T) {
	for _, o := range Overlays() {
		t.Run(o.Name, func(t *testing.T) {
			got, err := Render(o.Dir, o.Dir)
			require.NoError(t, err)
			path := filepath.Join("rendered", o.Name+".yaml")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run make manifests")
			assert.Equal(t, string(want), string(got), "%s is stale: run make manifests", path)
		})
	}
}

// warnings collects the API server's warnings (deprecated APIs, Pod
// Security violations in a workload's template, unknown fields).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// TestInstall is the install, for real: each cluster's rendered overlay
// (and the same in Job mode) and its join Job are applied server-side (as
// `kubectl apply --server-side`) to a real kube-apiserver with no warning,
// and applied again without a change; then the RBAC they grant is checked
// with the API server's own authorizer (Node,RBAC), one named case per
// question, positive and negative, for every ServiceAccount the manifests
// create (issue 26: no Secret read beyond what is named, nothing in
// kube-system's Secrets beyond create, no escalate, bind or impersonate).
// OpenShift's install applies on a cluster without openshift-cluster-api
// (not every OpenShift cluster has it); its optional part
// (ClusterAPIDir) is applied once that namespace exists, before the RBAC
// checks.
func TestInstall(t *testing.T) {
	for _, flavour := range []struct{ install, job string }{
		{"kubernetes", "kubernetes-join-job"},
		{"kubernetes-job-mode", "kubernetes-join-job"},
		{"openshift", "openshift-join-job"},
		{"openshift-job-mode", "openshift-join-job"},
	} {
		t.Run(flavour.install, func(t *testing.T) {
			ctx := context.Background()
			c := kubetest.Start(t)
			o := overlay(t, flavour.install)
			if o.Flavour == "openshift" {
				prepareOpenShift(ctx, t, c)
			}
			w := &warnings{}
			cfg := rest.CopyConfig(c.Config)
			cfg.WarningHandler = w
			a := newApplier(t, cfg)
			objs := append(readRendered(t, flavour.install), readRendered(t, flavour.job)...)
			versions := a.applyAll(ctx, t, objs)
			assert.Empty(t, w.get(), "the API server warned")

			again := a.applyAll(ctx, t, objs)
			// The CRD's status is the API server's (Established), written
			// after the first apply.
			for k := range versions {
				if strings.HasPrefix(k, "CustomResourceDefinition/") {
					delete(versions, k)
					delete(again, k)
				}
			}
			assert.Equal(t, versions, again, "a second apply changes nothing")
			assert.Empty(t, w.get())

			if o.Flavour == "openshift" {
				// Where OpenShift runs its Cluster API operator: the
				// optional part, applied once the namespace exists.
				require.NoError(t, c.EnsureNamespace(ctx, ClusterAPINamespace))
				a.applyAll(ctx, t, readRendered(t, "openshift-cluster-api"))
				assert.Empty(t, w.get(), "the API server warned")
			}
			checkRBAC(ctx, t, c, o, serviceAccounts(objs))
		})
	}
}

// serviceAccounts are the names of the ServiceAccounts among objs.
func serviceAccounts(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		if u.GetKind() == "ServiceAccount" {
			out = append(out, u.GetName())
		}
	}
	return out
}

// ClusterAPINamespace is OpenShift's Cluster API namespace, on a cluster
// only where its Cluster API operator runs: the overlay binds nothing
// there, ClusterAPIDir does.
const ClusterAPINamespace = "openshift-cluster-api"

// prepareOpenShift makes the OpenShift cluster's own namespaces, where the
// overlay binds Roles (WMCO's included: the overlay does not create it),
// and the ServiceMonitor and PrometheusRule CRDs the Prometheus Operator
// serves there. Not openshift-cluster-api, which not every OpenShift
// cluster has: the install must apply without it.
func prepareOpenShift(ctx context.Context, t *testing.T, c *kubetest.Cluster) {
	t.Helper()
	for _, ns := range []string{"openshift-machine-config-operator", "openshift-config", "openshift-machine-api", "openshift-kube-apiserver-operator", WMCONamespace} {
		require.NoError(t, c.EnsureNamespace(ctx, ns))
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		text := strings.NewReplacer("KIND", kind, "SINGULAR", strings.ToLower(kind)).Replace(monitoringCRD)
		require.NoError(t, yaml.UnmarshalStrict([]byte(text), crd))
		crds = append(crds, crd)
	}
	require.NoError(t, c.InstallCRDs(crds...))
}

// monitoringCRD is a stand-in for a Prometheus Operator CRD (KIND, its
// schema left open): what an OpenShift cluster serves, so the overlay's
// ServiceMonitor and PrometheusRule apply.
const monitoringCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: SINGULARs.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: KIND, listKind: KINDList, plural: SINGULARs, singular: SINGULAR}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

func overlay(t *testing.T, name string) Overlay {
	for _, o := range Overlays() {
		if o.Name == name {
			return o
		}
	}
	t.Fatalf("no overlay %s", name)
	return Overlay{}
}

// readRendered reads deploy/rendered/NAME.yaml into objects, namespaces and
// CRDs first (as kubectl sorts them).
func readRendered(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("rendered", name+".yaml"))
	require.NoError(t, err)
	return decodeObjects(t, data)
}

// decodeObjects reads rendered YAML into objects, namespaces and CRDs
// first.
func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var first, rest []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if len(u.Object) == 0 {
			continue
		}
		switch u.GetKind() {
		case "Namespace", "CustomResourceDefinition":
			first = append(first, u)
		default:
			rest = append(rest, u)
		}
	}
	return append(first, rest...)
}

type applier struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// applyAll server-side applies each object and returns their
// resourceVersions by kind/namespace/name.
func (a *applier) applyAll(ctx context.Context, t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s", gvk)
		var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			require.NotEmpty(t, u.GetNamespace(), "%s %s has no namespace", u.GetKind(), u.GetName())
			ri = a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		got, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: "wsu-install-test"})
		require.NoError(t, err, "applying %s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
		out[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = got.GetResourceVersion()
	}
	return out
}

// serviceAccount returns a client config for a ServiceAccount: the admin's,
// impersonating it (with the groups every ServiceAccount has).
func serviceAccount(c *kubetest.Cluster, ns, name string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}

// secretNames are the Secrets the RBAC checks read.
const (
	keySecret   = "cloud-private-key"
	otherSecret = "not-wsus"
)

// createSecrets puts a key Secret and another Secret in ns.
func createSecrets(ctx context.Context, t *testing.T, c *kubetest.Cluster, ns string) {
	for _, n := range []string{keySecret, otherSecret} {
		_, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns},
			StringData: map[string]string{"k": "v"},
		}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
}

func nodeNamed(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestClusterAPIOptional: the OpenShift installs put nothing in
// openshift-cluster-api, which not every OpenShift cluster has, and the
// optional part (ClusterAPIDir) puts only the controller's Role and its
// RoleBinding there: a Role generated for another namespace would fail
// here rather than ride along.
func TestClusterAPIOptional(t *testing.T) {
	for _, name := range []string{"openshift", "openshift-job-mode", "openshift-join-job"} {
		for _, u := range readRendered(t, name) {
			assert.NotEqual(t, ClusterAPINamespace, u.GetNamespace(), "%s: %s %s", name, u.GetKind(), u.GetName())
		}
	}
	var got []string
	for _, u := range readRendered(t, "openshift-cluster-api") {
		got = append(got, u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName())
	}
	assert.ElementsMatch(t, []string{
		"Role/" + ClusterAPINamespace + "/wsu-controller",
		"RoleBinding/" + ClusterAPINamespace + "/wsu-controller",
	}, got)
}
