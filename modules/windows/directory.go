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
	"github.com/wsu-project/wsu/modules/generic"
)

// Directory makes a directory exist on a Windows host, or removes a tree
// (or, with only_if_empty, an empty directory). It is the generic directory
// module with Windows path rules and no mode; only_if_empty, which the
// generic module lacks, is this module's own.
type Directory struct{}

var (
	_ modules.Module    = Directory{}
	_ modules.Validator = Directory{}
)

// directory is the generic module this one wraps.
func directory() generic.Directory { return generic.Directory{Paths: winPaths{}} }

var directoryResults = []modules.Attribute{
	{Name: "path", Type: cty.String, Description: "The managed path."},
	{Name: "kept_not_empty", Type: cty.Bool,
		Description: "Whether `only_if_empty` left the directory in place because it was not empty; false " +
			"otherwise. Unknown in a plan that removes the directory: Apply looks again."},
}

func (Directory) Schema() modules.Schema {
	s := directory().Schema()
	s.Name = "win_directory"
	s.Summary = "Create a directory (with parents) on a Windows host, or remove a directory tree."
	s.Description = "Ensures a directory exists, creating missing parents. With `state = \"absent\"` " +
		"the directory and **everything in it** is removed; a drive or share root is refused. " +
		"With `only_if_empty = true` as well, the directory is removed only when it is empty: " +
		"one that holds anything is left as it is, without an error, and the result's " +
		"`kept_not_empty` says so. That is how to remove a parent such as `C:\\var` that other " +
		"software may share. A regular file at the path is an error, never silently replaced. " +
		"Paths compare as Windows compares them: case-insensitively, with either separator."
	s.Attributes = append(windowsAttributes(s.Attributes, map[string]string{
		"path":  "Absolute Windows path of the directory (`C:\\k\\cni` or `C:/k/cni`).",
		"state": "`\"present\"` to create the directory, `\"absent\"` to remove it (recursively, unless `only_if_empty`).",
	}), modules.Attribute{Name: "only_if_empty", Type: cty.Bool, Default: cty.False,
		Description: "With `state = \"absent\"`: remove the directory only if it is empty, and leave a non-empty one " +
			"alone (not an error). Only valid with `state = \"absent\"`."})
	s.Results = directoryResults
	s.Example = `task "log_dirs" {
  for_each = toset(["kubelet", "kube-proxy", "containerd"])
  win_directory {
    path = "C:\\var\\log\\${each.key}"
  }
}`
	return s
}

func (Directory) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := directory().Validate(modules.ValidateRequest{Config: withoutMode(cfg)})
	state, stateOK := str(get(cfg, "state"))
	if onlyIfEmpty, ok := boolAttr(cfg, "only_if_empty"); ok && onlyIfEmpty && stateOK && state != "absent" {
		diags = append(diags, cfg.Error("only_if_empty", "only_if_empty needs state = \"absent\"",
			fmt.Sprintf("only_if_empty chooses how a directory is removed; with state = %q nothing is.", state)))
	}
	return diags
}

// withKept is the generic module's result with kept_not_empty added.
func withKept(res, kept cty.Value) cty.Value {
	path := cty.UnknownVal(cty.String)
	if res.IsKnown() && !res.IsNull() {
		path = res.GetAttr("path")
	}
	return result(directoryResults, map[string]cty.Value{"path": path, "kept_not_empty": kept})
}

func (m Directory) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	pathV := get(cfg, "path")
	path, pathOK := str(pathV)
	state, stateOK := str(get(cfg, "state"))
	onlyIfEmpty, onlyOK := boolAttr(cfg, "only_if_empty")
	switch {
	case !onlyOK:
		// How the directory would be removed is not known: the host cannot
		// be asked.
		subject := knownAfterApply
		if pathOK {
			subject = path
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: subject},
			Result: withKept(result(directoryResults, map[string]cty.Value{"path": pathV}), cty.UnknownVal(cty.Bool))}
	case pathOK && stateOK && state == "absent" && onlyIfEmpty:
		return planRemoveIfEmpty(ctx, req.Host, cfg, path)
	}
	req.Config = withoutMode(cfg)
	resp := directory().Plan(ctx, req)
	kept := cty.False
	if !pathOK || !stateOK {
		kept = cty.UnknownVal(cty.Bool)
	}
	resp.Result = withKept(resp.Result, kept)
	return resp
}

// planRemoveIfEmpty plans state = "absent" with only_if_empty. One listing
// tells missing, empty and not empty apart: one round trip after the
// facts, as for the other states.
func planRemoveIfEmpty(ctx context.Context, h host.Host, cfg modules.Config, path string) modules.PlanResponse {
	res := func(kept cty.Value) cty.Value {
		return result(directoryResults, map[string]cty.Value{"path": cty.StringVal(path), "kept_not_empty": kept})
	}
	if diags := onWindows(ctx, h, cfg, "path"); diags.HasErrors() {
		return modules.PlanResponse{Result: res(cty.False), Diagnostics: diags}
	}
	ds, diags := listDir(ctx, h, cfg, path)
	switch {
	case diags.HasErrors():
		return modules.PlanResponse{Result: res(cty.False), Diagnostics: diags}
	case ds == dirEmpty:
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Delete, Subject: path}, Result: res(cty.UnknownVal(cty.Bool))}
	}
	return modules.PlanResponse{Result: res(cty.BoolVal(ds == dirNotEmpty))}
}

func (m Directory) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "path", "state", "only_if_empty"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(directoryResults), Diagnostics: diags}
	}
	path, _ := str(get(cfg, "path"))
	state, _ := str(get(cfg, "state"))
	onlyIfEmpty, _ := boolAttr(cfg, "only_if_empty")
	if state != "absent" || !onlyIfEmpty {
		req.Config = withoutMode(cfg)
		resp := directory().Apply(ctx, req)
		resp.Result = withKept(resp.Result, cty.False)
		return resp
	}
	res := func(kept bool) cty.Value {
		return result(directoryResults, map[string]cty.Value{"path": cty.StringVal(path), "kept_not_empty": cty.BoolVal(kept)})
	}
	if diags := onWindows(ctx, req.Host, cfg, "path"); diags.HasErrors() {
		return modules.ApplyResponse{Result: res(false), Diagnostics: diags}
	}
	// Converge from what is there now rather than replaying the plan.
	kept, diags := removeIfEmpty(ctx, req.Host, cfg, path)
	return modules.ApplyResponse{Result: res(kept && !diags.HasErrors()), Diagnostics: diags}
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
	if _, diags := directory().StatDir(ctx, h, cfg, path); diags.HasErrors() {
		return dirMissing, diags
	}
	return dirMissing, hostError(cfg, "path", "Cannot read directory state", err)
}
