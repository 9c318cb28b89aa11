package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// HNSNetwork reads an HNS network (hybrid-overlay creates them) or removes
// one (node removal).
type HNSNetwork struct{}

var (
	_ modules.Module    = HNSNetwork{}
	_ modules.Validator = HNSNetwork{}
)

var hnsNetworkResults = []modules.Attribute{
	{Name: "exists", Type: cty.Bool, Description: "Whether the network exists (after the task)."},
	{Name: "id", Type: cty.String, Description: "The network's HNS id; null when absent."},
	{Name: "type", Type: cty.String, Description: "The network type, e.g. `Overlay`; null when absent."},
	{Name: "management_ip", Type: cty.String, Description: "The host's management IP on the network (the CNI config's ProviderAddress); null when absent."},
	{Name: "subnets", Type: cty.List(cty.String), Description: "The network's address prefixes."},
}

func (HNSNetwork) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_hns_network",
		Summary: "Read an HNS network, or remove one, on a Windows host.",
		Description: "With `state = \"present\"` the task reads the network and fails if it does not " +
			"exist (wait for it first with `win_wait { hns_network = ... }`): its results feed the CNI " +
			"config. With `state = \"absent\"` it deletes the network and its endpoints. Deleting the " +
			"hybrid-overlay networks drops the host's connection for a while; the engine reconnects and " +
			"runs the task again, which then finds nothing left to do.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "name", Type: cty.String, Required: true, Description: "Network name, e.g. `OVNKubernetesHybridOverlayNetwork`."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"), Description: "`\"present\"` to read it (it must exist), `\"absent\"` to remove it."},
		},
		Results: hnsNetworkResults,
		Example: `task "overlay" {
  win_hns_network {
    name = "OVNKubernetesHybridOverlayNetwork"
  }
}`,
	}
}

func (HNSNetwork) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	diags := validateEnum(req.Config, "state", "present", "absent")
	if n, ok := str(get(req.Config, "name")); ok && strings.TrimSpace(n) == "" {
		diags = append(diags, req.Config.Error("name", "Invalid network name", "name must not be empty."))
	}
	return diags
}

func findNetwork(ctx context.Context, h host.Host, name string) (*host.HNSNetwork, error) {
	nets, err := h.HNSNetworks(ctx)
	if err != nil {
		return nil, err
	}
	for i := range nets {
		if strings.EqualFold(nets[i].Name, name) {
			return &nets[i], nil
		}
	}
	return nil, nil
}

func networkResult(n *host.HNSNetwork) cty.Value {
	if n == nil {
		return result(hnsNetworkResults, map[string]cty.Value{"exists": cty.False, "subnets": cty.ListValEmpty(cty.String)})
	}
	mgmt := cty.NullVal(cty.String)
	if n.ManagementIP != "" {
		mgmt = cty.StringVal(n.ManagementIP)
	}
	return result(hnsNetworkResults, map[string]cty.Value{
		"exists": cty.True, "id": cty.StringVal(n.ID), "type": cty.StringVal(n.Type),
		"management_ip": mgmt, "subnets": listVal(n.Subnets),
	})
}

