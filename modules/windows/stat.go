package windows

import (
	"context"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Stat reports whether a path exists on a Windows host, changing nothing.
// It is what lets a playbook decide before a change whether the change is
// due: join reads whether the kubelet already has its own kubeconfig (its
// client certificate) to know whether to mint a bootstrap token and write
// a bootstrap kubeconfig at all, so a re-run plans no change. It reads the
// host in the plan, so `when` expressions see the answer then.
type Stat struct{}

var (
	_ modules.Module    = Stat{}
	_ modules.Validator = Stat{}
)

var statResults = []modules.Attribute{
	{Name: "exists", Type: cty.Bool, Description: "Whether the path exists."},
	{Name: "is_dir", Type: cty.Bool, Description: "Whether it is a directory; false when it does not exist."},
	{Name: "size", Type: cty.Number, Description: "Size in bytes of a file; null when it does not exist or is a directory."},
}

func (Stat) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_stat",
		Summary: "Read whether a path exists on a Windows host (read-only).",
		Description: "Never changes anything: the plan and the apply both read the path and report it, " +
			"so a later task's `when` can depend on it at plan time. Only metadata is read, never content.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "path", Type: cty.String, Required: true,
				Description: "Absolute Windows path (`C:\\k\\kubeconfig`)."},
		},
		Results: statResults,
		Example: `task "kubelet kubeconfig" {
  win_stat {
    path = "C:\\k\\kubeconfig"
  }
}`,
	}
}

func (Stat) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	return validatePath(req.Config, "path")
}

// read stats the known path.
func (Stat) read(ctx context.Context, cfg modules.Config, h host.Host) (cty.Value, hcl.Diagnostics) {
	if diags := onWindows(ctx, h, cfg, "path"); diags.HasErrors() {
		return unknownResult(statResults), diags
	}
	path, _ := str(get(cfg, "path"))
	fi, err := h.Stat(ctx, path)
	if err != nil {
		return unknownResult(statResults), hostError(cfg, "path", "Cannot read the path", err)
	}
	size := cty.NullVal(cty.Number)
	if fi.Exists && !fi.IsDir {
		size = cty.NumberIntVal(fi.Size)
	}
	return result(statResults, map[string]cty.Value{
		"exists": cty.BoolVal(fi.Exists), "is_dir": cty.BoolVal(fi.Exists && fi.IsDir), "size": size,
	}), nil
}

// Plan reads the path; one not known yet is read at apply, which the plan
// shows as a run (as win_service_info does).
func (m Stat) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	if !req.Config.Value.IsWhollyKnown() {
		return modules.PlanResponse{Result: unknownResult(statResults),
			Change: &modules.Change{Action: modules.Run, Subject: "read " + knownAfterApply}}
	}
	res, diags := m.read(ctx, req.Config, req.Host)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

// Apply reads again: the path may have changed since the plan, or was not
// known then.
func (m Stat) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	if diags := requireKnown(req.Config, "path"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(statResults), Diagnostics: diags}
	}
	res, diags := m.read(ctx, req.Config, req.Host)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
