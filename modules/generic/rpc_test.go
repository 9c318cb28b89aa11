package generic

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/agenttest"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/transport/local"
)

// TestUnchangedPlanRPCs pins what planning a task that has nothing to do
// costs through the agent, op by op (facts come with the agent's hello):
// a re-run is mostly such tasks, and each RPC is a round trip to the node.
// The goal is at most one; rows with more say why.
func TestUnchangedPlanRPCs(t *testing.T) {
	skipOnWindows(t)
	tests := []struct {
		module modules.Module
		name   string
		attrs  func(dir string) map[string]cty.Value
		want   map[string]int64
	}{
		{
			module: Directory{}, name: "present",
			attrs: func(dir string) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(filepath.Join(dir, "etc")), "mode": cty.StringVal("0750")}
			},
			want: map[string]int64{"fs.stat": 1},
		},
		{
			module: File{}, name: "same content",
			attrs: func(dir string) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(filepath.Join(dir, "conf")), "content": cty.StringVal("x = 1\n")}
			},
			want: map[string]int64{"fs.sha256": 1},
		},
		{
			// The mode is only in a stat.
			module: File{}, name: "same content and mode",
			attrs: func(dir string) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(filepath.Join(dir, "conf")), "content": cty.StringVal("x = 1\n"), "mode": cty.StringVal("0600")}
			},
			want: map[string]int64{"fs.sha256": 1, "fs.stat": 1},
		},
		{
			module: File{}, name: "absent",
			attrs: func(dir string) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(filepath.Join(dir, "old")), "state": cty.StringVal("absent")}
			},
			want: map[string]int64{"fs.sha256": 1},
		},
		{
			module: Command{}, name: "creates exists",
			attrs: func(dir string) map[string]cty.Value {
				return map[string]cty.Value{"argv": cty.ListVal([]cty.Value{cty.StringVal("touch"), cty.StringVal(filepath.Join(dir, "done"))}), "creates": cty.StringVal(filepath.Join(dir, "done"))}
			},
			want: map[string]int64{"fs.stat": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.module.Schema().Name+"/"+tt.name, func(t *testing.T) {
			cfg := cfgFor(t, tt.module, tt.attrs(t.TempDir()))
			if pr := plan(t, tt.module, cfg); pr.Change != nil {
				ar := apply(t, tt.module, cfg, pr.Change)
				require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			}

			c := agenttest.Start(t, local.New(), agenttest.Options{}).Client
			resp := tt.module.Plan(ctx, modules.PlanRequest{Config: cfg, Host: c})
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			require.Nil(t, resp.Change, "nothing to do")
			got := c.Counters()
			assert.Equal(t, tt.want, got.RPCsByOp)
			assert.Zero(t, got.BytesSent)
		})
	}
}
