package generic

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Directory makes a directory exist with a given mode, or removes a tree.
type Directory struct {
	// Paths are the path rules; nil means this package's (any absolute
	// path, any host).
	Paths PathRules
}

var (
	_ modules.Module    = Directory{}
	_ modules.Validator = Directory{}
)

var directoryResults = []modules.Attribute{
	{Name: "path", Type: cty.String, Description: "The managed path."},
}

// defaultDirMode is what a new directory gets when no mode is set.
const defaultDirMode fs.FileMode = 0o755

func (Directory) Schema() modules.Schema {
	return modules.Schema{
		Name:    "directory",
		Summary: "Create a directory (with parents) or remove a directory tree.",
		Description: "Ensures a directory exists, creating missing parents, and optionally sets its " +
			"permission bits. With `state = \"absent\"` the directory and **everything in it** is " +
			"removed. A regular file at the path is an error, never silently replaced.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "path", Type: cty.String, Required: true,
				Description: "Absolute path of the directory (`/opt/wsu` or `C:\\k`)."},
			{Name: "mode", Type: cty.String,
				Description: "Permission bits as an octal string such as `\"0755\"`. Unset: new directories get 0755 (less the umask) and existing ones keep theirs. Ignored on Windows."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` to create the directory, `\"absent\"` to remove it recursively."},
		},
		Results: directoryResults,
		Example: `task "cni_dir" {
  directory {
    path = "C:\\k\\cni\\config"
  }
}`,
	}
}

func (m Directory) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	rules := rulesOr(m.Paths)
	pathDiags := rules.ValidatePath(cfg, "path")
	diags := pathDiags
	diags = append(diags, validateState(cfg)...)
	diags = append(diags, validateMode(cfg)...)
	p, pathOK := str(get(cfg, "path"))
	state, stateOK := str(get(cfg, "state"))
	// A path that is no path at all is reported once, above.
	if pathOK && stateOK && state == "absent" && !pathDiags.HasErrors() && rules.IsRoot(p) {
		diags = append(diags, cfg.Error("path", "Refusing to remove a root",
			fmt.Sprintf("state = \"absent\" would delete everything under %s.", p)))
	}
	return diags
}

func (m Directory) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	pathV := get(cfg, "path")
	path, pathOK := str(pathV)
	state, stateOK := str(get(cfg, "state"))
	mode := decodeMode(cfg)
	res := result(directoryResults, map[string]cty.Value{"path": pathV})

	if !pathOK || !stateOK {
		subject := knownAfterApply
		if pathOK {
			subject = path
		}
		var fields []modules.FieldChange
		if mode.set && state != "absent" {
			fields = append(fields, modules.FieldChange{Name: "mode", Old: cty.UnknownVal(cty.String), New: mode.value()})
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: subject, Fields: fields}, Result: res}
	}

	windows, diags := rulesOr(m.Paths).CheckHost(ctx, req.Host, cfg, path)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	if windows && mode.set && state == "present" {
		diags = append(diags, modeIgnored(cfg))
	}
	fi, d := m.StatDir(ctx, req.Host, cfg, path)
	if diags = append(diags, d...); diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	setMode := mode.set && !windows

	var change *modules.Change
	switch {
	case state == "absent":
		if fi.Exists {
			change = &modules.Change{Action: modules.Delete, Subject: path}
		}
	case !fi.Exists:
		change = &modules.Change{Action: modules.Create, Subject: path}
		if setMode {
			change.Fields = []modules.FieldChange{{Name: "mode", Old: cty.NullVal(cty.String), New: mode.value()}}
		}
	case setMode && (!mode.known || fi.Mode.Perm() != mode.mode):
		change = &modules.Change{Action: modules.Update, Subject: path, Fields: []modules.FieldChange{
			{Name: "mode", Old: cty.StringVal(formatMode(fi.Mode)), New: mode.value()},
		}}
	}
	return modules.PlanResponse{Change: change, Result: res, Diagnostics: diags}
}

func (m Directory) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "path", "state", "mode"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(directoryResults), Diagnostics: diags}
	}
	path, _ := str(get(cfg, "path"))
	state, _ := str(get(cfg, "state"))
	mode := decodeMode(cfg)
	res := result(directoryResults, map[string]cty.Value{"path": cty.StringVal(path)})
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: res, Diagnostics: d}
	}

	rules := rulesOr(m.Paths)
	windows, diags := rules.CheckHost(ctx, req.Host, cfg, path)
	if diags.HasErrors() {
		return fail(diags)
	}
	fi, diags := m.StatDir(ctx, req.Host, cfg, path)
	if diags.HasErrors() {
		return fail(diags)
	}
	h := req.Host

	if state == "absent" {
		if fi.Exists {
			if err := h.Remove(ctx, path, true); err != nil {
				return fail(rules.HostError(cfg, "Cannot remove directory", err))
			}
		}
		return modules.ApplyResponse{Result: res}
	}
	if !fi.Exists {
		perm := defaultDirMode
		if mode.known {
			perm = mode.mode
		}
		if err := h.MkdirAll(ctx, path, perm); err != nil {
			return fail(rules.HostError(cfg, "Cannot create directory", err))
		}
	}
	// Chmod even after MkdirAll: the umask may have masked the mode.
	if mode.known && !windows && (!fi.Exists || fi.Mode.Perm() != mode.mode) {
		if err := h.Chmod(ctx, path, mode.mode); err != nil {
			return fail(rules.HostError(cfg, "Cannot change mode", err))
		}
	}
	return modules.ApplyResponse{Result: res}
}

// StatDir stats path and refuses a non-directory in the way. It is exported
// for the wrapping modules' own ways of looking at a directory.
func (m Directory) StatDir(ctx context.Context, h host.Host, cfg modules.Config, path string) (host.FileInfo, hcl.Diagnostics) {
	fi, err := h.Stat(ctx, path)
	if err != nil {
		return fi, rulesOr(m.Paths).HostError(cfg, "Cannot read directory state", err)
	}
	if fi.Exists && !fi.IsDir {
		return fi, hcl.Diagnostics{cfg.Error("path", "Path is not a directory",
			fmt.Sprintf("%s exists and is not a directory; it is left alone.", path))}
	}
	return fi, nil
}
