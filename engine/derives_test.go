package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
)

// lookup finds something with a secret, as k8s_discovery finds the
// cluster with a token: its results say what they derive from. With
// credential, its key only authenticates (a cluster module's
// kubeconfig_data), and it shows where it found the thing.
type lookup struct {
	name       string
	credential bool
}

var lookupResults = []modules.Attribute{
	{Name: "hashed", Type: cty.String},                                      // says nothing: may derive from the secret
	{Name: "found", Type: cty.String, DerivesFrom: []string{}},              // reveals no argument
	{Name: "where_found", Type: cty.String, DerivesFrom: []string{"where"}}, // reveals where only
}

func (l lookup) Schema() modules.Schema {
	s := modules.Schema{Name: "lookup", Target: modules.TargetController, Show: "found",
		Attributes: []modules.Attribute{
			{Name: "key", Type: cty.String, Required: true, Sensitive: l.credential, Credential: l.credential},
			{Name: "where", Type: cty.String, Required: true},
		},
		Results: lookupResults}
	if l.credential {
		s.Name, s.Show = l.name, "hashed" // derived from no sensitive argument but the credential
	}
	return s
}

func (l lookup) result(cfg modules.Config) cty.Value {
	hashed := "h(" + cfg.Get("key").AsString() + ")"
	if l.credential { // what a credential reaches, not the credential
		hashed = "h(" + cfg.Get("where").AsString() + ")"
	}
	return cty.ObjectVal(map[string]cty.Value{
		"hashed":      cty.StringVal(hashed),
		"found":       cty.StringVal("the cluster"),
		"where_found": cty.StringVal("at " + cfg.Get("where").AsString()),
	})
}

func (l lookup) Plan(_ context.Context, req modules.PlanRequest) modules.PlanResponse {
	return modules.PlanResponse{Result: l.result(req.Config)}
}

func (l lookup) Apply(_ context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	return modules.ApplyResponse{Result: l.result(req.Config)}
}

// TestResultDerivesFrom: with a sensitive argument every result is hidden
// unless it names what it derives from, and then only if that is
// sensitive.
func TestResultDerivesFrom(t *testing.T) {
	reg := modules.NewRegistry(append(generic.Modules(), lookup{})...)
	pb, diags := playbook.NewLoader(reg, nil).LoadSource("d.hcl", []byte(`
variable "key" {
  type      = string
  sensitive = true
}
variable "where" {
  type = string
}
play "p" {
  hosts = "all"
  task "look" {
    lookup {
      key   = var.key
      where = var.where
    }
  }
  task "found" {
    print { msg = task.look.found }
  }
  task "where" {
    print { msg = task.look.where_found }
  }
  task "hashed" {
    print { msg = task.look.hashed }
  }
}`))
	require.False(t, diags.HasErrors(), diags.Error())
	run := func(vars []string, secret []string) *recorder {
		rec := &recorder{}
		res := engine.Run(context.Background(), engine.Request{Playbook: pb, Inventory: inventory.FromList("win01,"),
			Mode: engine.ModeApply, Registry: reg, Hooks: rec, Inputs: engine.Inputs{Vars: vars, SecretVars: secret}})
		require.False(t, res.Failed(), "%v", res.Diagnostics)
		return rec
	}
	rec := run([]string{"key=k3y-secret", "where=here"}, nil)
	assert.Equal(t, "the cluster", rec.result(t, "win01", "look").Message, "Show of a result that derives from no argument")
	assert.Equal(t, "the cluster", rec.result(t, "win01", "found").Message)
	assert.Equal(t, "at here", rec.result(t, "win01", "where").Message)
	assert.Equal(t, "(sensitive)", rec.result(t, "win01", "hashed").Message)

	rec = run([]string{"key=k3y-secret", "where=here"}, []string{"where"})
	assert.Equal(t, "the cluster", rec.result(t, "win01", "found").Message)
	assert.Equal(t, "(sensitive)", rec.result(t, "win01", "where").Message, "derived from a sensitive argument")
}

// TestCredentialArgument: results of a task whose only sensitive argument
// is a credential are shown; another sensitive argument hides them again.
func TestCredentialArgument(t *testing.T) {
	reg := modules.NewRegistry(append(generic.Modules(), lookup{name: "reader", credential: true})...)
	pb, diags := playbook.NewLoader(reg, nil).LoadSource("c.hcl", []byte(`
variable "key" {
  type      = string
  sensitive = true
}
variable "where" {
  type = string
}
play "p" {
  hosts = "all"
  task "read" {
    reader {
      key   = var.key
      where = var.where
    }
  }
}`))
	require.False(t, diags.HasErrors(), diags.Error())
	run := func(secret []string) *recorder {
		rec := &recorder{}
		res := engine.Run(context.Background(), engine.Request{Playbook: pb, Inventory: inventory.FromList("win01,"),
			Mode: engine.ModeApply, Registry: reg, Hooks: rec, Inputs: engine.Inputs{Vars: []string{"key=k3y-secret", "where=here"}, SecretVars: secret}})
		require.False(t, res.Failed(), "%v", res.Diagnostics)
		return rec
	}
	assert.Equal(t, "h(here)", run(nil).result(t, "win01", "read").Message, "nothing derives from a credential")
	assert.Equal(t, "(sensitive)", run([]string{"where"}).result(t, "win01", "read").Message, "a sensitive non-credential argument hides it")
}
