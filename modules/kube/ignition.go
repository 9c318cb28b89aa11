package kube

import (
	"context"
	"fmt"
	"math/big"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// Ignition reads what a Windows node needs from the cluster's worker
// Ignition config: a data source, so it never changes anything.
type Ignition struct{ Clusters }

var (
	_ modules.Module    = Ignition{}
	_ modules.Validator = Ignition{}
)

var ignitionAttrs = withConn(
	modules.Attribute{Name: "source", Type: cty.String, Required: true,
		Description: "`\"mcs\"`: download the worker config from the Machine Config Server (as WSU and WMCO 4.x did). " +
			"`\"machineconfig\"`: build it from the newest `rendered-worker-*` MachineConfig, ControllerConfig " +
			"`machine-config-controller` and the secret `openshift-machine-config-operator/node-bootstrapper-token` " +
			"(as current WMCO does), using `kubeconfig`/`context`."},
	modules.Attribute{Name: "url", Type: cty.String,
		Description: "With `mcs`: the Machine Config Server, as a host (`api-int.<cluster>`, to which `:22623/config/worker` is added) or a full https URL."},
	modules.Attribute{Name: "ca", Type: cty.String,
		Description: "With `mcs`: PEM CA bundle the server's certificate must chain to (the cluster's root CA). Default: the system roots."},
	modules.Attribute{Name: "insecure", Type: cty.Bool, Default: cty.False,
		Description: "With `mcs`: skip verifying the server's certificate. The config holds a credential; use only to debug."},
	modules.Attribute{Name: "spec_version", Type: cty.Number, Default: cty.NumberIntVal(3),
		Description: "With `mcs`: Ignition spec to ask for, 2 or 3. Spec 3 sends `Accept: application/vnd.coreos.ignition+json;version=<ignition_version>`; spec 2 sends `User-Agent: Ignition/0.35.0`, which older servers need."},
	modules.Attribute{Name: "ignition_version", Type: cty.String, Default: cty.StringVal(kube.DefaultIgnitionVersion),
		Description: "With `mcs` and spec 3: the exact spec version asked for."},
	modules.Attribute{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(60),
		Description: "With `mcs`: seconds before the download fails."},
	modules.Attribute{Name: "api_server", Type: cty.String,
		Description: "With `machineconfig`: API server URL written into the bootstrap kubeconfig. Default: the Infrastructure's `apiServerInternalURI` (api-int), else the URL wsu connects to."},
)

var ignitionResults = []modules.Attribute{
	{Name: "bootstrap_kubeconfig", Type: cty.String, Sensitive: true,
		Description: "The kubelet's bootstrap kubeconfig (`/etc/kubernetes/kubeconfig`; write it to `C:\\k\\bootstrap-kubeconfig`)."},
	{Name: "kubelet_ca", Type: cty.String,
		Description: "CA bundle that verifies clients of the kubelet (`C:\\k\\kubelet-ca.crt`)."},
	{Name: "api_server", Type: cty.String,
		Description: "The API server URL in `bootstrap_kubeconfig` (hybrid-overlay-node's `--k8s-apiserver`); null when it names none."},
	{Name: "api_ca", Type: cty.String,
		Description: "The CA bundle in `bootstrap_kubeconfig` that verifies the API server (`C:\\k\\bootstrap-ca.crt`, hybrid-overlay-node's `--k8s-cacert`); null when it holds none."},
	{Name: "cloud_provider", Type: cty.String,
		Description: "The kubelet's `--cloud-provider`; null when unset or empty."},
	{Name: "cloud_config_name", Type: cty.String,
		Description: "Base name of the kubelet's `--cloud-config` file, for `C:\\k\\<name>`; null when unset."},
	{Name: "cloud_config", Type: cty.String, Sensitive: true,
		Description: "That file's content (it may hold cloud credentials); null when unset."},
	{Name: "kubelet_verbosity", Type: cty.String,
		Description: "The kubelet's `--v`; null when unset or not a plain number."},
	{Name: "spec_version", Type: cty.String,
		Description: "Spec version of the config read, e.g. `3.2.0`."},
	{Name: "from", Type: cty.String,
		Description: "Where it came from: the URL, or `MachineConfig <name>`."},
}

func (Ignition) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_ignition",
		Summary: "Read the bootstrap kubeconfig, kubelet CA and kubelet flags from the worker Ignition config.",
		Description: "A read: the plan fetches and parses the config, so its results are known at plan time " +
			"and the task never shows a change. It reads Ignition spec 2.x and 3.x: the files " +
			"`/etc/kubernetes/kubeconfig` and `/etc/kubernetes/kubelet-ca.crt` and the kubelet's " +
			"cloud config (inline `data:` URLs, percent-encoded or base64, gzip-compressed or not), and " +
			"`--cloud-provider`, `--cloud-config` and `--v` from the `kubelet.service` unit and its " +
			"drop-ins (with `Environment=` variables expanded). Files fetched from elsewhere (https, s3) are " +
			"refused rather than followed. The server certificate is always verified unless `insecure` is set.",
		Target:     modules.TargetController,
		Attributes: ignitionAttrs,
		Results:    ignitionResults,
		Example: `task "ignition" {
  k8s_ignition {
    source = "mcs"
    url    = "api-int.${var.cluster_domain}"
    ca     = file("root-ca.pem")
  }
}`,
	}
}

