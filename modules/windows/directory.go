package windows

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Directory makes a directory exist on a Windows host, or removes a tree
// (or, with only_if_empty, an empty directory).
type Directory struct{}

var (
	_ modules.Module    = Directory{}
	_ modules.Validator = Directory{}
)

var directoryResults = []modules.Attribute{
	{Name: "path", Type: cty.String, Description: "The managed path."},
	{Name: "kept_not_empty", Type: cty.Bool,
		Description: "Whether `only_if_empty` left the directory in place because it was not empty; false " +
			"otherwise. Unknown in a plan that removes the directory: Apply looks again."},
}

func (Directory) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_directory",
		Summary: "Create a directory (with parents) on a Windows host, or remove a directory tree.",
		Description: "Ensures a directory exists, creating missing parents. With `state = \"absent\"` " +
			"the directory and **everything in it** is removed; a drive or share root is refused. " +
			"With `only_if_empty = true` as well, the directory is removed only when it is empty: " +
			"one that holds anything is left as it is, without an error, and the result's " +
			"`kept_not_empty` says so. That is how to remove a parent such as `C:\\var` that other " +
			"software may share. A regular file at the path is an error, never silently replaced. " +
			"Paths compare as Windows compares them: case-insensitively, with either separator.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "path", Type: cty.String, Required: true,
				Description: "Absolute Windows path of the directory (`C:\\k\\cni` or `C:/k/cni`)."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` to create the directory, `\"absent\"` to remove it (recursively, unless `only_if_empty`)."},
			{Name: "only_if_empty", Type: cty.Bool, Default: cty.False,
				Description: "With `state = \"absent\"`: remove the directory only if it is empty, and leave a non-empty one " +
					"alone (not an error). Only valid with `state = \"absent\"`."},
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
	if onlyIfEmpty, ok := boolAttr(cfg, "only_if_empty"); ok && onlyIfEmpty && stateOK && state != "absent" {
		diags = append(diags, cfg.Error("only_if_empty", "only_if_empty needs state = \"absent\"",
			fmt.Sprintf("only_if_empty chooses how a directory is removed; with state = %q nothing is.", state)))
	}
	return diags
}

// boolAttr reads a known bool; null is false.
func boolAttr(cfg modules.Config, name string) (v, ok bool) {
	b := get(cfg, name)
	if !b.IsKnown() || !b.Type().Equals(cty.Bool) {
		return false, false
	}
	return !b.IsNull() && b.True(), true
}

func (m Directory) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	pathV := get(cfg, "path")
	path, pathOK := str(pathV)
	state, stateOK := str(get(cfg, "state"))
	onlyIfEmpty, onlyOK := boolAttr(cfg, "only_if_empty")
	res := func(kept cty.Value) cty.Value {
		return result(directoryResults, map[string]cty.Value{"path": pathV, "kept_not_empty": kept})
	}

	if !pathOK || !stateOK || !onlyOK {
		// The host cannot be asked about a path not known yet.
		subject := knownAfterApply
		if pathOK {
			subject = path
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: subject}, Result: res(cty.UnknownVal(cty.Bool))}
	}
	diags := onWindows(ctx, req.Host, cfg, "path")
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res(cty.False), Diagnostics: diags}
	}
	if state == "absent" && onlyIfEmpty {
		// One listing tells missing, empty and not empty apart: one round
		// trip, as for the other states.
		ds, diags := listDir(ctx, req.Host, cfg, path)
		switch {
		case diags.HasErrors():
			return modules.PlanResponse{Result: res(cty.False), Diagnostics: diags}
		case ds == dirEmpty:
			return modules.PlanResponse{Change: &modules.Change{Action: modules.Delete, Subject: path}, Result: res(cty.UnknownVal(cty.Bool))}
		}
		return modules.PlanResponse{Result: res(cty.BoolVal(ds == dirNotEmpty))}
	}
	fi, diags := statDir(ctx, req.Host, cfg, path)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res(cty.False), Diagnostics: diags}
	}
	var change *modules.Change
	switch {
	case state == "absent" && fi.Exists:
		change = &modules.Change{Action: modules.Delete, Subject: path}
	case state == "present" && !fi.Exists:
		change = &modules.Change{Action: modules.Create, Subject: path}
	}
	return modules.PlanResponse{Change: change, Result: res(cty.False)}
}

func (m Directory) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "path", "state", "only_if_empty"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(directoryResults), Diagnostics: diags}
	}
	path, _ := str(get(cfg, "path"))
	state, _ := str(get(cfg, "state"))
	onlyIfEmpty, _ := boolAttr(cfg, "only_if_empty")
	res := func(kept bool) cty.Value {
		return result(directoryResults, map[string]cty.Value{"path": cty.StringVal(path), "kept_not_empty": cty.BoolVal(kept)})
	}
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: res(false), Diagnostics: d}
	}
	if diags := onWindows(ctx, req.Host, cfg, "path"); diags.HasErrors() {
		return fail(diags)
	}
	// Converge from what is there now rather than replaying the plan.
	if state == "absent" && onlyIfEmpty {
		kept, diags := removeIfEmpty(ctx, req.Host, cfg, path)
		if diags.HasErrors() {
			return fail(diags)
		}
		return modules.ApplyResponse{Result: res(kept)}
	}
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
	return modules.ApplyResponse{Result: res(false)}
}

// removeIfEmpty removes path if it is an empty directory and reports
// whether it kept a non-empty one. The non-recursive remove cannot delete
// anything that appeared after the listing; when it fails, a second listing
// tells such a newcomer (kept, as a plan would now) from a real failure.
func removeIfEmpty(ctx context.Context, h host.Host, cfg modules.Config, path string) (kept bool, diags hcl.Diagnostics) {
	ds, diags := listDir(ctx, h, cfg, path)
	if diags.HasErrors() || ds != dirEmpty {
		return ds == dirNotEmpty, diags
	}
	err := h.Remove(ctx, path, false)
	if err == nil {
		return false, nil
	}
	if again, d := listDir(ctx, h, cfg, path); !d.HasErrors() && again != dirEmpty {
		return again == dirNotEmpty, nil
	}
	return false, hostError(cfg, "path", "Cannot remove directory", err)
}

// dirState is what a listing says about a path.
type dirState int

const (
	dirMissing dirState = iota
	dirEmpty
	dirNotEmpty
)

// listDir asks for one entry, which is all emptiness needs. Only a failed
// listing costs a stat, to explain a file in the way plainly.
func listDir(ctx context.Context, h host.Host, cfg modules.Config, path string) (dirState, hcl.Diagnostics) {
	ents, err := h.ReadDir(ctx, path, 1)
	switch {
	case err == nil && len(ents) == 0:
		return dirEmpty, nil
	case err == nil:
		return dirNotEmpty, nil
	case errors.Is(err, fs.ErrNotExist):
		return dirMissing, nil
	}
	if _, diags := statDir(ctx, h, cfg, path); diags.HasErrors() {
		return dirMissing, diags
	}
	return dirMissing, hostError(cfg, "path", "Cannot read directory state", err)
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
