//go:build !windows

package windows_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsu-project/wsu/host"
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
