package kube

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

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

// The shared helpers, under the names this package's tests use.
var (
	cfgFor      = moduletest.Config
	checkResult = moduletest.CheckResult
	field       = moduletest.Field
	fieldNames  = moduletest.FieldNames
	requireDiag = moduletest.RequireError
	strs        = moduletest.Strs
)

// kcfg is cfgFor with the cluster's admin kubeconfig, unless attrs names one.
func kcfg(t *testing.T, c *kubetest.Cluster, m modules.Module, attrs map[string]cty.Value) modules.Config {
	t.Helper()
	withKC := map[string]cty.Value{"kubeconfig": cty.StringVal(c.Kubeconfig)}
	for k, v := range attrs {
		withKC[k] = v
	}
	return cfgFor(t, m, withKC)
}

// The cluster modules run where wsu runs: no host.

func plan(t *testing.T, m modules.Module, cfg modules.Config) modules.PlanResponse {
	t.Helper()
	return moduletest.Plan(t, m, modules.PlanRequest{Config: cfg})
}

func apply(t *testing.T, m modules.Module, cfg modules.Config, change *modules.Change) modules.ApplyResponse {
	t.Helper()
	return moduletest.Apply(t, m, modules.ApplyRequest{Config: cfg, Change: change})
}

// converge is moduletest.Converge; it returns the change and the apply's
// (or, with nothing to do, the plan's) result.
func converge(t *testing.T, m modules.Module, cfg modules.Config) (*modules.Change, cty.Value) {
	t.Helper()
	pr, ar := moduletest.Converge(t, m, nil, cfg)
	if pr.Change != nil {
		return pr.Change, ar.Result
	}
	return nil, pr.Result
}

// joinedNode registers a Windows Node, as its kubelet does, and marks it
// as join does (wsu.dev/owner=wsu): the Node the node modules act on.
func joinedNode(t *testing.T, c *kubetest.Cluster, name string, labels map[string]string) {
	t.Helper()
	l := map[string]string{"kubernetes.io/os": "windows"}
	for k, v := range labels {
		l[k] = v
	}
	_, err := c.CreateNode(ctx, name, l)
	require.NoError(t, err)
	require.NoError(t, c.AnnotateNode(ctx, name, OwnerAnnotation, "wsu"))
}
