package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/kube"
)

// Cluster settings pushed to the nodes, as WMCO does: the kubelet's client
// CA, the cluster-wide Proxy, the image mirror sets and the proxy's trusted
// CA bundle are read by the join playbook from the cluster at each run, so
// a host is in line with them after any plan and apply. What the
// controller adds is promptness: it watches the objects they come from
// and, when one changes, plans every instance at once instead of at its
// next drift pass.
//
// The state is in the instances, not in memory, so a restarted controller
// carries on: the version of the settings (a hash of the sources' resource
// versions, which change with every write) is recorded with each plan
// (status.lastPlan.clusterSettings; another version plans again) and when
// the host is found or brought in line (status.clusterSettings). While the
// cluster's version differs from the latter, a plan with changes is a
// settings push: applied whatever the drift policy (a push is not drift),
// held to the instance's approval mode (Manual: the plan awaits approval),
// one rollout slot per host at a time (maxUnavailable, as upgrades: a push
// may restart containerd or, for the proxy, the node).
//
// Only the kinds the cluster serves are watched (the RESTMapper, at start;
// a CRD installed later is watched after a restart), in a cache of their
// own holding metadata only. kubeadm clusters: the cluster CA in
// kube-public/cluster-info (the kubelet's client CA there). OpenShift
// (MachineConfigs served): WMCO's source of the kubelet client CA,
// openshift-kube-apiserver-operator/kube-apiserver-to-kubelet-client-ca,
// and the rendered worker MachineConfigs join reads it from; with
// config.openshift.io, the Proxy cluster, the ImageDigestMirrorSets and
// ImageTagMirrorSets with the cluster's pull secret (the mirror
// registries' credentials: openshift-config/pull-secret, by name, the
// openshift overlay's wsu-pull-secret Role), and the trusted CA as WMCO
// watches it: the ConfigMap wsu-trusted-ca in the controller's namespace,
// labelled config.openshift.io/inject-trusted-cabundle=true, into which
// the cluster network operator injects the Proxy's trusted CA bundle
// whenever it changes (the openshift overlay creates it), so no right on
// openshift-config's ConfigMaps is needed, whose names the Proxy
// chooses.

// The controller's reads of the settings' sources: least privilege, get,
// list and watch only, by name where the name is known. The ConfigMaps in
// kube-public and openshift-kube-apiserver-operator are read through Roles
// in those namespaces, by name (deploy/rbac/wsu-cluster-role.yaml's
// wsu-cluster-info, the openshift overlay's cluster-settings.yaml).
// +kubebuilder:rbac:groups=config.openshift.io,resources=proxies,resourceNames=cluster,verbs=get;list;watch
// +kubebuilder:rbac:groups=config.openshift.io,resources=imagedigestmirrorsets;imagetagmirrorsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=machineconfiguration.openshift.io,resources=machineconfigs,verbs=get;list;watch

// Where the settings come from.
const (
	ClusterInfoNamespace  = "kube-public"
	ClusterInfoConfigMap  = "cluster-info"
	KubeletCANamespace    = "openshift-kube-apiserver-operator"
	KubeletCAConfigMap    = "kube-apiserver-to-kubelet-client-ca"
	TrustedCAConfigMap    = "wsu-trusted-ca"
	renderedWorkerPrefix  = "rendered-worker-"
	clusterProxyName      = "cluster"
	ReasonSettingsChanged = "ClusterSettingsChanged"
)

var (
	configMapGVK     = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	secretGVK        = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	machineConfigGVK = schema.GroupVersionKind{Group: "machineconfiguration.openshift.io", Version: "v1", Kind: "MachineConfig"}
	proxyGVK         = schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "Proxy"}
	idmsGVK          = schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "ImageDigestMirrorSet"}
	itmsGVK          = schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "ImageTagMirrorSet"}
)

