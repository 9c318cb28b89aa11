package windows

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// OptionalFeature makes sure a Windows optional feature (DISM's sense:
// Containers, Microsoft-Hyper-V...) is enabled. It exists because a node
// without Containers has no HNS, and join would otherwise stall at its
// network waits; enabling one usually takes a restart, which this module
// reports (reboot_required) and win_reboot performs.
type OptionalFeature struct{}

var (
	_ modules.Module    = OptionalFeature{}
	_ modules.Validator = OptionalFeature{}
)

var featureResults = []modules.Attribute{
	{Name: "name", Type: cty.String, Description: "The feature's name as Windows spells it."},
	{Name: "state", Type: cty.String, Description: "`\"enabled\"`, or `\"enable-pending\"` when it takes effect at the next restart (also `\"disabled\"`, `\"disable-pending\"`, `\"removed\"` as read before a change)."},
	{Name: "reboot_required", Type: cty.Bool, Description: "The feature is not in effect until the host restarts. In a plan that enables it: whether Windows says enabling it may need a restart (Containers does)."},
}

func (OptionalFeature) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_optional_feature",
		Summary: "Enable a Windows optional feature (such as Containers) and say whether a reboot is needed.",
		Description: "Reads the feature's state (the agent runs `dism.exe /Online /English /Get-FeatureInfo`) and, " +
			"when it is neither enabled nor pending enablement, enables it with the features it needs " +
			"(`/Enable-Feature /All /NoRestart`). It never restarts the host: `reboot_required` says whether " +
			"one is needed, and a `win_reboot` task with `when = task.NAME.reboot_required` does it. A feature " +
			"already enabled, or enabled and waiting for a restart, is no change (then `reboot_required` is " +
			"still true until the restart). A name this Windows does not know is an error.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "name", Type: cty.String, Required: true,
				Description: "Feature name as DISM lists it (`dism /Online /Get-Features`), such as `Containers`; letters, digits, `-`, `_` and `.`."},
		},
		Results: featureResults,
		Example: `task "containers_feature" {
  win_optional_feature {
    name = "Containers"
  }
}`,
	}
}

func (OptionalFeature) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	if name, ok := str(get(cfg, "name")); ok {
		if err := host.ValidFeatureName(name); err != nil {
			return hcl.Diagnostics{cfg.Error("name", "Invalid feature name", err.Error()+".")}
		}
	}
	return nil
}

// readFeature reads the feature, words the errors at name.
func readFeature(ctx context.Context, h host.Host, cfg modules.Config, name string) (host.FeatureInfo, hcl.Diagnostics) {
	f, err := host.AsOptionalFeatures(h)
	if err == nil {
		var fi host.FeatureInfo
		if fi, err = f.OptionalFeature(ctx, name); err == nil {
			return fi, nil
		}
	}
	return host.FeatureInfo{}, hostError(cfg, "name", "Cannot read the optional feature", err)
}

func featureResult(fi host.FeatureInfo) cty.Value {
	return result(featureResults, map[string]cty.Value{
		"name":            cty.StringVal(fi.Name),
		"state":           cty.StringVal(string(fi.State)),
		"reboot_required": cty.BoolVal(fi.RestartRequired),
	})
}

func (OptionalFeature) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	nameV := get(cfg, "name")
	name, ok := str(nameV)
	if !ok {
		res := result(featureResults, map[string]cty.Value{"name": nameV, "state": cty.UnknownVal(cty.String), "reboot_required": cty.UnknownVal(cty.Bool)})
		return modules.PlanResponse{Result: res, Change: enableChange(knownAfterApply, cty.UnknownVal(cty.String))}
	}
	if d := onWindows(ctx, req.Host, cfg, "name"); d.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(featureResults), Diagnostics: d}
	}
	fi, d := readFeature(ctx, req.Host, cfg, name)
	if d.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(featureResults), Diagnostics: d}
	}
	if fi.On() {
		return modules.PlanResponse{Result: featureResult(fi)}
	}
	res := result(featureResults, map[string]cty.Value{
		"name":            cty.StringVal(fi.Name),
		"state":           cty.UnknownVal(cty.String),
		"reboot_required": cty.BoolVal(fi.RestartPossible),
	})
	return modules.PlanResponse{Result: res, Change: enableChange(fi.Name, cty.StringVal(string(fi.State)))}
}

func enableChange(subject string, old cty.Value) *modules.Change {
	return &modules.Change{Action: modules.Update, Subject: "optional feature " + subject,
		Fields: []modules.FieldChange{{Name: "state", Old: old, New: cty.StringVal(string(host.FeatureEnabled))}}}
}

func (OptionalFeature) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if d := requireKnown(cfg, "name"); d.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(featureResults), Diagnostics: d}
	}
	name, _ := str(get(cfg, "name"))
	fi, d := readFeature(ctx, req.Host, cfg, name)
	if d.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(featureResults), Diagnostics: d}
	}
	if fi.On() {
		return modules.ApplyResponse{Result: featureResult(fi)}
	}
	f, _ := host.AsOptionalFeatures(req.Host) // readFeature succeeded: it has them
	fi, err := f.EnableOptionalFeature(ctx, name)
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(featureResults), Diagnostics: hostError(cfg, "name", "Cannot enable the optional feature", err)}
	}
	if !fi.On() {
		return modules.ApplyResponse{Result: featureResult(fi), Diagnostics: hcl.Diagnostics{cfg.Error("name", "Feature not enabled",
			fmt.Sprintf("Enabling %s reported success, but Windows now says its state is %q.", name, fi.State))}}
	}
	return modules.ApplyResponse{Result: featureResult(fi)}
}
