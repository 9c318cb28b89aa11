package kube

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// KubeletConfig reads a kubeadm cluster's kubelet configuration and renders
// the one a Windows node runs with, as kubeadm join would write it there
// plus what Windows and wsu's join need. A kubeadm cluster's nodes share one
// KubeletConfiguration (kube-system/kubelet-config): a Windows node
// configured from a template instead would differ from its Linux peers in
// every setting the admin chose (clusterDomain, eviction, feature gates).
// It is a read: Plan and Apply return the same result and no change, so a
// cluster that lacks the ConfigMaps fails the plan.
type KubeletConfig struct{ Clusters }

var _ modules.Module = KubeletConfig{}

// kubeletCA is the kubelet's client CA as wsu's join writes it.
const kubeletCA = `C:\k\kubelet-ca.crt`

var kubeletConfigAttrs = []modules.Attribute{
	{Name: "node_name", Type: cty.String,
		Description: "Node whose `spec.podCIDRs` are read into `node_pod_cidrs`; null reads none. A Node that is not registered yet gives an empty list."},
	{Name: "cluster_dns", Type: cty.List(cty.String),
		Description: "DNS service addresses that replace the ConfigMap's `clusterDNS`; null keeps the cluster's."},
	{Name: "client_ca_file", Type: cty.String, Default: cty.StringVal(kubeletCA),
		Description: "The kubelet's `authentication.x509.clientCAFile` on the node."},
	{Name: "server_tls_bootstrap", Type: cty.Bool, Default: cty.True,
		Description: "`serverTLSBootstrap`: the kubelet requests its serving certificate from the cluster (`kubernetes.io/kubelet-serving`), which someone must approve (wsu's join or controller, or another approver). `false` (kubeadm's default, and a node-only join's): the kubelet signs its own serving certificate."},
}

var kubeletConfigResults = []modules.Attribute{
	{Name: "config", Type: cty.String, Description: "The kubelet configuration (YAML, keys sorted) for `C:\\k\\kubelet.conf`."},
	{Name: "cluster_dns", Type: cty.List(cty.String), Description: "The configuration's `clusterDNS`."},
	{Name: "cluster_domain", Type: cty.String, Description: "The configuration's `clusterDomain`."},
	{Name: "service_cidrs", Type: cty.List(cty.String), Description: "`networking.serviceSubnet` of kubeadm's ClusterConfiguration, split at commas (dual stack)."},
	{Name: "pod_cidrs", Type: cty.List(cty.String), Description: "`networking.podSubnet` of kubeadm's ClusterConfiguration, split at commas; empty when the cluster has none."},
	{Name: "node_pod_cidrs", Type: cty.List(cty.String), Description: "The Node's `spec.podCIDRs` (its `spec.podCIDR` on older servers): empty without `node_name`, before the Node registers, or when the cluster allocates none (kube-controller-manager without `--allocate-node-cidrs`)."},
	{Name: "source", Type: cty.String, Description: "What was read, in a sentence."},
}

func (KubeletConfig) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_kubelet_config",
		Summary: "Read a kubeadm cluster's kubelet configuration and render it for a Windows node.",
		Description: "Read-only. Starts from the `kubelet` key of the `kube-system/kubelet-config` ConfigMap " +
			"(the KubeletConfiguration kubeadm uploads for every node) and keeps every field it holds, known " +
			"to wsu or not. Where it has no `clusterDomain` or `clusterDNS`, they come from the " +
			"`kube-system/kubeadm-config` ClusterConfiguration (`networking.dnsDomain`, and the `.10` address " +
			"of `networking.serviceSubnet`), as kubeadm defaults them; `cluster_dns` replaces `clusterDNS`.\n\n" +
			"Then kubeadm join's Windows changes: `resolvConf: \"\"`, and the drive `C:` before the " +
			"Unix-absolute `staticPodPath` and `authentication.x509.clientCAFile`. Last, what a Windows " +
			"kubelet needs and wsu's join relies on: `cgroupsPerQOS: false`, `enforceNodeAllocatable: [none]`, " +
			"`containerRuntimeEndpoint: npipe://./pipe/containerd-containerd`, `rotateCertificates: true`, " +
			"`serverTLSBootstrap` = `server_tls_bootstrap` (join approves the serving CSR), `authentication.anonymous.enabled: " +
			"false` and `authentication.x509.clientCAFile` = `client_ca_file`. The YAML's keys are sorted, " +
			"so the same cluster always gives the same bytes.\n\n" +
			"A cluster without either ConfigMap fails the task (at plan): kubeadm init uploads them " +
			"(`kubeadm init phase upload-config kubelet`, `... upload-config kubeadm`). The reading identity " +
			"needs get on both ConfigMaps (kubeadm grants it to bootstrap tokens and nodes) and, with " +
			"`node_name`, get on Nodes.",
		Target:     modules.TargetController,
		Attributes: withConn(kubeletConfigAttrs...),
		Results:    kubeletConfigResults,
		Show:       "source",
		Example: `task "kubelet config" {
  k8s_kubelet_config {
    node_name = "win-1"
  }
}

task "kubelet.conf" {
  win_file {
    path    = "C:\\k\\kubelet.conf"
    content = task["kubelet config"].config
  }
}`,
	}
}