func (m HNSNetwork) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	name, nameOK := str(get(cfg, "name"))
	state, stateOK := str(get(cfg, "state"))
	if !nameOK || !stateOK {
		// Whether it reads or deletes is decided at apply.
		return modules.PlanResponse{Result: unknownResult(hnsNetworkResults), Change: &modules.Change{Action: modules.Update, Subject: knownAfterApply}}
	}
	if d := onWindows(ctx, req.Host, cfg, "name"); d.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(hnsNetworkResults), Diagnostics: d}
	}
	n, err := findNetwork(ctx, req.Host, name)
	if hnsLater(err, req.Pending) {
		return modules.PlanResponse{Result: unknownResult(hnsNetworkResults)}
	}
	if err != nil {
		return modules.PlanResponse{Result: unknownResult(hnsNetworkResults), Diagnostics: hostError(cfg, "name", "Cannot list HNS networks", err)}
	}
	switch {
	case state == "present" && n == nil && req.Pending:
		// A dry run before the changes that create the network (starting
		// hybrid-overlay-node): it is read at apply.
		return modules.PlanResponse{Result: unknownResult(hnsNetworkResults)}
	case state == "present" && n == nil:
		return modules.PlanResponse{Result: unknownResult(hnsNetworkResults), Diagnostics: hcl.Diagnostics{cfg.Error("name", "HNS network not found",
			fmt.Sprintf("There is no HNS network named %q on this host. hybrid-overlay-node creates the overlay networks; wait for them with win_wait.", name))}}
	case state == "absent" && n != nil:
		return modules.PlanResponse{Result: networkResult(nil), Change: &modules.Change{Action: modules.Delete, Subject: name,
			Fields: []modules.FieldChange{{Name: "id", Old: cty.StringVal(n.ID), New: cty.NullVal(cty.String)}}}}
	}
	return modules.PlanResponse{Result: networkResult(n)}
}

func (m HNSNetwork) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if d := requireKnown(cfg, "name", "state"); d.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(hnsNetworkResults), Diagnostics: d}
	}
	name, _ := str(get(cfg, "name"))
	if state, _ := str(get(cfg, "state")); state == "present" {
		// Planned with unknown values: read now.
		n, err := findNetwork(ctx, req.Host, name)
		if err != nil || n == nil {
			return modules.ApplyResponse{Result: unknownResult(hnsNetworkResults), Diagnostics: hcl.Diagnostics{cfg.Error("name", "HNS network not found", fmt.Sprintf("There is no HNS network named %q on this host (%v).", name, err))}}
		}
		return modules.ApplyResponse{Result: networkResult(n)}
	}
	n, err := findNetwork(ctx, req.Host, name)
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(hnsNetworkResults), Diagnostics: hostError(cfg, "name", "Cannot list HNS networks", err)}
	}
	if n != nil {
		if err := req.Host.HNSDeleteNetwork(ctx, n.ID); err != nil {
			return modules.ApplyResponse{Result: unknownResult(hnsNetworkResults), Diagnostics: hostError(cfg, "name", "Cannot delete HNS network", err)}
		}
	}
	return modules.ApplyResponse{Result: networkResult(nil)}
}

// HNSEndpoint ensures an HNS endpoint exists (kube-proxy's source VIP) or
// is gone.
type HNSEndpoint struct{}

var (
	_ modules.Module    = HNSEndpoint{}
	_ modules.Validator = HNSEndpoint{}
)

var hnsEndpointResults = []modules.Attribute{
	{Name: "id", Type: cty.String, Description: "The endpoint's HNS id; null when absent."},
	{Name: "ip", Type: cty.String, Description: "The endpoint's IP address (kube-proxy's sourceVip); null when absent."},
	{Name: "mac", Type: cty.String, Description: "The endpoint's MAC address; null when absent."},
}

func (HNSEndpoint) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_hns_endpoint",
		Summary: "Create (if absent) or remove an HNS endpoint on a Windows host.",
		Description: "kube-proxy in overlay mode needs a source VIP: an endpoint named `VIPEndpoint` on " +
			"the hybrid-overlay network, attached to the host compartment. An existing endpoint of that " +
			"name is kept as it is (its IP is the VIP kube-proxy already uses).",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "name", Type: cty.String, Required: true, Description: "Endpoint name, e.g. `VIPEndpoint`."},
			{Name: "network", Type: cty.String, Required: true, Description: "Name of the HNS network the endpoint belongs to."},
			{Name: "host_attach", Type: cty.Bool, Default: cty.True, Description: "Attach the endpoint to the host compartment."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"), Description: "`\"present\"` or `\"absent\"`."},
		},
		Results: hnsEndpointResults,
		Example: `task "vip" {
  win_hns_endpoint {
    name    = "VIPEndpoint"
    network = "OVNKubernetesHybridOverlayNetwork"
  }
}`,
	}
}

