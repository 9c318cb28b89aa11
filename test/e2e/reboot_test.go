//go:build linux

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/test/harness"
)

// simBoot reads the host's boot count, boot time and Containers state.
func simBoot(t *testing.T, env *harness.Env, h *harness.Host) (boots int, bootTime string, containers host.FeatureState) {
	t.Helper()
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		var err error
		var failures map[string]string
		if boots, failures, err = s.Boots(); err != nil {
			return err
		}
		assert.Empty(t, failures, "every automatic service started at boot")
		if bootTime, err = s.BootTime(); err != nil {
			return err
		}
		fi, err := s.OptionalFeature(context.Background(), sim.ContainersFeature)
		containers = fi.State
		return err
	}))
	return boots, bootTime, containers
}

// taskEvent finds a task's result in a run.
func taskEvent(r *harness.Result, host, task string) (harness.Event, bool) {
	for _, ev := range r.Tasks(host) {
		if ev.Task == task {
			return ev, true
		}
	}
	return harness.Event{}, false
}

// TestJoinEnablesContainersAndReboots: a host without the Containers
// feature (a fresh Windows Server). The plan shows the restart; with
// reboot = "never" join enables the feature and stops, saying a restart is
// needed; with the default it restarts the host once (new boot time, the
// automatic services back) and joins; a re-run changes nothing and does not
// restart again.
func TestJoinEnablesContainersAndReboots(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		return s.SetOptionalFeature(sim.ContainersFeature, host.FeatureDisabled)
	}))
	_, bootBefore, _ := simBoot(t, env, h)

	t.Run("plan", func(t *testing.T) {
		r := run(t, env, nil, "plan", "join", "--detailed-exitcode")
		require.Equalf(t, 2, r.ExitCode, "plan: changes, no errors\n%s", r.Failures())
		ev, ok := taskEvent(r, h.Name, "containers feature")
		require.True(t, ok)
		assert.Equal(t, "changed", ev.Status)
		ev, ok = taskEvent(r, h.Name, "restart for containers")
		require.True(t, ok, "the plan has the restart")
		assert.Equal(t, "changed", ev.Status, "the plan says the host will restart")
		require.NotNil(t, ev.Change)
		assert.Equal(t, "run", ev.Change.Action)
		assert.True(t, strings.HasPrefix(ev.Change.Subject, "reboot"), ev.Change.Subject)
		boots, _, state := simBoot(t, env, h)
		assert.Zero(t, boots, "a plan restarts nothing")
		assert.Equal(t, host.FeatureDisabled, state, "a plan enables nothing")
	})

	t.Run("never", func(t *testing.T) {
		r := run(t, env, nil, "apply", "join", "-var", "reboot=never")
		require.NotEqual(t, 0, r.ExitCode)
		assert.Contains(t, r.Failures(), `reboot = "never"`, "the failure says why")
		boots, _, state := simBoot(t, env, h)
		assert.Zero(t, boots)
		assert.Equal(t, host.FeatureEnablePending, state, "enabled, waiting for a restart")
	})

	t.Run("if-needed", func(t *testing.T) {
		r := run(t, env, nil, "apply", "join")
		requireSuccess(t, r)
		ev, ok := taskEvent(r, h.Name, "restart for containers")
		require.True(t, ok)
		assert.Equal(t, "changed", ev.Status)
		boots, bootTime, state := simBoot(t, env, h)
		assert.Equal(t, 1, boots, "restarted exactly once")
		assert.NotEqual(t, bootBefore, bootTime)
		assert.Equal(t, host.FeatureEnabled, state)
		checkJoined(t, env, h)
	})
	if t.Failed() {
		return
	}

	t.Run("rerun", func(t *testing.T) {
		r := run(t, env, nil, "apply", "join")
		requireSuccess(t, r)
		assert.Empty(t, r.Changed(h.Name), "a re-run changes nothing")
		boots, _, _ := simBoot(t, env, h)
		assert.Equal(t, 1, boots, "and restarts nothing")
	})
}
