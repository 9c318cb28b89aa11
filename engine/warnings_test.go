package engine_test

import (
	"context"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules"
)

// warner changes nothing and says why, as win_service does when it leaves
// a service wsu did not create in place.
type warner struct{}

func (warner) Schema() modules.Schema {
	return modules.Schema{Name: "warner", Target: modules.TargetController,
		Attributes: []modules.Attribute{{Name: "why", Type: cty.String, Required: true}}}
}

func (warner) warn(cfg modules.Config) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Left alone", Detail: cfg.Get("why").AsString(), Subject: cfg.Range("why")}}
}

func (w warner) Plan(_ context.Context, req modules.PlanRequest) modules.PlanResponse {
	return modules.PlanResponse{Result: cty.EmptyObjectVal, Diagnostics: w.warn(req.Config)}
}

func (w warner) Apply(_ context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	return modules.ApplyResponse{Result: cty.EmptyObjectVal, Diagnostics: w.warn(req.Config)}
}

// TestModuleWarningsReachTheResult: a task that succeeds with a warning
// reports it with its result, in plan and apply, and it stays ok.
func TestModuleWarningsReachTheResult(t *testing.T) {
	reg := modules.NewRegistry(warner{})
	pb, diags := playbook.NewLoader(reg, nil).LoadSource("w.hcl", []byte(`
play "p" {
  hosts = "all"
  task "keep" {
    warner { why = "not ours" }
  }
}`))
	require.False(t, diags.HasErrors(), diags.Error())
	for _, mode := range []engine.Mode{engine.ModePlan, engine.ModeApply} {
		t.Run(string(mode), func(t *testing.T) {
			rec := &recorder{}
			res := engine.Run(context.Background(), engine.Request{Playbook: pb, Inventory: inventory.FromList("win01,"), Mode: mode, Registry: reg, Hooks: rec})
			require.False(t, res.Failed(), "%v", res.Diagnostics)
			ev := rec.result(t, "win01", "keep")
			assert.Equal(t, engine.StatusOK, ev.Status)
			require.Len(t, ev.Diagnostics, 1)
			assert.Equal(t, "warning", ev.Diagnostics[0].Severity)
			assert.Equal(t, "not ours", ev.Diagnostics[0].Detail)
			require.NotNil(t, ev.Diagnostics[0].Range)
			assert.Equal(t, "w.hcl", ev.Diagnostics[0].Range.Filename)
			assert.Equal(t, 5, ev.Diagnostics[0].Range.Line)
		})
	}
}
