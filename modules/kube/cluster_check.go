package kube

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// ClusterCheck checks that an OpenShift cluster can take Windows nodes:
// OVN-Kubernetes with a hybrid overlay network.
type ClusterCheck struct{ Clusters }

var _ modules.Module = ClusterCheck{}

// The two OpenShift "cluster" objects the check reads.
var (
	networkConfigGVR   = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "networks"}
	networkOperatorGVR = schema.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "networks"}
)

var hybridNetworkType = cty.Object(map[string]cty.Type{"cidr": cty.String, "host_prefix": cty.Number})

var clusterCheckResults = []modules.Attribute{
	{Name: "applicable", Type: cty.Bool, Description: "Whether the check applies: false on clusters that are not OpenShift (no config.openshift.io API), where it passes without checking."},
	{Name: "reason", Type: cty.String, Description: "What was found, in a sentence."},
	{Name: "network_type", Type: cty.String, Description: "`network.config.openshift.io/cluster` `spec.networkType`; null when not applicable."},
	{Name: "hybrid_cluster_networks", Type: cty.List(hybridNetworkType), Description: "The hybrid overlay's `hybridClusterNetwork` entries (`cidr`, `host_prefix`)."},
	{Name: "hybrid_overlay_vxlan_port", Type: cty.Number, Description: "`hybridOverlayVXLANPort` when set (for `hybrid-overlay-node --hybrid-overlay-vxlan-port`), else null."},
	{Name: "platform", Type: cty.String, Description: "The infrastructure platform (`AWS`, `Azure`, `GCP`, `VSphere`, `None`, ...): `infrastructure.config.openshift.io/cluster` `status.platformStatus.type`, else `status.platform`; null when not applicable or not published. Decides the node name the cloud controller expects."},
}

func (ClusterCheck) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_cluster_check",
		Summary: "Check that an OpenShift cluster's network can take Windows nodes.",
		Description: "Windows nodes on OpenShift need OVN-Kubernetes with a hybrid overlay: " +
			"`network.config.openshift.io/cluster` must have `spec.networkType = OVNKubernetes` and " +
			"`network.operator.openshift.io/cluster` a non-empty " +
			"`spec.defaultNetwork.ovnKubernetesConfig.hybridOverlayConfig.hybridClusterNetwork`. " +
			"Otherwise the task fails, at plan time already, saying what to fix. It never changes " +
			"anything. It also reports the infrastructure platform (`platform`), which decides the name " +
			"a node must register under with an external cloud provider.\n\nOn a cluster without the `config.openshift.io` API (vanilla Kubernetes) the " +
			"check does not apply: the result says `applicable = false` with the reason, and the task " +
			"succeeds; checking the network plugin there is the playbook's business.",
		Target:     modules.TargetController,
		Attributes: withConn(),
		Results:    clusterCheckResults,
		Show:       "reason",
		Example: `task "cluster_network" {
  k8s_cluster_check {}
}`,
	}
}

// clusterNetwork is what the check found.
type clusterNetwork struct {
	applicable  bool
	reason      string
	networkType string
	hybrid      []cty.Value
	vxlanPort   *int64
	platform    string
}

func (c clusterNetwork) value() cty.Value {
	vals := map[string]cty.Value{"applicable": cty.BoolVal(c.applicable), "reason": cty.StringVal(c.reason)}
	if c.applicable {
		vals["network_type"] = cty.StringVal(c.networkType)
		vals["hybrid_cluster_networks"] = cty.ListValEmpty(hybridNetworkType)
		if len(c.hybrid) > 0 {
			vals["hybrid_cluster_networks"] = cty.ListVal(c.hybrid)
		}
		if c.vxlanPort != nil {
			vals["hybrid_overlay_vxlan_port"] = cty.NumberIntVal(*c.vxlanPort)
		}
		if c.platform != "" {
			vals["platform"] = cty.StringVal(c.platform)
		}
	}
	return result(clusterCheckResults, vals)
}

