package windows

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Path adds one directory to the machine PATH, or removes it.
type Path struct{}

var (
	_ modules.Module    = Path{}
	_ modules.Validator = Path{}
)

var pathResults = []modules.Attribute{
	{Name: "entry", Type: cty.String, Description: "The managed PATH entry."},
}

func (Path) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_path",
		Summary: "Add a directory to the machine PATH on a Windows host, or remove it.",
		Description: "Keeps one entry on the machine-wide `Path` variable and leaves every other entry " +
			"alone. Entries compare as Windows paths do: case-insensitively, with either separator " +
			"and ignoring a trailing backslash, so `C:\\k` and `c:\\K\\` are the same entry. A new " +
			"entry is appended; removal drops every spelling of it. Services and new processes see " +
			"the change; running ones keep their environment until restarted.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "entry", Type: cty.String, Required: true,
				Description: "Absolute Windows path of the directory (`C:\\k`)."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` to add the entry, `\"absent\"` to remove it."},
		},
		Results: pathResults,
		Example: `task "k_on_path" {
  win_path {
    entry = "C:\\k"
  }
}`,
	}
}

func (Path) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validatePath(cfg, "entry")
	if e, ok := str(get(cfg, "entry")); ok && strings.Contains(e, ";") {
		diags = append(diags, cfg.Error("entry", "Invalid PATH entry",
			fmt.Sprintf("%q contains \";\", which separates PATH entries; give one directory.", e)))
	}
	return append(diags, validateEnum(cfg, "state", "present", "absent")...)
}

// matchingEntries returns the PATH entries equal to entry, as spelt there.
func matchingEntries(ctx context.Context, h host.Host, entry string) ([]string, error) {
	path, _, err := h.EnvGet(ctx, "Path")
	if err != nil {
		return nil, err
	}
	var found []string
	for _, e := range strings.Split(path, ";") {
		if strings.TrimSpace(e) != "" && samePath(strings.Trim(e, `"`), entry) {
			found = append(found, e)
		}
	}
	return found, nil
}

func (m Path) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	entryV := get(cfg, "entry")
	entry, entryOK := str(entryV)
	state, stateOK := str(get(cfg, "state"))
	res := result(pathResults, map[string]cty.Value{"entry": entryV})
	if !entryOK || !stateOK {
		subject := knownAfterApply
		if entryOK {
			subject = entry
		}
		want := cty.UnknownVal(cty.String)
		if stateOK && state == "present" {
			want = entryV
		} else if stateOK {
			want = cty.NullVal(cty.String)
		}
		return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Update, Subject: subject,
			Fields: []modules.FieldChange{{Name: "entry", Old: cty.UnknownVal(cty.String), New: want}}}}
	}
	found, err := matchingEntries(ctx, req.Host, entry)
	if err != nil {
		return modules.PlanResponse{Result: res, Diagnostics: hostError(cfg, "entry", "Cannot read PATH", err)}
	}
	var change *modules.Change
	switch {
	case state == "present" && len(found) == 0:
		change = &modules.Change{Action: modules.Create, Subject: entry,
			Fields: []modules.FieldChange{{Name: "entry", Old: cty.NullVal(cty.String), New: cty.StringVal(entry)}}}
	case state == "absent" && len(found) > 0:
		change = &modules.Change{Action: modules.Delete, Subject: entry,
			Fields: []modules.FieldChange{{Name: "entry", Old: cty.StringVal(found[0]), New: cty.NullVal(cty.String)}}}
	}
	return modules.PlanResponse{Change: change, Result: res}
}

func (m Path) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "entry", "state"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(pathResults), Diagnostics: diags}
	}
	entry, _ := str(get(cfg, "entry"))
	state, _ := str(get(cfg, "state"))
	res := result(pathResults, map[string]cty.Value{"entry": cty.StringVal(entry)})
	h := req.Host
	found, err := matchingEntries(ctx, h, entry)
	if err != nil {
		return modules.ApplyResponse{Result: res, Diagnostics: hostError(cfg, "entry", "Cannot read PATH", err)}
	}
	switch {
	case state == "present" && len(found) == 0:
		if _, err := h.PathAdd(ctx, entry); err != nil {
			return modules.ApplyResponse{Result: res, Diagnostics: hostError(cfg, "entry", "Cannot add PATH entry", err)}
		}
	case state == "absent":
		// Remove each spelling found: this module's idea of "the same
		// entry" is at least as broad as the host's.
		for _, e := range found {
			if _, err := h.PathRemove(ctx, e); err != nil {
				return modules.ApplyResponse{Result: res, Diagnostics: hostError(cfg, "entry", "Cannot remove PATH entry", err)}
			}
		}
	}
	return modules.ApplyResponse{Result: res}
}