func (HNSEndpoint) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	diags := validateEnum(req.Config, "state", "present", "absent")
	for _, a := range []string{"name", "network"} {
		if v, ok := str(get(req.Config, a)); ok && strings.TrimSpace(v) == "" {
			diags = append(diags, req.Config.Error(a, "Empty "+a, a+" must not be empty."))
		}
	}
	return diags
}

// hnsLater: in a dry run before the changes that make HNS answer (the
// Containers feature enabled and the node restarted), a failing HNS is
// read at apply instead. A platform without HNS fails the plan anyway.
func hnsLater(err error, pending bool) bool {
	return err != nil && pending && !errors.Is(err, host.ErrNotSupported)
}

func findEndpoint(ctx context.Context, h host.Host, name, network string) (*host.HNSEndpoint, error) {
	eps, err := h.HNSEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	for i := range eps {
		if strings.EqualFold(eps[i].Name, name) && strings.EqualFold(eps[i].Network, network) {
			return &eps[i], nil
		}
	}
	return nil, nil
}

func endpointResult(e *host.HNSEndpoint) cty.Value {
	if e == nil {
		return result(hnsEndpointResults, nil)
	}
	return result(hnsEndpointResults, map[string]cty.Value{"id": cty.StringVal(e.ID), "ip": cty.StringVal(e.IP), "mac": cty.StringVal(e.MAC)})
}

func (m HNSEndpoint) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	name, ok1 := str(get(cfg, "name"))
	network, ok2 := str(get(cfg, "network"))
	state, ok3 := str(get(cfg, "state"))
	if !ok1 || !ok2 || !ok3 {
		return modules.PlanResponse{Result: unknownResult(hnsEndpointResults), Change: &modules.Change{Action: modules.Create, Subject: knownAfterApply}}
	}
	if d := onWindows(ctx, req.Host, cfg, "name"); d.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(hnsEndpointResults), Diagnostics: d}
	}
	ep, err := findEndpoint(ctx, req.Host, name, network)
	if hnsLater(err, req.Pending) {
		return modules.PlanResponse{Result: unknownResult(hnsEndpointResults)}
	}
	if err != nil {
		return modules.PlanResponse{Result: unknownResult(hnsEndpointResults), Diagnostics: hostError(cfg, "name", "Cannot list HNS endpoints", err)}
	}
	subject := name + " on " + network
	switch {
	case state == "present" && ep == nil:
		return modules.PlanResponse{Result: unknownResult(hnsEndpointResults), Change: &modules.Change{Action: modules.Create, Subject: subject,
			Fields: []modules.FieldChange{{Name: "ip", Old: cty.NullVal(cty.String), New: cty.UnknownVal(cty.String)}}}}
	case state == "absent" && ep != nil:
		return modules.PlanResponse{Result: endpointResult(nil), Change: &modules.Change{Action: modules.Delete, Subject: subject,
			Fields: []modules.FieldChange{{Name: "ip", Old: cty.StringVal(ep.IP), New: cty.NullVal(cty.String)}}}}
	}
	return modules.PlanResponse{Result: endpointResult(ep)}
}

