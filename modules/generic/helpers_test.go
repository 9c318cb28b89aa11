package generic

import (
	"context"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
	"github.com/wsu-project/wsu/transport/local"
)

var ctx = context.Background()

// The shared helpers, under the names this package's tests use.
var (
	cfgFor      = moduletest.Config
	field       = moduletest.Field
	fieldNames  = moduletest.FieldNames
	action      = moduletest.Action
	requireDiag = moduletest.RequireError
)

// testHost is the local machine for a host module, nil for a controller one.
func testHost(m modules.Module) host.Host {
	if m.Schema().Target == modules.TargetController {
		return nil
	}
	return local.New()
}

func plan(t *testing.T, m modules.Module, cfg modules.Config) modules.PlanResponse {
	t.Helper()
	return moduletest.Plan(t, m, modules.PlanRequest{Config: cfg, Host: testHost(m)})
}

func apply(t *testing.T, m modules.Module, cfg modules.Config, change *modules.Change) modules.ApplyResponse {
	t.Helper()
	return moduletest.Apply(t, m, modules.ApplyRequest{Config: cfg, Host: testHost(m), Change: change})
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