// mcsOnly are the arguments that mean nothing to the machineconfig source.
var mcsOnly = []string{"url", "ca", "insecure", "spec_version", "ignition_version", "timeout"}

func (Ignition) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	src, srcOK := str(get(cfg, "source"))
	switch {
	case !srcOK:
	case src == "mcs":
		if isNull(get(cfg, "url")) {
			diags = append(diags, cfg.Error("url", "Missing url", `source = "mcs" needs url: the Machine Config Server's host or URL.`))
		} else if u, ok := str(get(cfg, "url")); ok {
			if _, err := kube.MCSURL(u); err != nil {
				diags = append(diags, cfg.Error("url", "Invalid url", err.Error()+"."))
			}
		}
		if !isNull(get(cfg, "api_server")) {
			diags = append(diags, cfg.Error("api_server", "api_server with the mcs source",
				`api_server applies to source = "machineconfig"; the MCS's config carries its own server URL.`))
		}
	case src == "machineconfig":
		for _, a := range mcsOnly {
			if _, explicit := cfg.Ranges[a]; explicit {
				diags = append(diags, cfg.Error(a, a+" with the machineconfig source",
					fmt.Sprintf(`%s applies to source = "mcs"; the machineconfig source reads the cluster through kubeconfig/context.`, a)))
			}
		}
		if u, ok := str(get(cfg, "api_server")); ok && !strings.HasPrefix(u, "https://") {
			diags = append(diags, cfg.Error("api_server", "Invalid api_server", fmt.Sprintf("api_server must be an https URL, got %q.", u)))
		}
	default:
		diags = append(diags, cfg.Error("source", "Invalid source", fmt.Sprintf(`source must be "mcs" or "machineconfig", got %q.`, src)))
	}
	if v := get(cfg, "spec_version"); v.IsKnown() && !v.IsNull() {
		if f := v.AsBigFloat(); f.Cmp(big.NewFloat(2)) != 0 && f.Cmp(big.NewFloat(3)) != 0 {
			diags = append(diags, cfg.Error("spec_version", "Invalid spec_version", "spec_version must be 2 or 3."))
		}
	}
	if v, ok := str(get(cfg, "ignition_version")); ok && !strings.HasPrefix(v, "3.") {
		diags = append(diags, cfg.Error("ignition_version", "Invalid ignition_version",
			fmt.Sprintf("ignition_version is a spec 3 version like %s, got %q; for spec 2 set spec_version = 2.", kube.DefaultIgnitionVersion, v)))
	}
	if b := get(cfg, "insecure"); b.IsKnown() && !b.IsNull() && b.True() && !isNull(get(cfg, "ca")) {
		diags = append(diags, cfg.Error("insecure", "insecure with a ca",
			"insecure skips verification, so the ca would be ignored; drop one of them."))
	}
	return append(diags, validateSeconds(cfg, nil, []string{"timeout"})...)
}