func (KubeletConfig) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	if name, ok := str(get(cfg, "node_name")); ok {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			diags = append(diags, cfg.Error("node_name", "Invalid node name",
				fmt.Sprintf("%q is not a valid node name: %s.", name, strings.Join(errs, "; "))))
		}
	}
	if dns := get(cfg, "cluster_dns"); dns.IsWhollyKnown() && !dns.IsNull() {
		for _, v := range dns.AsValueSlice() {
			if _, err := netip.ParseAddr(v.AsString()); err != nil {
				diags = append(diags, cfg.Error("cluster_dns", "Invalid cluster_dns", fmt.Sprintf("%q is not an IP address.", v.AsString())))
			}
		}
	}
	if ca, ok := str(get(cfg, "client_ca_file")); ok && ca == "" {
		diags = append(diags, cfg.Error("client_ca_file", "Invalid client_ca_file", "client_ca_file must name a file."))
	}
	return diags
}

// kubeletReading is what the cluster holds for a node's kubelet.
type kubeletReading struct {
	doc      kubeletDoc
	cluster  kubeadmConfig
	nodeCIDR []string
	from     []string
}

// errMissingConfigMap explains a cluster without one of kubeadm's ConfigMaps.
func errMissingConfigMap(name, key, phase string) string {
	return fmt.Sprintf("The ConfigMap kube-system/%s (key %q) does not exist or is empty. kubeadm init uploads it "+
		"(kubeadm init phase upload-config %s); a cluster set up otherwise is not a kubeadm cluster: "+
		"run join with the cluster_flavour that matches it.", name, key, phase)
}

// readKubeletInputs reads both ConfigMaps and the Node. A missing ConfigMap
// is a diagnostic of its own; other failures are API errors.
func readKubeletInputs(ctx context.Context, cl *kube.Client, cfg modules.Config) (r kubeletReading, diags hcl.Diagnostics) {
	var node kubeletReading // the Node's part, read beside the ConfigMaps
	diags = modutil.Together(
		func() hcl.Diagnostics {
			text, diags := configMapKey(ctx, cl, cfg, "kubelet-config", "kubelet", "kubelet")
			if diags.HasErrors() {
				return diags
			}
			doc, err := parseKubeletDoc(text)
			if err != nil {
				return hcl.Diagnostics{cfg.Error("kubeconfig", "Invalid kube-system/kubelet-config", "Its key \"kubelet\" is not a KubeletConfiguration: "+err.Error())}
			}
			r.doc = doc
			return nil
		},
		func() hcl.Diagnostics {
			text, diags := configMapKey(ctx, cl, cfg, "kubeadm-config", "ClusterConfiguration", "kubeadm")
			if diags.HasErrors() {
				return diags
			}
			if err := yaml.Unmarshal([]byte(text), &r.cluster); err != nil {
				return hcl.Diagnostics{cfg.Error("kubeconfig", "Invalid kube-system/kubeadm-config", "Its key \"ClusterConfiguration\": "+err.Error())}
			}
			return nil
		},
		func() hcl.Diagnostics { return readNodeCIDRs(ctx, cl, cfg, &node) },
	)
	if diags.HasErrors() {
		return r, diags
	}
	r.nodeCIDR = node.nodeCIDR
	r.from = append([]string{"kubelet config from kube-system/kubelet-config", "networks from kube-system/kubeadm-config"}, node.from...)
	return r, nil
}

