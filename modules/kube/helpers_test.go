package kube

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
	"github.com/wsu-project/wsu/test/kubetest"
)

var ctx = context.Background()

// testClusters gives the modules under test a client cache of their own, as
// a run's setup does.
var testClusters = Clusters{Cache: kube.NewCache(kube.Defaults{})}

// The package's tests share one control plane (starting one takes a few
// seconds); each test uses its own node and namespace names.
var (
	sharedOnce    sync.Once
	sharedCluster *kubetest.Cluster
	sharedErr     error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedCluster != nil {
		if err := sharedCluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// cluster returns the shared control plane, starting it on first use.
func cluster(t *testing.T) *kubetest.Cluster {
	t.Helper()
	sharedOnce.Do(func() {
		sharedCluster, sharedErr = kubetest.New(ctx, func(format string, args ...any) {
			if testing.Verbose() {
				fmt.Fprintf(os.Stderr, format+"\n", args...)
			}
		})
	})
	require.NoError(t, sharedErr)
	return sharedCluster
}

// cfgFor builds a Config as the engine does; see moduletest.Config.
func cfgFor(t *testing.T, m modules.Module, attrs map[string]cty.Value) modules.Config {
	t.Helper()
	return moduletest.Config(t, m, attrs)
}

// kcfg is cfgFor with the cluster's admin kubeconfig, unless attrs names one.
func kcfg(t *testing.T, c *kubetest.Cluster, m modules.Module, attrs map[string]cty.Value) modules.Config {
	t.Helper()
	withKC := map[string]cty.Value{"kubeconfig": cty.StringVal(c.Kubeconfig)}
	for k, v := range attrs {
		withKC[k] = v
	}
	return cfgFor(t, m, withKC)
}

func plan(t *testing.T, m modules.Module, cfg modules.Config) modules.PlanResponse {
	t.Helper()
	resp := m.Plan(ctx, modules.PlanRequest{Config: cfg})
	checkResult(t, m, resp.Result)
	return resp
}

func apply(t *testing.T, m modules.Module, cfg modules.Config, change *modules.Change) modules.ApplyResponse {
	t.Helper()
	resp := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Change: change})
	checkResult(t, m, resp.Result)
	return resp
}

// converge plans, applies a change if there is one, and checks that a second
// plan has nothing left to do. It returns the apply's (or plan's) result.
func converge(t *testing.T, m modules.Module, cfg modules.Config) (*modules.Change, cty.Value) {
	t.Helper()
	p := plan(t, m, cfg)
	require.False(t, p.Diagnostics.HasErrors(), "plan: %v", p.Diagnostics)
	res := p.Result
	if p.Change != nil {
		a := apply(t, m, cfg, p.Change)
		require.False(t, a.Diagnostics.HasErrors(), "apply: %v", a.Diagnostics)
		res = a.Result
	}
	again := plan(t, m, cfg)
	require.False(t, again.Diagnostics.HasErrors(), "second plan: %v", again.Diagnostics)
	require.Nil(t, again.Change, "second plan must have nothing to do, has %+v", again.Change)
	return p.Change, res
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
	require.NotNil(t, c, "no change")
	for _, f := range c.Fields {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("change has no field %s (has %v)", name, fieldNames(c))
	return modules.FieldChange{}
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

func strs(ss ...string) cty.Value {
	if len(ss) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(ss))
	for i, s := range ss {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}
