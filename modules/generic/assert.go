package generic

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

// Assert fails the play when a condition does not hold.
type Assert struct{}

var (
	_ modules.Module    = Assert{}
	_ modules.Validator = Assert{}
)

// defaultSuccess mirrors Ansible's assert output.
const defaultSuccess = "All assertions passed"

var assertResults = []modules.Attribute{
	{Name: "passed", Type: cty.Bool, Description: "Whether every condition held."},
	{Name: "msg", Type: cty.String, Description: "success_message (or \"All assertions passed\") when passed."},
}

func (Assert) Schema() modules.Schema {
	return modules.Schema{
		Name:    "assert",
		Summary: "Fail the play unless every condition is true.",
		Description: "Checks conditions on the controller, typically facts or earlier task results, " +
			"and stops the host's play with an error when one is false. It never changes " +
			"anything. Conditions that depend on values known only after apply are checked " +
			"when they become known.",
		Target: modules.TargetController,
		Attributes: []modules.Attribute{
			{Name: "that", Type: cty.List(cty.Bool), Required: true,
				Description: "Conditions that must all be true."},
			{Name: "fail_message", Type: cty.String,
				Description: "Shown when a condition is false, instead of naming the condition."},
			{Name: "success_message", Type: cty.String,
				Description: "Shown when every condition holds."},
		},
		Results: assertResults,
		Show:    "msg",
		Example: `task "supported_os" {
  assert {
    that         = [host.facts.os == "windows", startswith(host.facts.version, "10.0")]
    fail_message = "Only Windows Server 2019 and later can join the cluster."
  }
}`,
	}
}

func (Assert) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	that := get(cfg, "that")
	if that.IsKnown() && (that.IsNull() || that.LengthInt() == 0) {
		return hcl.Diagnostics{cfg.Error("that", "No conditions", "that needs at least one condition.")}
	}
	return nil
}

// check evaluates the conditions; passed is unknown while any is.
func (m Assert) check(cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	that := get(cfg, "that")
	if !that.IsWhollyKnown() {
		return unknownResult(assertResults), nil
	}
	conds := that.AsValueSlice()
	var failed []string
	for i, c := range conds {
		if c.IsNull() || c.False() {
			failed = append(failed, strconv.Itoa(i+1))
		}
	}
	if len(failed) == 0 {
		msg := defaultSuccess
		if s, ok := str(get(cfg, "success_message")); ok {
			msg = s
		}
		return result(assertResults, map[string]cty.Value{"passed": cty.True, "msg": cty.StringVal(msg)}), nil
	}

	detail, ok := str(get(cfg, "fail_message"))
	if !ok {
		if len(failed) == 1 {
			detail = fmt.Sprintf("condition %s of %d is false", failed[0], len(conds))
		} else {
			detail = fmt.Sprintf("conditions %s of %d are false", strings.Join(failed, ", "), len(conds))
		}
	}
	res := result(assertResults, map[string]cty.Value{"passed": cty.False, "msg": cty.StringVal(detail)})
	return res, hcl.Diagnostics{cfg.Error("that", "Assertion failed", detail)}
}

func (m Assert) Plan(_ context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.check(req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m Assert) Apply(_ context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	diags := requireKnown(req.Config, "that")
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(assertResults), Diagnostics: diags}
	}
	res, diags := m.check(req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
