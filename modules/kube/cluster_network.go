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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// ClusterNetwork reads the cluster's service network and DNS address, so a
// node is configured for the cluster it joins instead of for OpenShift's
// defaults (a kubelet with the wrong clusterDNS runs pods whose name
// lookups all fail; a CNI config with the wrong service network NATs
// service traffic).
type ClusterNetwork struct{ Clusters }

var _ modules.Module = ClusterNetwork{}

var clusterNetworkResults = []modules.Attribute{
	{Name: "service_cidrs", Type: cty.List(cty.String), Description: "The cluster's service networks, the first one primary."},
	{Name: "cluster_dns", Type: cty.List(cty.String), Description: "The cluster DNS service address(es), for the kubelet's `clusterDNS`."},
	{Name: "source", Type: cty.String, Description: "Where each was read, in a sentence."},
}

func (ClusterNetwork) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_cluster_network",
		Summary: "Read the cluster's service network and cluster DNS address.",
		Description: "Read-only. The service networks come from, in this order: OpenShift's " +
			"`network.config.openshift.io/cluster` (`status.serviceNetwork`, else `spec.serviceNetwork`); " +
			"kubeadm's `kube-system/kubeadm-config` ConfigMap (`ClusterConfiguration.networking.serviceSubnet`); " +
			"the `networking.k8s.io/v1` ServiceCIDR named `kubernetes` (Kubernetes 1.33 and later). " +
			"The cluster DNS address is the `kube-system/kube-dns` Service's cluster IP where that " +
			"Service exists and the cluster is not OpenShift, else the `.10` address of the first service " +
			"network (WMCO's rule, and kubeadm's default). When none of these can be read the task fails, " +
			"naming the variables to set instead.",
		Target:     modules.TargetController,
		Attributes: withConn(),
		Results:    clusterNetworkResults,
		Show:       "source",
		Example: `task "cluster network" {
  k8s_cluster_network {}
}`,
	}
}

// serviceNetwork is what was found, and where.
type serviceNetwork struct {
	cidrs     []string
	dns       []string
	openshift bool
	from      []string
}

func (s serviceNetwork) value() cty.Value {
	list := func(xs []string) cty.Value {
		if len(xs) == 0 {
			return cty.ListValEmpty(cty.String)
		}
		vals := make([]cty.Value, len(xs))
		for i, x := range xs {
			vals[i] = cty.StringVal(x)
		}
		return cty.ListVal(vals)
	}
	return result(clusterNetworkResults, map[string]cty.Value{
		"service_cidrs": list(s.cidrs),
		"cluster_dns":   list(s.dns),
		"source":        cty.StringVal(strings.Join(s.from, "; ")),
	})
}

// errNoServiceNetwork says what to do when nothing names the network.
const errNoServiceNetwork = "The cluster publishes its service network in none of the places wsu reads " +
	"(network.config.openshift.io/cluster, kube-system/kubeadm-config, the ServiceCIDR \"kubernetes\"). " +
	"Set the variables service_cidr and cluster_dns."

// readServiceNetwork tries each source of the service network in turn.
func readServiceNetwork(ctx context.Context, cl *kube.Client) (s serviceNetwork, err error) {
	for _, source := range []func(context.Context, *kube.Client, *serviceNetwork) (bool, error){
		openshiftServiceNetwork, kubeadmServiceNetwork, serviceCIDRObject,
	} {
		found, err := source(ctx, cl, &s)
		if err != nil || found {
			return s, err
		}
	}
	return s, nil
}

func openshiftServiceNetwork(ctx context.Context, cl *kube.Client, s *serviceNetwork) (bool, error) {
	ok, err := served(cl, networkConfigGVR)
	if err != nil || !ok {
		return false, err
	}
	cfg, err := cl.Dynamic.Resource(networkConfigGVR).Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading network.config.openshift.io/cluster: %w", err)
	}
	for _, field := range []string{"status", "spec"} {
		cidrs, _, _ := unstructured.NestedStringSlice(cfg.Object, field, "serviceNetwork")
		if len(cidrs) > 0 {
			s.cidrs, s.openshift = cidrs, true
			s.from = append(s.from, "service network from network.config.openshift.io/cluster "+field+".serviceNetwork")
			return true, nil
		}
	}
	return false, nil
}

