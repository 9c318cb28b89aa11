package run_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/setup"
)

// TestPlanHashStableWithSaltedPlans: a saved plan's hashes are salted
// (engine/planfile), but an instance planned twice in the same state
// still gets the same PlanHash, which is what an approval names; another
// instance's plans are keyed differently.
func TestPlanHashStableWithSaltedPlans(t *testing.T) {
	dir := t.TempDir()
	book := filepath.Join(dir, "book.hcl")
	require.NoError(t, os.WriteFile(book, []byte(`
variable "pw" {
  type      = string
  sensitive = true
}
play "p" {
  hosts = "all"
  task "t" {
    file {
      path    = "`+filepath.Join(dir, "out")+`"
      content = var.pw
    }
  }
}
`), 0o644))
	plan := func(instance, pw string) string {
		inv := inventory.Local("windows")
		inv.Hosts["localhost"].Vars["connection"] = inventory.Var{Value: cty.StringVal("local")}
		out := run.InProcess{}.Run(context.Background(), run.Request{Instance: instance, Request: setup.Request{Mode: engine.ModePlan, Inputs: planfile.Inputs{Playbook: book, Vars: []string{"pw=" + pw}}, Inventory: inv, ReadDirs: []string{dir}}})
		require.False(t, out.Failed, out.Message)
		require.NotEmpty(t, out.Hash)
		return out.Hash
	}
	first := plan("ns/a", "1234")
	assert.Equal(t, first, plan("ns/a", "1234"), "the same state, the same hash")
	assert.NotEqual(t, first, plan("ns/a", "1235"), "a changed secret changes the hash")
	assert.NotEqual(t, first, plan("ns/b", "1234"), "another instance's plans are keyed differently")
}
