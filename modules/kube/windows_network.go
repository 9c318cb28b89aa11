package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// WindowsNetwork checks, before a host is changed, that the cluster runs
// what the node's network choice relies on, and recognises which choice
// fits the cluster. With network "hostprocess" the node configures no
// network of its own: the cluster's CNI and kube-proxy arrive as
// HostProcess DaemonSets that select Windows nodes (upstream's path:
// Calico through the Tigera operator, sig-windows-tools'
// kube-proxy-windows). With "ovn-hybrid" on a vanilla cluster, an
// OVN-Kubernetes master with the hybrid overlay must allocate the node's
// subnet, or the join would wait for an annotation that never comes.
// Found missing, the task fails at plan, naming what to install.
type WindowsNetwork struct{ Clusters }

var (
	_ modules.Module    = WindowsNetwork{}
	_ modules.Validator = WindowsNetwork{}
)

// The network values join takes (join.hcl's network variable).
const (
	NetworkHostProcess = "hostprocess"
	NetworkOVNHybrid   = "ovn-hybrid"
)

// OVNConfigMapName is the ConfigMap OVN-Kubernetes' manifests and Helm
// chart configure ovnkube from (key ovnkube.conf, an INI file whose
// [hybridoverlay] section enables the hybrid overlay).
const OVNConfigMapName = "ovnkube-config"

var windowsNetworkAttrs = withConn(
	modules.Attribute{Name: "network", Type: cty.String, Required: true,
		Description: "The node's network choice: `\"hostprocess\"` (the cluster's CNI and kube-proxy run as HostProcess DaemonSets on Windows nodes) or `\"ovn-hybrid\"` (OVN-Kubernetes' hybrid overlay; hybrid-overlay-node and kube-proxy run as node services)."},
	modules.Attribute{Name: "cni_daemonset", Type: cty.String,
		Description: "`NAMESPACE/NAME` of the Windows CNI DaemonSet (hostprocess); null: found among the cluster's DaemonSets (a HostProcess DaemonSet selecting `kubernetes.io/os=windows` named after a CNI: calico, flannel, antrea, cilium, or cni)."},
	modules.Attribute{Name: "kube_proxy_daemonset", Type: cty.String,
		Description: "`NAMESPACE/NAME` of the Windows kube-proxy DaemonSet (hostprocess); null: the HostProcess DaemonSet selecting Windows nodes whose name holds `kube-proxy`."},
	modules.Attribute{Name: "ovn_namespace", Type: cty.String, Default: cty.StringVal("ovn-kubernetes"),
		Description: "Namespace of OVN-Kubernetes' `ovnkube-config` ConfigMap (ovn-hybrid on a vanilla cluster)."},
)

var windowsNetworkResults = []modules.Attribute{
	{Name: "cni_daemonset", Type: cty.String, Description: "`NAMESPACE/NAME` of the Windows CNI DaemonSet found (hostprocess), else null."},
	{Name: "kube_proxy_daemonset", Type: cty.String, Description: "`NAMESPACE/NAME` of the Windows kube-proxy DaemonSet found (hostprocess), else null."},
	{Name: "recognised", Type: cty.String, Description: "The network value the cluster looks made for: `\"hostprocess\"` when it runs Windows HostProcess CNI and kube-proxy DaemonSets, `\"ovn-hybrid\"` when OVN-Kubernetes has the hybrid overlay on; null when neither was recognised."},
	{Name: "reason", Type: cty.String, Description: "What was found, in a sentence."},
}

func (WindowsNetwork) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_windows_network",
		Summary: "Check that the cluster runs the network a Windows node's network choice relies on.",
		Description: "Read-only; planned like any read, and it fails at plan, before any host is changed, when " +
			"the cluster lacks what `network` needs.\n\n" +
			"- `hostprocess`: a Windows CNI DaemonSet and a Windows kube-proxy DaemonSet must exist: HostProcess " +
			"pods (`securityContext.windowsOptions.hostProcess`) selecting `kubernetes.io/os=windows` by nodeSelector " +
			"or node affinity. Missing, the error names which and how to install it (Calico through the Tigera " +
			"operator with `windowsDataplane: HNS`; sig-windows-tools' `kube-proxy-windows`).\n" +
			"- `ovn-hybrid` (a vanilla cluster; on OpenShift `k8s_cluster_check` reads the operator's config): " +
			"the ConfigMap `ovnkube-config` in `ovn_namespace` must enable the hybrid overlay (`[hybridoverlay]` " +
			"`enabled=true` in `ovnkube.conf`).\n\n" +
			"Either way the error says which `network` value the cluster looks made for, when it can tell. Needs " +
			"list on daemonsets (all namespaces) and get on that one ConfigMap.",
		Target:     modules.TargetController,
		Attributes: windowsNetworkAttrs,
		Results:    windowsNetworkResults,
		Show:       "reason",
		Example: `task "network" {
  k8s_windows_network {
    network = "hostprocess"
  }
}`,
	}
}

