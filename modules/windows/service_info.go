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

var _ modules.Module = ServiceInfo{}

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
			"time and the task never shows a change. A service that does not exist is not an error " +
			"(`exists = false`); a host that cannot be asked is.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "name", Type: cty.String, Required: true,
				Description: "Service name (the key name, not the display name)."},
		},
		Results: serviceInfoResults,
		Example: `task "defender" {
  win_service_info {
    name = "WinDefend"
  }
}`,
	}
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

func (m ServiceInfo) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.read(ctx, req.Config, req.Host)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

// Apply is never called for a read (Plan returns no change); it reads again
// so that a caller that does call it gets the same answer.
func (m ServiceInfo) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.read(ctx, req.Config, req.Host)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