// served reports whether the API server serves a group version's resource.
func served(cl *kube.Client, gvr schema.GroupVersionResource) (bool, error) {
	list, err := cl.Kube.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// checkClusterNetwork reads the network configuration. problem is set when
// the cluster is OpenShift and cannot take Windows nodes; err when it could
// not be read.
func checkClusterNetwork(ctx context.Context, cl *kube.Client) (c clusterNetwork, problem string, err error) {
	ok, err := served(cl, networkConfigGVR)
	if err != nil {
		return c, "", fmt.Errorf("discovering %s: %w", networkConfigGVR.GroupVersion(), err)
	}
	if !ok {
		c.reason = "not OpenShift: the API server does not serve networks.config.openshift.io, so there is no cluster network configuration to check"
		return c, "", nil
	}
	c.applicable = true
	if c.platform, err = readPlatform(ctx, cl); err != nil {
		return c, "", err
	}
	cfg, err := cl.Dynamic.Resource(networkConfigGVR).Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return c, "", fmt.Errorf("reading network.config.openshift.io/cluster: %w", err)
	}
	c.networkType, _, _ = unstructured.NestedString(cfg.Object, "spec", "networkType")
	if c.networkType != "OVNKubernetes" {
		shown := c.networkType
		if shown == "" {
			shown = "unset"
		}
		c.reason = fmt.Sprintf("network type is %s, not OVNKubernetes", shown)
		return c, fmt.Sprintf("network.config.openshift.io/cluster spec.networkType is %s. Windows nodes need OVN-Kubernetes with hybrid overlay networking; migrate the cluster network to OVNKubernetes first.", shown), nil
	}
	op, err := cl.Dynamic.Resource(networkOperatorGVR).Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return c, "", fmt.Errorf("reading network.operator.openshift.io/cluster: %w", err)
	}
	hybridPath := []string{"spec", "defaultNetwork", "ovnKubernetesConfig", "hybridOverlayConfig"}
	entries, _, err := unstructured.NestedSlice(op.Object, append(hybridPath, "hybridClusterNetwork")...)
	if err != nil {
		return c, "", fmt.Errorf("network.operator.openshift.io/cluster: %w", err)
	}
	var cidrs []string
	for _, e := range entries {
		m, _ := e.(map[string]any)
		cidr, _, _ := unstructured.NestedString(m, "cidr")
		prefix, _, _ := unstructured.NestedInt64(m, "hostPrefix")
		if cidr == "" {
			continue
		}
		cidrs = append(cidrs, fmt.Sprintf("%s (host prefix %d)", cidr, prefix))
		c.hybrid = append(c.hybrid, cty.ObjectVal(map[string]cty.Value{"cidr": cty.StringVal(cidr), "host_prefix": cty.NumberIntVal(prefix)}))
	}
	if port, found, _ := unstructured.NestedInt64(op.Object, append(hybridPath, "hybridOverlayVXLANPort")...); found {
		c.vxlanPort = &port
	}
	if len(c.hybrid) == 0 {
		c.reason = "OVNKubernetes without a hybrid overlay network"
		return c, "network.operator.openshift.io/cluster has no spec.defaultNetwork.ovnKubernetesConfig.hybridOverlayConfig.hybridClusterNetwork. " +
			"Windows nodes need hybrid overlay networking, which is configured when the cluster is installed (or patched in, on versions that allow it).", nil
	}
	c.reason = "OVNKubernetes with hybrid overlay network " + strings.Join(cidrs, ", ")
	return c, "", nil
}

// check runs the check for Plan and Apply alike: it is read-only.
func (m ClusterCheck) check(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() || !known {
		return unknownResult(clusterCheckResults), diags
	}
	c, problem, err := checkClusterNetwork(ctx, cl)
	if err != nil {
		return unknownResult(clusterCheckResults), apiError(cfg, "kubeconfig", "Cannot check the cluster network", err)
	}
	if problem != "" {
		return c.value(), hcl.Diagnostics{cfg.Error("kubeconfig", "Cluster network cannot take Windows nodes", problem)}
	}
	return c.value(), nil
}

func (m ClusterCheck) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.check(ctx, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m ClusterCheck) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.check(ctx, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}

// readPlatform reads the infrastructure platform; "" when the cluster does
// not publish one (no Infrastructure API or object).
func readPlatform(ctx context.Context, cl *kube.Client) (string, error) {
	ok, err := served(cl, kube.InfrastructureGVR)
	if err != nil || !ok {
		return "", err
	}
	infra, err := cl.Dynamic.Resource(kube.InfrastructureGVR).Get(ctx, "cluster", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading infrastructure.config.openshift.io/cluster: %w", err)
	}
	if t, _, _ := unstructured.NestedString(infra.Object, "status", "platformStatus", "type"); t != "" {
		return t, nil
	}
	p, _, _ := unstructured.NestedString(infra.Object, "status", "platform")
	return p, nil
}