func (WindowsNetwork) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	if n, ok := str(get(cfg, "network")); ok && n != NetworkHostProcess && n != NetworkOVNHybrid {
		diags = append(diags, cfg.Error("network", "Invalid network",
			fmt.Sprintf("network must be %q or %q, got %q.", NetworkHostProcess, NetworkOVNHybrid, n)))
	}
	for _, attr := range []string{"cni_daemonset", "kube_proxy_daemonset"} {
		if ref, ok := str(get(cfg, attr)); ok {
			if ns, name, found := strings.Cut(ref, "/"); !found || ns == "" || name == "" {
				diags = append(diags, cfg.Error(attr, "Invalid DaemonSet reference",
					fmt.Sprintf("%s must be NAMESPACE/NAME, got %q.", attr, ref)))
			}
		}
	}
	return diags
}

// windowsDaemonSets are the cluster's HostProcess DaemonSets for Windows
// nodes, split by what they are.
type windowsDaemonSets struct {
	cni, kubeProxy []string // NAMESPACE/NAME, sorted
}

// cniNames are words a Windows CNI DaemonSet's name holds (Calico's
// calico-node-windows, the Flannel examples' kube-flannel-ds-windows-amd64,
// antrea-agent-windows).
var cniNames = []string{"calico", "flannel", "antrea", "cilium", "cni"}

func findWindowsDaemonSets(ctx context.Context, cl *kube.Client) (windowsDaemonSets, error) {
	var found windowsDaemonSets
	list, err := cl.Kube.AppsV1().DaemonSets(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return found, err
	}
	for _, ds := range list.Items {
		if !selectsWindows(ds.Spec.Template.Spec) || !hostProcess(ds.Spec.Template.Spec) {
			continue
		}
		ref := ds.Namespace + "/" + ds.Name
		switch {
		case strings.Contains(ds.Name, "kube-proxy"):
			found.kubeProxy = append(found.kubeProxy, ref)
		case slices.ContainsFunc(cniNames, func(w string) bool { return strings.Contains(ds.Name, w) }):
			found.cni = append(found.cni, ref)
		}
	}
	sort.Strings(found.cni)
	sort.Strings(found.kubeProxy)
	return found, nil
}

// selectsWindows: the pod template lands only on Windows nodes.
func selectsWindows(spec corev1.PodSpec) bool {
	if spec.NodeSelector[corev1.LabelOSStable] == "windows" {
		return true
	}
	aff := spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelOSStable && e.Operator == corev1.NodeSelectorOpIn && slices.Equal(e.Values, []string{"windows"}) {
				return true
			}
		}
	}
	return false
}

// hostProcess: the pod's containers run as HostProcess containers.
func hostProcess(spec corev1.PodSpec) bool {
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
		return true
	}
	for _, c := range spec.Containers {
		if sc := c.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
			return true
		}
	}
	return false
}

// ovnHybrid reports whether OVN-Kubernetes' configuration in ns enables
// the hybrid overlay; ovn says whether OVN-Kubernetes' config exists.
func ovnHybrid(ctx context.Context, cl *kube.Client, ns string) (ovn, hybrid bool, err error) {
	cm, err := cl.Kube.CoreV1().ConfigMaps(ns).Get(ctx, OVNConfigMapName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, iniEnabled(cm.Data["ovnkube.conf"], "hybridoverlay"), nil
}

// iniEnabled: the INI text's [section] has enabled=true.
func iniEnabled(text, section string) bool {
	in := false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			in = strings.EqualFold(strings.Trim(line, "[]"), section)
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if in && ok && strings.TrimSpace(k) == "enabled" && strings.EqualFold(strings.TrimSpace(v), "true") {
			return true
		}
	}
	return false
}

// networkFound is what the check saw of the cluster's network.
type networkFound struct {
	ds          windowsDaemonSets
	ovn, hybrid bool
	cni, proxy  string // the DaemonSets hostprocess uses
}

func (f networkFound) recognised() string {
	switch {
	case len(f.ds.cni) > 0 && len(f.ds.kubeProxy) > 0:
		return NetworkHostProcess
	case f.hybrid:
		return NetworkOVNHybrid
	}
	return ""
}

func (f networkFound) value(reason string) cty.Value {
	vals := map[string]cty.Value{"reason": cty.StringVal(reason)}
	for name, v := range map[string]string{"cni_daemonset": f.cni, "kube_proxy_daemonset": f.proxy, "recognised": f.recognised()} {
		if v != "" {
			vals[name] = cty.StringVal(v)
		}
	}
	return result(windowsNetworkResults, vals)
}

// fits says which network value the cluster looks made for, for an error.
func (f networkFound) fits(network string) string {
	r := f.recognised()
	switch {
	case r == "":
		return " If the cluster's Windows network runs as services on the node (Flannel, Calico's manual install), set network = \"none\" and bring it with a site play."
	case r != network:
		return fmt.Sprintf(" This cluster looks made for network = %q.", r)
	}
	return ""
}

