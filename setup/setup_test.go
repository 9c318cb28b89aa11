package setup_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	kubemodules "github.com/wsu-project/wsu/modules/kube"
	"github.com/wsu-project/wsu/playbooks"
	"github.com/wsu-project/wsu/setup"
)

const printPlaybook = `
variable "msg" {
  type = string
}

play "hello" {
  hosts = "all"

  task "say" {
    tags = ["x"]
    print { msg = var.msg }
  }
}
`

// TestSavedPlanInputsRoundTrip: the inputs a plan was made with are what a
// saved plan records and what Prepare restores from it, one struct both ways.
func TestSavedPlanInputsRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	book := filepath.Join(dir, "hello.hcl")
	require.NoError(t, os.WriteFile(book, []byte(printPlaybook), 0o644))
	in := planfile.Inputs{Playbook: book, Inventory: "win01,win02,", MoreInventories: []string{"win[03:04],"}, Vars: []string{"msg=hi"}, Limit: "win02:win04", Tags: []string{"x"}, StartAtTask: "say", KubeContext: "ctx-1"}

	run, diags := setup.Prepare(ctx, setup.Options{Request: setup.Request{Inputs: in, Mode: engine.ModePlan}})
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Equal(t, in, run.Inputs)
	assert.Equal(t, []string{"win01", "win02", "win03", "win04"}, run.Request.Inventory.Order, "every -i, merged in order")
	assert.Equal(t, "say", run.Request.StartAt)
	res := engine.Run(ctx, run.Request)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	out := filepath.Join(dir, "hello.plan")
	require.NoError(t, run.SavePlan(out, res))

	saved, isPlan, err := planfile.Load(out)
	require.NoError(t, err)
	require.True(t, isPlan)
	assert.Equal(t, in, saved.Inputs)

	// Apply of the saved plan: its inputs win over the options' own.
	again, diags := setup.Prepare(ctx, setup.Options{Request: setup.Request{Inputs: planfile.Inputs{Playbook: "ignored"}, Mode: engine.ModeApply}, Saved: saved})
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.Equal(t, in, again.Inputs)
	assert.Same(t, saved, again.Request.Expect)
	assert.Equal(t, []string{"msg=hi"}, again.Request.Inputs.Vars)
}

func TestPrepareRefusesBeforeAnyHost(t *testing.T) {
	ctx := context.Background()
	run, diags := setup.Prepare(ctx, setup.Options{Request: setup.Request{Inputs: planfile.Inputs{Playbook: "join"}, Mode: engine.ModePlan}})
	require.True(t, diags.HasErrors())
	assert.Equal(t, "No inventory", diags[0].Summary)
	assert.Equal(t, "wsu:join.hcl", run.Inputs.Playbook, "a stock name resolves to the embedded playbook")
	assert.NotEmpty(t, run.Text, "the loaded playbooks are there to quote")
}

func TestResolvePlaybook(t *testing.T) {
	assert.Equal(t, "wsu:join.hcl", first(setup.ResolvePlaybook("join", playbooks.FS)))
	assert.Equal(t, "wsu:join.hcl", first(setup.ResolvePlaybook("join.hcl", playbooks.FS)))
	assert.Equal(t, "./nope/join", first(setup.ResolvePlaybook("./nope/join", playbooks.FS)), "a path is never a stock name")
	assert.Equal(t, "unknown", first(setup.ResolvePlaybook("unknown", playbooks.FS)))
}

func first(s string, _ hcl.Diagnostics) string { return s }

// TestEachRunHasItsOwnStart: k8s_csr_approve's time window starts when its
// run is set up, not when the process started: two runs prepared one after
// the other in one process (a controller's, hours apart) carry their own
// starts, each no earlier than its Prepare.
func TestEachRunHasItsOwnStart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	book := filepath.Join(dir, "hello.hcl")
	require.NoError(t, os.WriteFile(book, []byte(printPlaybook), 0o644))
	start := func() time.Time {
		t.Helper()
		run, diags := setup.Prepare(ctx, setup.Options{Request: setup.Request{Inputs: planfile.Inputs{Playbook: book, Inventory: "win01,", Vars: []string{"msg=hi"}}, Mode: engine.ModePlan}})
		require.False(t, diags.HasErrors(), "%v", diags)
		m, ok := run.Request.Registry.Lookup("k8s_csr_approve")
		require.True(t, ok)
		csr, ok := m.(kubemodules.CSRApprove)
		require.True(t, ok, "%T", m)
		return csr.Cache.RunStart()
	}
	before := time.Now()
	first := start()
	assert.False(t, first.Before(before), "the first run starts at its Prepare (%s), not before (%s)", first, before)
	between := time.Now()
	second := start()
	assert.False(t, second.Before(between), "the second run starts at its own Prepare (%s), not the first's (%s)", second, first)
}