// configMapKey reads one key of a kube-system ConfigMap that must exist.
func configMapKey(ctx context.Context, cl *kube.Client, cfg modules.Config, name, key, phase string) (string, hcl.Diagnostics) {
	cm, err := cl.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return "", apiError(cfg, "kubeconfig", "Cannot read kube-system/"+name, err)
	}
	if err != nil || strings.TrimSpace(cm.Data[key]) == "" {
		return "", hcl.Diagnostics{cfg.Error("kubeconfig", "Missing kube-system/"+name, errMissingConfigMap(name, key, phase))}
	}
	return cm.Data[key], nil
}

// readNodeCIDRs reads the Node's pod networks, when node_name names one.
func readNodeCIDRs(ctx context.Context, cl *kube.Client, cfg modules.Config, r *kubeletReading) hcl.Diagnostics {
	name, ok := str(get(cfg, "node_name"))
	if !ok {
		return nil
	}
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.from = append(r.from, "Node "+name+" not registered yet")
		return nil
	case err != nil:
		return apiError(cfg, "node_name", "Cannot read Node "+name, err)
	}
	r.nodeCIDR = n.Spec.PodCIDRs
	if len(r.nodeCIDR) == 0 && n.Spec.PodCIDR != "" {
		r.nodeCIDR = []string{n.Spec.PodCIDR}
	}
	r.from = append(r.from, "pod networks of Node "+name)
	return nil
}

// splitCIDRs splits kubeadm's comma-separated dual-stack subnets.
func splitCIDRs(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// windowsInputs is what the merge takes from the task and the
// ClusterConfiguration.
func windowsInputs(cfg modules.Config, cc kubeadmConfig) windowsKubelet {
	w := windowsKubelet{defaultDomain: cc.Networking.DNSDomain, serverTLSBootstrap: get(cfg, "server_tls_bootstrap").True()}
	if w.defaultDomain == "" {
		w.defaultDomain = "cluster.local" // kubeadm's default dnsDomain
	}
	if cidrs := splitCIDRs(cc.Networking.ServiceSubnet); len(cidrs) > 0 {
		if dns, err := tenthAddress(cidrs); err == nil {
			w.defaultDNS = []string{dns}
		}
	}
	if dns := get(cfg, "cluster_dns"); !dns.IsNull() {
		w.clusterDNS = make([]string, 0, dns.LengthInt())
		for _, v := range dns.AsValueSlice() {
			w.clusterDNS = append(w.clusterDNS, v.AsString())
		}
	}
	w.clientCAFile, _ = str(get(cfg, "client_ca_file"))
	return w
}

// check runs for Plan and Apply alike: it only reads.
func (m KubeletConfig) check(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() || !known || !cfg.Value.IsWhollyKnown() {
		return unknownResult(kubeletConfigResults), diags
	}
	r, diags := readKubeletInputs(ctx, cl, cfg)
	if diags.HasErrors() {
		return unknownResult(kubeletConfigResults), diags
	}
	doc := windowsKubeletConfig(r.doc, windowsInputs(cfg, r.cluster))
	text, err := doc.render()
	if err != nil {
		return unknownResult(kubeletConfigResults), hcl.Diagnostics{cfg.Error("kubeconfig", "Cannot render the kubelet configuration", err.Error())}
	}
	domain, _ := doc["clusterDomain"].(string)
	return result(kubeletConfigResults, map[string]cty.Value{
		"config":         cty.StringVal(text),
		"cluster_dns":    strList(doc.stringList("clusterDNS")),
		"cluster_domain": cty.StringVal(domain),
		"service_cidrs":  strList(splitCIDRs(r.cluster.Networking.ServiceSubnet)),
		"pod_cidrs":      strList(splitCIDRs(r.cluster.Networking.PodSubnet)),
		"node_pod_cidrs": strList(r.nodeCIDR),
		"source":         cty.StringVal(strings.Join(r.from, "; ")),
	}), nil
}

func (m KubeletConfig) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.check(ctx, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m KubeletConfig) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.check(ctx, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
