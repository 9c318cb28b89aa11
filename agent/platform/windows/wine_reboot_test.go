//go:build !windows

package windows_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/windows"
	"github.com/wsu-project/wsu/host"
)

// TestWineReboot: Reboot under Wine's real advapi32 up to the restart
// itself. Enabling SeShutdownPrivilege (OpenProcessToken,
// LookupPrivilegeValue, AdjustTokenPrivileges) runs for real; the
// InitiateSystemShutdownEx call is recorded through the platform's
// Options.Shutdown seam, and the test checks what it would have asked.
// The boot time fact comes from NtQuerySystemInformation, which Wine
// answers with its server's start: it must be there and stay put.
func TestWineReboot(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	rs := pr.run(
		step{"facts", nil},
		step{"reboot", a{"timeout_ms": 2500, "value": "wsu join: restart to enable the Windows feature Containers"}},
		step{"shutdown-calls", nil},
		step{"reboot", a{"timeout_ms": -1000}},
		step{"facts", nil},
	)
	require.Empty(t, rs[0].Error)
	f := value[host.Facts](t, rs[0])
	bt, err := time.Parse(time.RFC3339Nano, f.BootTime)
	require.NoError(t, err, "boot time %q", f.BootTime)
	assert.True(t, bt.Before(time.Now()), "booted in the past: %s", bt)
	require.Empty(t, rs[1].Error, "the privilege is enabled and the call made")
	calls := value[[]windows.ShutdownCall](t, rs[2])
	assert.Equal(t, []windows.ShutdownCall{{
		Message: "wsu join: restart to enable the Windows feature Containers", Timeout: 3,
		ForceAppsClosed: true, RebootAfterShutdown: true, Reason: windows.RebootReason,
	}}, calls, "one call: restart, apps closed, planned-installation reason, delay rounded up")
	assert.Contains(t, rs[3].Error, "out of range", "a bad delay is refused before any call")
	assert.Equal(t, f.BootTime, value[host.Facts](t, rs[4]).BootTime)
}

// TestWineOptionalFeature: Wine's dism.exe is a stub that prints nothing
// and exits 0. The platform must not read that as a state: reading and
// enabling a feature fail, saying why. (What real DISM prints is covered
// by the contract tests in dism_test.go.)
func TestWineOptionalFeature(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	rs := pr.run(
		step{"feature-get", a{"name": "Containers"}},
		step{"feature-enable", a{"name": "Containers"}},
		step{"feature-get", a{"name": "Containers /Quiet"}},
	)
	for i := range 2 {
		assert.Contains(t, rs[i].Error, "printed no feature state", "step %d", i)
	}
	assert.Contains(t, rs[2].Error, "only letters")
}
