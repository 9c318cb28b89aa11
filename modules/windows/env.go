package windows

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

// Env manages one machine-scope environment variable.
type Env struct{}

var (
	_ modules.Module    = Env{}
	_ modules.Validator = Env{}
)

var envResults = []modules.Attribute{
	{Name: "name", Type: cty.String, Description: "The variable's name."},
	{Name: "value", Type: cty.String, Description: "Its value; null when `state = \"absent\"`."},
}

func (Env) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_env",
		Summary: "Set or remove a machine-wide environment variable on a Windows host.",
		Description: "Sets a variable in the machine environment (what services and new processes " +
			"see; running processes keep theirs until restarted). Names are case-insensitive, " +
			"values are compared exactly. `Path` is refused: use `win_path` to add or remove one " +
			"entry without rewriting everyone else's.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "name", Type: cty.String, Required: true,
				Description: "Variable name, such as `KUBECONFIG`."},
			{Name: "value", Type: cty.String,
				Description: "The value. Required unless `state = \"absent\"`."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` to set the variable, `\"absent\"` to remove it (value is then ignored)."},
		},
		Results: envResults,
		Example: `task "kubeconfig_env" {
  win_env {
    name  = "KUBECONFIG"
    value = "C:\\k\\kubeconfig"
  }
}`,
	}
}

func (Env) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateEnum(cfg, "state", "present", "absent")
	if name, ok := str(get(cfg, "name")); ok {
		switch {
		case name == "" || strings.ContainsAny(name, "=\x00"):
			diags = append(diags, cfg.Error("name", "Invalid variable name",
				fmt.Sprintf("%q is not a valid environment variable name: it must be non-empty, without \"=\".", name)))
		case strings.EqualFold(name, "Path"):
			diags = append(diags, cfg.Error("name", "Use win_path for PATH",
				"Setting Path would replace every entry on the machine PATH; win_path adds or removes one entry."))
		}
	}
	if state, ok := str(get(cfg, "state")); ok && state == "present" {
		if isNull(get(cfg, "value")) {
			diags = append(diags, cfg.Error("value", "Missing value", "value is required unless state = \"absent\"."))
		} else if v, ok := str(get(cfg, "value")); ok && strings.ContainsRune(v, 0) {
			diags = append(diags, cfg.Error("value", "Invalid value", "value cannot contain a NUL character."))
		}
	}
	return diags
}

func (m Env) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	nameV, valueV := get(cfg, "name"), get(cfg, "value")
	name, nameOK := str(nameV)
	state, stateOK := str(get(cfg, "state"))
	want := valueV
	switch {
	case !stateOK:
		want = cty.UnknownVal(cty.String)
	case state == "absent":
		want = cty.NullVal(cty.String)
	}
	res := result(envResults, map[string]cty.Value{"name": nameV, "value": want})
	if !nameOK || !stateOK {
		subject := knownAfterApply
		if nameOK {
			subject = name
		}
		return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Update, Subject: subject,
			Fields: []modules.FieldChange{{Name: "value", Old: cty.UnknownVal(cty.String), New: want}}}}
	}
	old, exists, err := req.Host.EnvGet(ctx, name)
	if err != nil {
		return modules.PlanResponse{Result: res, Diagnostics: hostError(cfg, "name", "Cannot read environment", err)}
	}
	oldV := cty.NullVal(cty.String)
	if exists {
		oldV = cty.StringVal(old)
	}
	var action modules.Action
	switch {
	case state == "absent" && exists:
		action = modules.Delete
	case state == "present" && !exists:
		action = modules.Create
	case state == "present":
		if v, ok := str(want); !ok || v != old {
			action = modules.Update
		}
	}
	if action == "" {
		return modules.PlanResponse{Result: res}
	}
	return modules.PlanResponse{Result: res, Change: &modules.Change{Action: action, Subject: name,
		Fields: []modules.FieldChange{{Name: "value", Old: oldV, New: want}}}}
}

func (m Env) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "name", "value", "state"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(envResults), Diagnostics: diags}
	}
	name, _ := str(get(cfg, "name"))
	state, _ := str(get(cfg, "state"))
	value, _ := str(get(cfg, "value"))
	h := req.Host
	old, exists, err := h.EnvGet(ctx, name)
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(envResults), Diagnostics: hostError(cfg, "name", "Cannot read environment", err)}
	}
	if state == "absent" {
		res := result(envResults, map[string]cty.Value{"name": cty.StringVal(name)})
		if exists {
			if err := h.EnvDelete(ctx, name); err != nil {
				return modules.ApplyResponse{Result: res, Diagnostics: hostError(cfg, "name", "Cannot remove variable", err)}
			}
		}
		return modules.ApplyResponse{Result: res}
	}
	res := result(envResults, map[string]cty.Value{"name": cty.StringVal(name), "value": cty.StringVal(value)})
	if !exists || old != value {
		if err := h.EnvSet(ctx, name, value); err != nil {
			return modules.ApplyResponse{Result: res, Diagnostics: hostError(cfg, "value", "Cannot set variable", err)}
		}
	}
	return modules.ApplyResponse{Result: res}
}