// read fetches and parses the config.
func (m Ignition) read(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	src, _ := str(get(cfg, "source"))
	if src == "machineconfig" {
		cl, known, diags := m.client(cfg)
		if diags.HasErrors() || !known {
			return unknownResult(ignitionResults), diags
		}
		server, _ := str(get(cfg, "api_server"))
		mi, err := kube.IgnitionFromMachineConfig(ctx, cl, server)
		if err != nil {
			return unknownResult(ignitionResults), apiError(cfg, "source", "Cannot read the worker MachineConfig", err)
		}
		return ignitionResult(mi.Ignition, "MachineConfig "+mi.MachineConfig), nil
	}
	req := kube.MCSRequest{}
	req.URL, _ = str(get(cfg, "url"))
	if ca, ok := str(get(cfg, "ca")); ok {
		req.CA = []byte(ca)
	}
	req.Insecure = get(cfg, "insecure").True()
	spec, _ := get(cfg, "spec_version").AsBigFloat().Int64()
	req.SpecVersion = int(spec)
	req.IgnitionVersion, _ = str(get(cfg, "ignition_version"))
	req.Timeout = seconds(get(cfg, "timeout"))
	ign, err := kube.FetchIgnition(ctx, req)
	if err != nil {
		return unknownResult(ignitionResults), hcl.Diagnostics{cfg.Error("url", "Cannot read the worker Ignition config", err.Error())}
	}
	url, _ := kube.MCSURL(req.URL)
	return ignitionResult(ign, url), nil
}

func ignitionResult(ign *kube.Ignition, from string) cty.Value {
	vals := map[string]cty.Value{
		"bootstrap_kubeconfig": cty.StringVal(validText(ign.BootstrapKubeconfig)),
		"kubelet_ca":           cty.StringVal(validText(ign.KubeletCA)),
		"cloud_provider":       optString(ign.CloudProvider),
		"cloud_config_name":    optString(ign.CloudConfigName),
		"kubelet_verbosity":    optString(ign.KubeletVerbosity),
		"spec_version":         cty.StringVal(ign.Version),
		"from":                 cty.StringVal(from),
	}
	if server, ca, err := kube.KubeconfigServer(ign.BootstrapKubeconfig); err == nil {
		vals["api_server"], vals["api_ca"] = optString(server), optString(validText(ca))
	}
	if ign.CloudConfigName != "" {
		vals["cloud_config"] = cty.StringVal(validText(ign.CloudConfig))
	}
	return result(ignitionResults, vals)
}

// optString is null for "": playbooks test for an absent flag with
// `!= null`, and an empty --cloud-provider= means none.
func optString(s string) cty.Value {
	if s == "" {
		return cty.NullVal(cty.String)
	}
	return cty.StringVal(s)
}

// validText keeps a cty string valid UTF-8; the files read are text.
func validText(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

func (m Ignition) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	// Arguments an earlier task produces are unknown in a plan; the read
	// happens when the run gets here with them known.
	if !cfg.Value.IsWhollyKnown() {
		return modules.PlanResponse{Result: unknownResult(ignitionResults)}
	}
	res, diags := m.read(ctx, cfg)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

// Apply is never called for a read (Plan returns no change); it reads again
// so that a caller that does call it gets the same answer.
func (m Ignition) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	pr := m.Plan(ctx, modules.PlanRequest{Config: req.Config})
	return modules.ApplyResponse{Result: pr.Result, Diagnostics: pr.Diagnostics}
}
