package generic

import (
	"github.com/stretchr/testify/assert"

	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestPrint(t *testing.T) {
	tests := []struct {
		name string
		msg  cty.Value
	}{
		{name: "known", msg: cty.StringVal("joining node1")},
		{name: "empty", msg: cty.StringVal("")},
		{name: "unknown", msg: cty.UnknownVal(cty.String)},
		{name: "null", msg: cty.NullVal(cty.String)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Print{}, map[string]cty.Value{"msg": tt.msg})
			resp := plan(t, Print{}, cfg)
			assert.Nil(t, resp.Change, "print never changes anything")
			assert.Empty(t, resp.Diagnostics)
			assert.Equal(t, tt.msg, resp.Result.GetAttr("msg"))
			if tt.msg.IsKnown() {
				ar := apply(t, Print{}, cfg, nil)
				assert.Equal(t, tt.msg, ar.Result.GetAttr("msg"))
			}
		})
	}
}
