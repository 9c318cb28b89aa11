package generic

import (
	"context"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

// Print shows a message, like Ansible's debug.
type Print struct{}

var _ modules.Module = Print{}

var printResults = []modules.Attribute{
	{Name: "msg", Type: cty.String, Description: "The message, as shown."},
}

func (Print) Schema() modules.Schema {
	return modules.Schema{
		Name:    "print",
		Summary: "Show a message in the run's output.",
		Description: "Displays `msg` after the task, for progress notes and debugging " +
			"(`jsonencode` or `yamlencode` show structured values). It runs on the " +
			"controller and never changes anything. A message built from sensitive " +
			"values is shown as `(sensitive)`.",
		Target: modules.TargetController,
		Attributes: []modules.Attribute{
			{Name: "msg", Type: cty.String, Required: true, Description: "The message to show."},
		},
		Results: printResults,
		Show:    "msg",
		Example: `task "where" {
  print {
    msg = "joining ${host.facts.fqdn} (${host.facts.ipv4})"
  }
}`,
	}
}

func (Print) Plan(_ context.Context, req modules.PlanRequest) modules.PlanResponse {
	return modules.PlanResponse{Result: printResult(req.Config)}
}

func (Print) Apply(_ context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	return modules.ApplyResponse{Result: printResult(req.Config)}
}

// printResult echoes msg, unknown or not: the engine shows the result.
func printResult(cfg modules.Config) cty.Value {
	return result(printResults, map[string]cty.Value{"msg": get(cfg, "msg")})
}
