package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

// rebootAndWait reboots h and waits (on the condition, not a clock) until
// it has come back.
func rebootAndWait(t *testing.T, h *Host) {
	t.Helper()
	require.NoError(t, h.Reboot(context.Background(), host.RebootRequest{Message: "test"}))
	select {
	case <-h.Halted():
	case <-time.After(time.Minute):
		t.Fatal("the simulated reboot did not happen within a minute")
	}
}

func TestRebootRestartsAutomaticServicesAndMovesBootTime(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	before, err := h.Facts(ctx)
	require.NoError(t, err)
	for _, s := range []struct {
		name  string
		start host.StartType
		run   bool
	}{
		{"auto", host.StartAutomatic, false}, // stopped before: a boot starts it
		{"delayed", host.StartDelayedAutomatic, true},
		{"manual", host.StartManual, true}, // running before: a boot leaves it stopped
		{"off", host.StartDisabled, false},
	} {
		bin := `C:\k\` + s.name + `.exe`
		writeFile(t, h, bin, "MZ stand-in")
		require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: s.name, BinaryPath: bin, StartType: s.start}))
		if s.run {
			require.NoError(t, h.StartService(ctx, s.name))
		}
	}
	stray, err := h.AddProcess(host.Process{Image: "stray.exe"})
	require.NoError(t, err)

	rebootAndWait(t, h)

	after, err := h.Facts(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, before.BootTime, after.BootTime)
	b1, _ := time.Parse(time.RFC3339Nano, before.BootTime)
	b2, _ := time.Parse(time.RFC3339Nano, after.BootTime)
	assert.True(t, b2.After(b1), "boot time moves forward: %s then %s", before.BootTime, after.BootTime)
	want := map[string]host.ServiceState{"auto": host.ServiceRunning, "delayed": host.ServiceRunning, "manual": host.ServiceStopped, "off": host.ServiceStopped}
	for name, state := range want {
		info, err := h.QueryService(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, state, info.State, name)
	}
	procs, err := h.ListProcesses(ctx)
	require.NoError(t, err)
	for _, p := range procs {
		assert.NotEqual(t, stray.PID, p.PID, "a process from before the reboot still runs")
	}
	boots, failures, err := h.Boots()
	require.NoError(t, err)
	assert.Equal(t, 1, boots)
	assert.Empty(t, failures)
}

func TestRebootRecordsServicesThatCannotStart(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\gone.exe`, "MZ")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "gone", BinaryPath: `C:\k\gone.exe`, StartType: host.StartAutomatic}))
	require.NoError(t, h.Remove(ctx, `C:\k\gone.exe`, false))
	rebootAndWait(t, h)
	_, failures, err := h.Boots()
	require.NoError(t, err)
	assert.Contains(t, failures["gone"], "cannot find the file")
}

func TestRebootRefusedWhileOneIsUnderWay(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.Reboot(context.Background(), host.RebootRequest{Delay: time.Hour}))
	err := h.Reboot(context.Background(), host.RebootRequest{})
	assert.ErrorContains(t, err, "ERROR_SHUTDOWN_IN_PROGRESS")
	assert.Error(t, h.Reboot(context.Background(), host.RebootRequest{Delay: -time.Second}))
}

func TestOptionalFeatureEnableTakesEffectAtReboot(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	fi, err := h.OptionalFeature(ctx, "containers")
	require.NoError(t, err)
	assert.Equal(t, host.FeatureInfo{Name: "Containers", State: host.FeatureEnabled, RestartPossible: true}, fi, "a fresh sim host has Containers on")
	_, err = h.HNSNetworks(ctx)
	require.NoError(t, err)

	require.NoError(t, h.SetOptionalFeature(ContainersFeature, host.FeatureDisabled))
	_, err = h.HNSNetworks(ctx)
	assert.ErrorIs(t, err, ErrHNSUnavailable, "no HNS without Containers")

	fi, err = h.EnableOptionalFeature(ctx, "Containers")
	require.NoError(t, err)
	assert.Equal(t, host.FeatureEnablePending, fi.State)
	assert.True(t, fi.RestartRequired)
	again, err := h.EnableOptionalFeature(ctx, "Containers")
	require.NoError(t, err)
	assert.Equal(t, fi, again, "enabling a pending feature changes nothing")
	_, err = h.HNSNetworks(ctx)
	assert.ErrorIs(t, err, ErrHNSUnavailable, "not before the restart")

	rebootAndWait(t, h)
	fi, err = h.OptionalFeature(ctx, "Containers")
	require.NoError(t, err)
	assert.Equal(t, host.FeatureEnabled, fi.State)
	assert.False(t, fi.RestartRequired)
	_, err = h.HNSNetworks(ctx)
	assert.NoError(t, err)
}

func TestOptionalFeatureErrors(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	_, err := h.OptionalFeature(ctx, "No-Such-Feature")
	assert.ErrorIs(t, err, host.ErrFeatureUnknown)
	_, err = h.EnableOptionalFeature(ctx, "No-Such-Feature")
	assert.ErrorIs(t, err, host.ErrFeatureUnknown)
	_, err = h.OptionalFeature(ctx, "Containers /All")
	assert.ErrorContains(t, err, "only letters")
}