// clusterSettings watches the settings' sources and tells their version.
type clusterSettings struct {
	cache cache.Cache
	// sources are the watched kinds, each with what counts of it.
	sources []settingsSource
}

// settingsSource is one watched kind: its objects that count, in the
// namespaces (or cluster-wide, "") and by the names given ("": all).
type settingsSource struct {
	gvk       schema.GroupVersionKind
	namespace map[string]string // namespace → name ("" all); nil: cluster-scoped
	name      string            // cluster-scoped: the one name, "" all
	prefix    string            // counts only names with this prefix
}

// object is an empty object of the source's kind, as the cache holds it:
// metadata only.
func (s settingsSource) object() client.Object {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(s.gvk)
	return m
}

// byObject is the source's cache configuration: by name where one is
// known (a metadata.name field selector, which a Role limited to that name
// allows).
func (s settingsSource) byObject() cache.ByObject {
	byName := func(name string) cache.Config {
		if name == "" {
			return cache.Config{}
		}
		return cache.Config{FieldSelector: fields.OneTermEqualSelector("metadata.name", name)}
	}
	if s.namespace == nil {
		if s.name == "" {
			return cache.ByObject{}
		}
		return cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", s.name)}
	}
	ns := map[string]cache.Config{}
	for n, name := range s.namespace {
		ns[n] = byName(name)
	}
	return cache.ByObject{Namespaces: ns}
}

// served says whether the cluster serves gvk.
func served(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err):
		return false, nil
	}
	return false, fmt.Errorf("discovering %s: %w", gvk.GroupKind(), err)
}

// settingsSources are the sources the cluster has (see the package
// comment).
func settingsSources(mapper meta.RESTMapper, namespace string) ([]settingsSource, error) {
	openshift, err := served(mapper, machineConfigGVK)
	if err != nil {
		return nil, err
	}
	proxy, err := served(mapper, proxyGVK)
	if err != nil {
		return nil, err
	}
	configMaps := map[string]string{}
	var out []settingsSource
	if openshift {
		configMaps[KubeletCANamespace] = KubeletCAConfigMap
		out = append(out, settingsSource{gvk: machineConfigGVK, prefix: renderedWorkerPrefix})
	} else {
		configMaps[ClusterInfoNamespace] = ClusterInfoConfigMap
	}
	if proxy {
		configMaps[namespace] = TrustedCAConfigMap
		out = append(out, settingsSource{gvk: proxyGVK, name: clusterProxyName})
	}
	mirrorSets := false
	for _, gvk := range []schema.GroupVersionKind{idmsGVK, itmsGVK} {
		ok, err := served(mapper, gvk)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, settingsSource{gvk: gvk})
		}
		mirrorSets = mirrorSets || ok
	}
	if mirrorSets { // the mirrors' credentials
		out = append(out, settingsSource{gvk: secretGVK, namespace: map[string]string{kube.PullSecretNamespace: kube.PullSecretName}})
	}
	return append([]settingsSource{{gvk: configMapGVK, namespace: configMaps}}, out...), nil
}

// newClusterSettings makes the settings' cache, added to mgr so it runs
// while the controller leads.
func newClusterSettings(mgr ctrl.Manager, namespace string) (*clusterSettings, error) {
	sources, err := settingsSources(mgr.GetRESTMapper(), namespace)
	if err != nil {
		return nil, fmt.Errorf("controller: cluster settings: %w", err)
	}
	if err := checkSettingsAccess(mgr.GetConfig(), mgr.GetRESTMapper(), sources); err != nil { // settingsaccess.go
		return nil, fmt.Errorf("controller: %w", err)
	}
	by := map[client.Object]cache.ByObject{}
	for _, s := range sources {
		by[s.object()] = s.byObject()
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), ByObject: by})
	if err != nil {
		return nil, fmt.Errorf("controller: cluster settings cache: %w", err)
	}
	if err := mgr.Add(c); err != nil {
		return nil, err
	}
	return &clusterSettings{cache: c, sources: sources}, nil
}

