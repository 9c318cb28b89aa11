//go:build !windows

package windows_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
	winmod "github.com/wsu-project/wsu/modules/windows"
)

// TestWineServiceDependencies: Wine's QueryServiceConfig reports no
// dependencies although its SCM stores them; the platform reads them where
// the SCM keeps them, so they read back as written, updated and cleared.
func TestWineServiceDependencies(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	base := host.ServiceConfig{Name: "wsu-dep-base", DisplayName: "wsu-dep-base", Description: "Managed by wsu",
		BinaryPath: `C:\k\winsvc.exe`, Args: []string{"-service"}, StartType: host.StartManual}
	cfg := host.ServiceConfig{Name: "wsu-dep", DisplayName: "wsu-dep", Description: "Managed by wsu",
		BinaryPath: `C:\k\winsvc.exe`, Args: []string{"-service"}, StartType: host.StartAutomatic,
		Dependencies: []string{"wsu-dep-base", "hybrid-overlay-node"}}
	updated := cfg
	updated.Dependencies = []string{"wsu-dep-base"}
	cleared := cfg
	cleared.Dependencies = nil
	rs := pr.ok(
		step{"svc-create", a{"service": base}},
		step{"svc-create", a{"service": cfg}},
		step{"svc-query", a{"name": cfg.Name}},
		step{"svc-update", a{"service": updated}},
		step{"svc-query", a{"name": cfg.Name}},
		step{"svc-update", a{"service": cleared}},
		step{"svc-query", a{"name": cfg.Name}},
		step{"svc-query", a{"name": base.Name}},
	)
	assert.Equal(t, cfg, value[host.ServiceInfo](t, rs[2]).Config, "created with dependencies")
	assert.Equal(t, updated, value[host.ServiceInfo](t, rs[4]).Config, "dependencies changed")
	assert.Empty(t, value[host.ServiceInfo](t, rs[6]).Config.Dependencies, "dependencies cleared")
	assert.Empty(t, value[host.ServiceInfo](t, rs[7]).Config.Dependencies)
}

// TestWineDependentStopOrder: on Wine's SCM, the services depending on one
// are found (Wine's EnumDependentServices reports none; the platform reads
// every service's dependencies), ordered deepest first with their states,
// and win_service, driving `wsu.exe agent` as a play would, restarts a
// service by stopping its running dependents first, deepest first, and
// starting them again in dependency order. The stand-ins append to one
// shared marker file, and each stop waits for its process to exit, so the
// file's order is the order the SCM carried out.
func TestWineDependentStopOrder(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	wsu := buildWsu(t)
	exe, err := os.ReadFile(pr.winsvc)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(pr.p.LinuxPath(`C:\k`), 0o755))
	require.NoError(t, os.WriteFile(pr.p.LinuxPath(`C:\k\winsvc.exe`), exe, 0o755))
	const marker = `C:\k\services.log`
	svc := func(name string, deps ...string) host.ServiceConfig {
		return host.ServiceConfig{Name: name, DisplayName: name, Description: winmod.ManagedDescription,
			BinaryPath: `C:\k\winsvc.exe`, Args: []string{"-service", "-name", name, "-marker", marker},
			StartType: host.StartManual, Dependencies: deps}
	}
	// base <- mid <- top; idle depends on base but is stopped; other
	// depends on nothing.
	services := []host.ServiceConfig{
		svc("wsu-d-base"), svc("wsu-d-mid", "wsu-d-base"), svc("wsu-d-top", "wsu-d-mid"),
		svc("wsu-d-idle", "wsu-d-base"), svc("wsu-d-other"),
	}
	var steps []step
	for _, s := range services {
		steps = append(steps, step{"svc-create", a{"service": s}})
	}
	for _, s := range []string{"wsu-d-base", "wsu-d-mid", "wsu-d-top", "wsu-d-other"} {
		steps = append(steps, step{"svc-start", a{"name": s}},
			step{"svc-wait", a{"name": s, "state": host.ServiceRunning, "timeout_ms": 20000}})
	}
	steps = append(steps, step{"svc-dependents", a{"name": "wsu-d-base"}},
		step{"svc-dependents", a{"name": "wsu-d-top"}})
	rs := pr.ok(steps...)
	assert.Equal(t, []host.ServiceStatus{
		{Name: "wsu-d-idle", State: host.ServiceStopped},
		{Name: "wsu-d-top", State: host.ServiceRunning},
		{Name: "wsu-d-mid", State: host.ServiceRunning},
	}, value[[]host.ServiceStatus](t, rs[len(rs)-2]), "deepest first, with states")
	assert.Empty(t, value[[]host.ServiceStatus](t, rs[len(rs)-1]), "nothing depends on the top")
	missing := pr.run(step{"svc-dependents", a{"name": "wsu-d-missing"}})[0]
	assert.Contains(t, missing.Error, "does not exist")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := startAgent(ctx, t, pr, wsu)
	logPath := pr.p.LinuxPath(marker)
	require.NoError(t, os.Truncate(logPath, 0))

	m := winmod.Service{}
	cfg := moduletest.Config(t, m, map[string]cty.Value{"name": cty.StringVal("wsu-d-base"), "state": cty.StringVal("restarted")})
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg, Host: h})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	require.NotNil(t, plan.Change)
	assert.Equal(t, []string{"wsu-d-top", "wsu-d-mid", "wsu-d-base"}, plan.Change.Restarts)
	res := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Host: h, Change: plan.Change})
	require.False(t, res.Diagnostics.HasErrors(), "%v", res.Diagnostics)

	var got []string
	for _, l := range readMarker(t, logPath) {
		got = append(got, l.Event+" "+l.Args[2]) // -name NAME
	}
	assert.Equal(t, []string{
		"stop wsu-d-top", "stop wsu-d-mid", "stop wsu-d-base",
		"start wsu-d-base", "start wsu-d-mid", "start wsu-d-top",
	}, withoutExits(got))
	for _, s := range []string{"wsu-d-base", "wsu-d-mid", "wsu-d-top", "wsu-d-other"} {
		info, err := h.QueryService(ctx, s)
		require.NoError(t, err)
		assert.Equalf(t, host.ServiceRunning, info.State, "%s", s)
	}
	info, err := h.QueryService(ctx, "wsu-d-idle")
	require.NoError(t, err)
	assert.Equal(t, host.ServiceStopped, info.State, "a stopped dependent is not started")
}

// withoutExits drops the "exit" lines a stand-in writes as its process
// ends (after its "stop"): stops are sequential, so they add nothing.
func withoutExits(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "exit ") {
			out = append(out, l)
		}
	}
	return out
}