// kubeadmConfig is the part of kubeadm's ClusterConfiguration wsu reads
// (here and in k8s_kubelet_config).
type kubeadmConfig struct {
	Networking struct {
		ServiceSubnet string `json:"serviceSubnet"`
		PodSubnet     string `json:"podSubnet"`
		DNSDomain     string `json:"dnsDomain"`
	} `json:"networking"`
}

func kubeadmServiceNetwork(ctx context.Context, cl *kube.Client, s *serviceNetwork) (bool, error) {
	cm, err := cl.Kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading kube-system/kubeadm-config: %w", err)
	}
	var cc kubeadmConfig
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cc); err != nil {
		return false, fmt.Errorf("kube-system/kubeadm-config ClusterConfiguration: %w", err)
	}
	if cc.Networking.ServiceSubnet == "" {
		return false, nil
	}
	for _, c := range strings.Split(cc.Networking.ServiceSubnet, ",") {
		s.cidrs = append(s.cidrs, strings.TrimSpace(c))
	}
	s.from = append(s.from, "service network from kube-system/kubeadm-config networking.serviceSubnet")
	return true, nil
}

func serviceCIDRObject(ctx context.Context, cl *kube.Client, s *serviceNetwork) (bool, error) {
	obj, err := cl.Kube.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the ServiceCIDR \"kubernetes\": %w", err)
	}
	if len(obj.Spec.CIDRs) == 0 {
		return false, nil
	}
	s.cidrs = append(s.cidrs, obj.Spec.CIDRs...)
	s.from = append(s.from, "service network from the ServiceCIDR \"kubernetes\"")
	return true, nil
}

// readClusterDNS sets the DNS address once the service network is known.
func readClusterDNS(ctx context.Context, cl *kube.Client, s *serviceNetwork) error {
	if !s.openshift {
		svc, err := cl.Kube.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
		switch {
		case err == nil && len(svc.Spec.ClusterIPs) > 0:
			s.dns = svc.Spec.ClusterIPs[:1]
			s.from = append(s.from, "cluster DNS from the kube-system/kube-dns Service")
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("reading kube-system/kube-dns: %w", err)
		}
	}
	dns, err := tenthAddress(s.cidrs)
	if err != nil {
		return err
	}
	s.dns = []string{dns}
	s.from = append(s.from, "cluster DNS the .10 address of "+s.cidrs[0])
	return nil
}

// tenthAddress is the .10 address of the first service network, where
// OpenShift's and kubeadm's DNS services live.
func tenthAddress(cidrs []string) (string, error) {
	p, err := netip.ParsePrefix(cidrs[0])
	if err != nil {
		return "", fmt.Errorf("service network %q: %w", cidrs[0], err)
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	if !p.Contains(a) {
		return "", fmt.Errorf("service network %s is too small to hold a DNS address at .10", p)
	}
	return a.String(), nil
}

// check runs for Plan and Apply alike: it is read-only.
func (m ClusterNetwork) check(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() || !known {
		return unknownResult(clusterNetworkResults), diags
	}
	s, err := readServiceNetwork(ctx, cl)
	if err == nil && len(s.cidrs) == 0 {
		return unknownResult(clusterNetworkResults), hcl.Diagnostics{cfg.Error("kubeconfig", "Cannot find the cluster's service network", errNoServiceNetwork)}
	}
	if err == nil {
		err = readClusterDNS(ctx, cl, &s)
	}
	if err != nil {
		return unknownResult(clusterNetworkResults), apiError(cfg, "kubeconfig", "Cannot read the cluster's service network", err)
	}
	return s.value(), nil
}

func (m ClusterNetwork) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.check(ctx, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m ClusterNetwork) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.check(ctx, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
