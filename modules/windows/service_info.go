package windows

import (
	"context"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// ServiceInfo reads whether a service exists and how: a read that never
// changes anything, for tasks that apply only where a service is installed
// (Windows Defender's WinDefend, say).
type ServiceInfo struct{}

var (
	_ modules.Module    = ServiceInfo{}
	_ modules.Validator = ServiceInfo{}
)

var serviceInfoResults = []modules.Attribute{
	{Name: "exists", Type: cty.Bool, Description: "Whether the service is installed."},
	{Name: "state", Type: cty.String, Description: "Its run state (`\"running\"`, `\"stopped\"`, ...); null when it does not exist."},
	{Name: "path", Type: cty.String, Description: "Its binary's path; null when it does not exist."},
	{Name: "managed", Type: cty.Bool, Description: "Whether its description carries wsu's marker (`\"" + ManagedDescription + "\"`): wsu installed it."},
}

func (ServiceInfo) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_service_info",
		Summary: "Read whether a Windows service exists, its state and whether wsu installed it.",
		Description: "A read: the plan queries the service control manager, so the results are known at plan " +
			"time and the task shows no change (unless `name` is known only after apply: then apply reads). " +
			"A service that does not exist is not an error (`exists = false`); a host that cannot be asked is.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "name", Type: cty.String, Required: true,
				Description: "Service name (the key name, not the display name); at most 256 characters, no slashes."},
		},
		Results: serviceInfoResults,
		Example: `task "defender" {
  win_service_info {
    name = "WinDefend"
  }
}`,
	}
}

func (ServiceInfo) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	return validateServiceName(req.Config, "name")
}

func (ServiceInfo) read(ctx context.Context, cfg modules.Config, h host.Host) (cty.Value, hcl.Diagnostics) {
	if !cfg.Value.IsWhollyKnown() {
		return unknownResult(serviceInfoResults), nil
	}
	name, _ := str(get(cfg, "name"))
	info, err := h.QueryService(ctx, name)
	if err != nil {
		return unknownResult(serviceInfoResults), hcl.Diagnostics{cfg.Error("name", "Cannot query service "+name, err.Error())}
	}
	vals := map[string]cty.Value{"exists": cty.BoolVal(info.Exists), "managed": cty.False}
	if info.Exists {
		vals["state"] = cty.StringVal(string(info.State))
		vals["path"] = cty.StringVal(info.Config.BinaryPath)
		vals["managed"] = cty.BoolVal(strings.HasPrefix(info.Config.Description, ManagedDescription))
	}
	return result(serviceInfoResults, vals), nil
}

// Plan reads the service; with the name not known yet it plans the read
// for apply.
func (m ServiceInfo) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	if !req.Config.Value.IsWhollyKnown() {
		return modules.PlanResponse{Result: unknownResult(serviceInfoResults),
			Change: &modules.Change{Action: modules.Run, Subject: "read service " + knownAfterApply}}
	}
	res, diags := m.read(ctx, req.Config, req.Host)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

// Apply reads the service: a name that was unknown at plan time, or a
// caller that applies a read anyway gets the same answer as a plan.
func (m ServiceInfo) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	if diags := requireKnown(req.Config, "name"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(serviceInfoResults), Diagnostics: diags}
	}
	res, diags := m.read(ctx, req.Config, req.Host)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
