// Package moduletest holds test helpers shared by the module packages.
package moduletest

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/modules"
)

// BlockRange is where test configs pretend their module block is.
var BlockRange = hcl.Range{Filename: "test.hcl", Start: hcl.Pos{Line: 1, Column: 1}, End: hcl.Pos{Line: 20, Column: 2}}

// Config builds a Config as the engine does: every schema attribute present,
// defaults applied, explicitly set ones with their own range.
func Config(t *testing.T, m modules.Module, attrs map[string]cty.Value) modules.Config {
	t.Helper()
	s := m.Schema()
	for name := range attrs {
		require.NotNil(t, s.Attribute(name), "unknown attribute %s", name)
	}
	vals := map[string]cty.Value{}
	ranges := map[string]hcl.Range{}
	for i, a := range s.Attributes {
		v, set := attrs[a.Name]
		switch {
		case !set && a.Default != cty.NilVal:
			v = a.Default
		case !set:
			v = cty.NullVal(a.Type)
		default:
			var err error
			v, err = convert.Convert(v, a.Type)
			require.NoError(t, err, "attribute %s", a.Name)
			line := i + 2
			ranges[a.Name] = hcl.Range{Filename: "test.hcl", Start: hcl.Pos{Line: line, Column: 3}, End: hcl.Pos{Line: line, Column: 30}}
		}
		vals[a.Name] = v
	}
	return modules.Config{Value: cty.ObjectVal(vals), Block: BlockRange, Ranges: ranges}
}