// checkNetwork reads the cluster and says what is missing for network
// (problem), or what was found (reason).
func checkNetwork(ctx context.Context, cl *kube.Client, cfg modules.Config) (f networkFound, reason, problem string, err error) {
	network, _ := str(get(cfg, "network"))
	ns, _ := str(get(cfg, "ovn_namespace"))
	if f.ds, err = findWindowsDaemonSets(ctx, cl); err != nil {
		return f, "", "", fmt.Errorf("listing DaemonSets: %w", err)
	}
	if f.ovn, f.hybrid, err = ovnHybrid(ctx, cl, ns); err != nil {
		return f, "", "", fmt.Errorf("reading %s/%s: %w", ns, OVNConfigMapName, err)
	}
	if network == NetworkOVNHybrid {
		return checkOVN(f, ns)
	}
	return checkHostProcess(ctx, cl, cfg, f)
}

func checkOVN(f networkFound, ns string) (networkFound, string, string, error) {
	switch {
	case !f.ovn:
		return f, "no OVN-Kubernetes", fmt.Sprintf("network = \"ovn-hybrid\" needs OVN-Kubernetes with the hybrid overlay, and the cluster has no ConfigMap %s/%s (OVN-Kubernetes' configuration): the node would wait for a subnet annotation no one writes. Install OVN-Kubernetes with --enable-hybrid-overlay, or set ovn_namespace to where it runs.%s", ns, OVNConfigMapName, f.fits(NetworkOVNHybrid)), nil
	case !f.hybrid:
		return f, "OVN-Kubernetes without the hybrid overlay", fmt.Sprintf("OVN-Kubernetes runs (%s/%s) but its ovnkube.conf does not enable the hybrid overlay ([hybridoverlay] enabled=true): Windows nodes on OVN-Kubernetes need it.%s", ns, OVNConfigMapName, f.fits(NetworkOVNHybrid)), nil
	}
	return f, "OVN-Kubernetes with the hybrid overlay (" + ns + "/" + OVNConfigMapName + ")", "", nil
}

func checkHostProcess(ctx context.Context, cl *kube.Client, cfg modules.Config, f networkFound) (networkFound, string, string, error) {
	var missing []string
	pick := func(attr string, found []string, what, install string) (string, error) {
		if ref, ok := str(get(cfg, attr)); ok {
			ns, name, _ := strings.Cut(ref, "/")
			ds, err := cl.Kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				missing = append(missing, fmt.Sprintf("%s: the DaemonSet %s (%s) does not exist.", what, ref, attr))
				return "", nil
			}
			if err != nil {
				return "", err
			}
			if p := dsProblem(ds); p != "" {
				missing = append(missing, fmt.Sprintf("%s: the DaemonSet %s %s.", what, ref, p))
				return "", nil
			}
			return ref, nil
		}
		if len(found) == 0 {
			missing = append(missing, fmt.Sprintf("%s: no HostProcess DaemonSet selecting kubernetes.io/os=windows; %s", what, install))
			return "", nil
		}
		return found[0], nil
	}
	var err error
	if f.cni, err = pick("cni_daemonset", f.ds.cni, "Windows CNI",
		"install Calico through the Tigera operator with spec.calicoNetwork.windowsDataplane: HNS (it runs calico-system/calico-node-windows), or name yours with cni_daemonset."); err != nil {
		return f, "", "", err
	}
	if f.proxy, err = pick("kube_proxy_daemonset", f.ds.kubeProxy, "Windows kube-proxy",
		"apply sig-windows-tools' kube-proxy-windows DaemonSet (hostprocess/calico/kube-proxy/kube-proxy.yml, image tag matching the cluster's version), or name yours with kube_proxy_daemonset."); err != nil {
		return f, "", "", err
	}
	if len(missing) > 0 {
		return f, "missing " + strings.Join(missingWhat(missing), " and "), "network = \"hostprocess\" needs the cluster to run the node's network as HostProcess DaemonSets.\n- " +
			strings.Join(missing, "\n- ") + f.fits(NetworkHostProcess), nil
	}
	return f, fmt.Sprintf("CNI DaemonSet %s, kube-proxy DaemonSet %s", f.cni, f.proxy), "", nil
}

func missingWhat(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i], _, _ = strings.Cut(l, ":")
	}
	return out
}

// dsProblem says why a named DaemonSet cannot serve a Windows node.
func dsProblem(ds *appsv1.DaemonSet) string {
	switch {
	case !selectsWindows(ds.Spec.Template.Spec):
		return "does not select Windows nodes (kubernetes.io/os=windows)"
	case !hostProcess(ds.Spec.Template.Spec):
		return "does not run HostProcess containers"
	}
	return ""
}

// check is Plan and Apply alike: it only reads.
func (m WindowsNetwork) check(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() || !known || !get(cfg, "network").IsKnown() {
		return unknownResult(windowsNetworkResults), diags
	}
	f, reason, problem, err := checkNetwork(ctx, cl, cfg)
	if err != nil {
		return unknownResult(windowsNetworkResults), apiError(cfg, "network", "Cannot check the cluster's network", err)
	}
	if problem != "" {
		return f.value(reason), hcl.Diagnostics{cfg.Error("network", "The cluster does not run the network this node needs", problem)}
	}
	return f.value(reason), nil
}

func (m WindowsNetwork) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.check(ctx, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m WindowsNetwork) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.check(ctx, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
