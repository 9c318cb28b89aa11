package generic

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"context"
	"os"
	"runtime"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
	"github.com/wsu-project/wsu/transport/local"
)

var ctx = context.Background()

// cfgFor builds a Config as the engine does; see moduletest.Config.
func cfgFor(t *testing.T, m modules.Module, attrs map[string]cty.Value) modules.Config {
	t.Helper()
	return moduletest.Config(t, m, attrs)
}

func plan(t *testing.T, m modules.Module, cfg modules.Config) modules.PlanResponse {
	t.Helper()
	var h = local.New()
	if m.Schema().Target == modules.TargetController {
		h = nil
	}
	resp := m.Plan(ctx, modules.PlanRequest{Config: cfg, Host: h})
	checkResult(t, m, resp.Result)
	return resp
}

func apply(t *testing.T, m modules.Module, cfg modules.Config, change *modules.Change) modules.ApplyResponse {
	t.Helper()
	var h = local.New()
	if m.Schema().Target == modules.TargetController {
		h = nil
	}
	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Host: h, Change: change})
	checkResult(t, m, resp.Result)
	return resp
}

// checkResult insists on the schema's exact result type.
func checkResult(t *testing.T, m modules.Module, v cty.Value) {
	t.Helper()
	require.True(t, v != cty.NilVal, "result missing")
	want := m.Schema().ResultType()
	require.True(t, v.Type().Equals(want), "result type %s, want %s", v.Type().FriendlyName(), want.FriendlyName())
}

func fieldNames(c *modules.Change) []string {
	if c == nil {
		return nil
	}
	var names []string
	for _, f := range c.Fields {
		names = append(names, f.Name)
	}
	return names
}

func field(t *testing.T, c *modules.Change, name string) modules.FieldChange {
	t.Helper()
	for _, f := range c.Fields {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("change has no field %s (has %v)", name, fieldNames(c))
	return modules.FieldChange{}
}

// action is "" for a nil change so tables can say "no change" simply.
func action(c *modules.Change) modules.Action {
	if c == nil {
		return ""
	}
	return c.Action
}

// requireDiag finds an error diagnostic with summary located at attr.
func requireDiag(t *testing.T, diags hcl.Diagnostics, cfg modules.Config, summary, attr string) *hcl.Diagnostic {
	t.Helper()
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Summary == summary {
			require.NotNil(t, d.Subject)
			assert.Equal(t, *cfg.Range(attr), *d.Subject, "diagnostic location")
			return d
		}
	}
	t.Fatalf("no %q error in %v", summary, diags)
	return nil
}

func skipOnWindows(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("POSIX permissions and /bin/sh")
	}
}

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Mode().Perm()
}