// watch adds the sources to b: a change of any wakes every instance of
// namespace (a pass plans the instance when the version it recorded is
// not the cluster's).
func (s *clusterSettings) watch(b *builder.Builder, c client.Reader, namespace string) *builder.Builder {
	for _, src := range s.sources {
		b = b.WatchesRawSource(source.Kind(s.cache, src.object(), settingsToInstances(c, namespace),
			predicate.ResourceVersionChangedPredicate{}))
	}
	return b
}

// version is the settings' version: a hash of what counts of each source
// (kind, namespace, name, resource version); "" without settings.
func (s *clusterSettings) version(ctx context.Context) (string, error) {
	if s == nil {
		return "", nil
	}
	var lines []string
	for _, src := range s.sources {
		got, err := s.listed(ctx, src)
		if err != nil {
			return "", err
		}
		lines = append(lines, got...)
	}
	sort.Strings(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:8]), nil
}

// listed are the lines of a source's objects that count.
func (s *clusterSettings) listed(ctx context.Context, src settingsSource) ([]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(src.gvk.GroupVersion().WithKind(src.gvk.Kind + "List"))
	if err := s.cache.List(ctx, list); err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		o := &list.Items[i]
		if !src.counts(o) {
			continue
		}
		out = append(out, line(src.gvk, o))
	}
	return out, nil
}

// counts says whether o is one of the source's settings.
func (s settingsSource) counts(o client.Object) bool {
	if !strings.HasPrefix(o.GetName(), s.prefix) {
		return false
	}
	if s.namespace == nil {
		return s.name == "" || o.GetName() == s.name
	}
	want, ok := s.namespace[o.GetNamespace()]
	return ok && (want == "" || o.GetName() == want)
}

func line(gvk schema.GroupVersionKind, o client.Object) string {
	return fmt.Sprintf("%s %s/%s %s", gvk.GroupKind(), o.GetNamespace(), o.GetName(), o.GetResourceVersion())
}

// pushPending says the host is not in line with the cluster settings'
// version settings. An instance that recorded none (joined by a controller
// that did not record them) is not pushed to: its first plan without
// changes, or apply, records the version.
func pushPending(wi *wsuv1.WindowsInstance, settings string) bool {
	applied := wi.Status.ClusterSettings
	return settings != "" && applied != "" && applied != settings
}

// push applies a plan made because the cluster settings changed on a
// joined host: not drift, so whatever the drift policy; held to the
// approval mode, and under the rollout limit (one slot while it runs; the
// Node is not marked, as for a key rotation). An instance refused a slot
// waits, and plans again when one frees.
func (r *InstanceReconciler) push(ctx context.Context, orig, wi *wsuv1.WindowsInstance, rr run.Request, plan run.Outcome) (ctrl.Result, error) {
	msg := fmt.Sprintf("the cluster settings changed: plan %s, %d change(s): %s", plan.Hash, plan.Changed, strings.Join(plan.Tasks, ", "))
	if !r.approved(wi, plan) {
		r.event(wi, corev1.EventTypeNormal, ReasonSettingsChanged, "%s", msg)
		return r.awaitApproval(ctx, orig, wi, plan)
	}
	ok, err := r.takeSlot(ctx, wi) // rollout.go
	if err != nil {
		return ctrl.Result{}, err
	}
	if !ok {
		wi.Status.LastPlan.ClusterSettings = "" // planned again when woken
		setCondition(wi, wsuv1.ConditionPlanned, metav1.ConditionTrue, ReasonRolloutWait,
			"a cluster settings push waits for a rollout slot (maxUnavailable)")
		return r.done(ctx, orig, wi, wsuv1.PhaseJoined, r.slotRecheck())
	}
	defer r.rollouts.release(wi)
	r.event(wi, corev1.EventTypeNormal, ReasonSettingsChanged, "%s; applying it", msg)
	return r.apply(ctx, orig, wi, rr, plan)
}
