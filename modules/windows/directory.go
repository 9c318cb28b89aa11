package windows

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Directory makes a directory exist on a Windows host, or removes a tree.
type Directory struct{}

var (
	_ modules.Module    = Directory{}
	_ modules.Validator = Directory{}
)

var directoryResults = []modules.Attribute{
	{Name: "path", Type: cty.String, Description: "The managed path."},
}

func (Directory) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_directory",
		Summary: "Create a directory (with parents) on a Windows host, or remove a directory tree.",
		Description: "Ensures a directory exists, creating missing parents. With `state = \"absent\"` " +
			"the directory and **everything in it** is removed; a drive or share root is refused. " +
			"A regular file at the path is an error, never silently replaced. Paths compare as " +
			"Windows compares them: case-insensitively, with either separator.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "path", Type: cty.String, Required: true,
				Description: "Absolute Windows path of the directory (`C:\\k\\cni` or `C:/k/cni`)."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` to create the directory, `\"absent\"` to remove it recursively."},
		},
		Results: directoryResults,
		Example: `task "log_dirs" {
  for_each = toset(["kubelet", "kube-proxy", "containerd"])
  win_directory {
    path = "C:\\var\\log\\${each.key}"
  }
}`,
	}
}

func (Directory) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validatePath(cfg, "path")
	diags = append(diags, validateEnum(cfg, "state", "present", "absent")...)
	p, pathOK := str(get(cfg, "path"))
	state, stateOK := str(get(cfg, "state"))
	if pathOK && stateOK && state == "absent" && checkWinPath(p) == "" && isRoot(p) {
		diags = append(diags, cfg.Error("path", "Refusing to remove a root",
			fmt.Sprintf("state = \"absent\" would delete everything under %s.", p)))
	}
	return diags
}

func (m Directory) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	if diags := m.Validate(modules.ValidateRequest{Config: cfg}); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(directoryResults), Diagnostics: diags}
	}
	pathV := get(cfg, "path")
	path, pathOK := str(pathV)
	state, stateOK := str(get(cfg, "state"))
	res := result(directoryResults, map[string]cty.Value{"path": pathV})

	if !pathOK || !stateOK {
		// The host cannot be asked about a path not known yet.
		subject := knownAfterApply
		if pathOK {
			subject = path
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: subject}, Result: res}
	}
	diags := onWindows(ctx, req.Host, cfg, "path")
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	fi, diags := statDir(ctx, req.Host, cfg, path)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	var change *modules.Change
	switch {
	case state == "absent" && fi.Exists:
		change = &modules.Change{Action: modules.Delete, Subject: path}
	case state == "present" && !fi.Exists:
		change = &modules.Change{Action: modules.Create, Subject: path}
	}
	return modules.PlanResponse{Change: change, Result: res}
}

func (m Directory) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	diags := m.Validate(modules.ValidateRequest{Config: cfg})
	if diags = append(diags, requireKnown(cfg, "path", "state")...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(directoryResults), Diagnostics: diags}
	}
	path, _ := str(get(cfg, "path"))
	state, _ := str(get(cfg, "state"))
	res := result(directoryResults, map[string]cty.Value{"path": cty.StringVal(path)})
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: res, Diagnostics: d}
	}
	if diags := onWindows(ctx, req.Host, cfg, "path"); diags.HasErrors() {
		return fail(diags)
	}
	// Converge from what is there now rather than replaying the plan.
	fi, diags := statDir(ctx, req.Host, cfg, path)
	if diags.HasErrors() {
		return fail(diags)
	}
	switch {
	case state == "absent" && fi.Exists:
		if err := req.Host.Remove(ctx, path, true); err != nil {
			return fail(hostError(cfg, "path", "Cannot remove directory", err))
		}
	case state == "present" && !fi.Exists:
		if err := req.Host.MkdirAll(ctx, path, 0o755); err != nil {
			return fail(hostError(cfg, "path", "Cannot create directory", err))
		}
	}
	return modules.ApplyResponse{Result: res}
}

// statDir stats path and refuses a non-directory in the way.
func statDir(ctx context.Context, h host.Host, cfg modules.Config, path string) (host.FileInfo, hcl.Diagnostics) {
	fi, err := h.Stat(ctx, path)
	if err != nil {
		return fi, hostError(cfg, "path", "Cannot read directory state", err)
	}
	if fi.Exists && !fi.IsDir {
		return fi, hcl.Diagnostics{cfg.Error("path", "Path is not a directory",
			fmt.Sprintf("%s exists and is not a directory; it is left alone.", path))}
	}
	return fi, nil
}