func (m HNSEndpoint) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if d := requireKnown(cfg, "name", "network", "state", "host_attach"); d.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(hnsEndpointResults), Diagnostics: d}
	}
	name, _ := str(get(cfg, "name"))
	network, _ := str(get(cfg, "network"))
	state, _ := str(get(cfg, "state"))
	attach := get(cfg, "host_attach")
	ep, err := findEndpoint(ctx, req.Host, name, network)
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(hnsEndpointResults), Diagnostics: hostError(cfg, "name", "Cannot list HNS endpoints", err)}
	}
	if state == "absent" {
		if ep != nil {
			if err := req.Host.HNSDeleteEndpoint(ctx, ep.ID); err != nil {
				return modules.ApplyResponse{Result: unknownResult(hnsEndpointResults), Diagnostics: hostError(cfg, "name", "Cannot delete HNS endpoint", err)}
			}
		}
		return modules.ApplyResponse{Result: endpointResult(nil)}
	}
	if ep == nil {
		created, err := req.Host.HNSCreateEndpoint(ctx, host.HNSEndpoint{Name: name, Network: network, HostAttach: attach.IsKnown() && !attach.IsNull() && attach.True()})
		if err != nil {
			return modules.ApplyResponse{Result: unknownResult(hnsEndpointResults), Diagnostics: hostError(cfg, "network", "Cannot create HNS endpoint", err)}
		}
		ep = &created
	}
	return modules.ApplyResponse{Result: endpointResult(ep)}
}

// Kill terminates processes by image name, as removal must for leftover
// containerd-shim-runhcs-v1 processes.
type Kill struct{}

var (
	_ modules.Module    = Kill{}
	_ modules.Validator = Kill{}
)

var killResults = []modules.Attribute{
	{Name: "killed", Type: cty.Number, Description: "How many processes were terminated (0 in plan, or when none ran)."},
}

func (Kill) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_kill",
		Summary: "Terminate every process with a given image name on a Windows host.",
		Description: "Plans a change only when a matching process runs, so a second run reports no " +
			"change. Image names compare case-insensitively (`containerd-shim-runhcs-v1.exe`).",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "image", Type: cty.String, Required: true, Description: "Executable name, with or without `.exe`."},
		},
		Results: killResults,
		Example: `task "shims" {
  win_kill {
    image = "containerd-shim-runhcs-v1.exe"
  }
}`,
	}
}

func (Kill) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	if v, ok := str(get(req.Config, "image")); ok && (strings.TrimSpace(v) == "" || strings.ContainsAny(v, `\/`)) {
		return hcl.Diagnostics{req.Config.Error("image", "Invalid image name", "image is a file name such as kube-proxy.exe, without a directory.")}
	}
	return nil
}

func imageMatches(image, want string) bool {
	trim := func(s string) string { return strings.TrimSuffix(strings.ToLower(s), ".exe") }
	return trim(image) == trim(want)
}

func (m Kill) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	image, ok := str(get(cfg, "image"))
	if !ok {
		return modules.PlanResponse{Result: unknownResult(killResults), Change: &modules.Change{Action: modules.Run, Subject: knownAfterApply}}
	}
	if d := onWindows(ctx, req.Host, cfg, "image"); d.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(killResults), Diagnostics: d}
	}
	procs, err := req.Host.ListProcesses(ctx)
	if err != nil {
		return modules.PlanResponse{Result: unknownResult(killResults), Diagnostics: hostError(cfg, "image", "Cannot list processes", err)}
	}
	n := 0
	for _, p := range procs {
		if imageMatches(p.Image, image) {
			n++
		}
	}
	if n == 0 {
		return modules.PlanResponse{Result: result(killResults, map[string]cty.Value{"killed": cty.Zero})}
	}
	return modules.PlanResponse{Result: unknownResult(killResults), Change: &modules.Change{Action: modules.Run,
		Subject: fmt.Sprintf("terminate %d %s process(es)", n, image)}}
}

func (m Kill) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	if d := requireKnown(req.Config, "image"); d.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(killResults), Diagnostics: d}
	}
	image, _ := str(get(req.Config, "image"))
	if !strings.HasSuffix(strings.ToLower(image), ".exe") {
		image += ".exe" // Windows image names carry the extension
	}
	n, err := req.Host.Kill(ctx, 0, image)
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(killResults), Diagnostics: hostError(req.Config, "image", "Cannot terminate processes", err)}
	}
	return modules.ApplyResponse{Result: result(killResults, map[string]cty.Value{"killed": cty.NumberIntVal(int64(n))})}
}
