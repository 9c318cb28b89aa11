package playbook_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules"
)

// namesake is a module whose schema is given: two registries may each
// hold a "thing" of a different shape.
type namesake struct{ schema modules.Schema }

func (m namesake) Schema() modules.Schema { return m.schema }
func (namesake) Plan(context.Context, modules.PlanRequest) modules.PlanResponse {
	return modules.PlanResponse{}
}
func (namesake) Apply(context.Context, modules.ApplyRequest) modules.ApplyResponse {
	return modules.ApplyResponse{}
}

func thing(attr string, typ cty.Type, def cty.Value) modules.Module {
	return namesake{modules.Schema{Name: "thing", Target: modules.TargetController,
		Attributes: []modules.Attribute{{Name: attr, Type: typ, Default: def}}}}
}

// TestSpecIsTheRunsOwn: two runs in one process whose registries hold
// different modules of the same name each decode their tasks by their own
// module's schema. A spec cache keyed by module name (the package used to
// keep one) gave the second run the first one's spec: its argument was
// "not expected here", and the first run's default leaked into it.
func TestSpecIsTheRunsOwn(t *testing.T) {
	const src = `play "p" {
  hosts = "all"
  task "t" {
    thing { %s }
  }
}
`
	load := func(reg *modules.Registry, body string) *playbook.Task {
		t.Helper()
		pb, diags := playbook.NewLoader(reg, nil).LoadSource("p.hcl", []byte(fmt.Sprintf(src, body)))
		require.False(t, diags.HasErrors(), "%v", diags)
		return pb.Plays()[0].Tasks[0]
	}
	first := load(modules.NewRegistry(thing("name", cty.String, cty.StringVal("from the first run"))), `name = "x"`)
	second := load(modules.NewRegistry(thing("count", cty.Number, cty.NumberIntVal(7))), `count = 3`)

	assert.Contains(t, first.Spec.(hcldec.ObjectSpec), "name")
	require.Contains(t, second.Spec.(hcldec.ObjectSpec), "count")
	assert.NotContains(t, second.Spec.(hcldec.ObjectSpec), "name", "the first run's module does not reach the second's")
	got, diags := hcldec.Decode(second.Body, second.Spec, nil)
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.True(t, got.RawEquals(cty.ObjectVal(map[string]cty.Value{"count": cty.NumberIntVal(3)})) ||
		got.Equals(cty.ObjectVal(map[string]cty.Value{"count": cty.NumberIntVal(3)})).True(), "%#v", got)
}
