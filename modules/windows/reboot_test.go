package windows

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/agenttest"
	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
)

func TestRebootValidate(t *testing.T) {
	runValidate(t, Reboot{}, []validateCase{
		{"defaults", map[string]cty.Value{}, "", ""},
		{"all set", map[string]cty.Value{
			"reboot_timeout": cty.NumberIntVal(900), "connect_timeout": cty.NumberIntVal(10), "pre_reboot_delay": cty.NumberIntVal(0),
			"post_reboot_delay": cty.NumberIntVal(5), "test_command": strs("whoami.exe"), "msg": cty.StringVal("Containers"),
		}, "", ""},
		{"zero timeout", map[string]cty.Value{"reboot_timeout": cty.NumberIntVal(0)}, "Invalid reboot_timeout", "reboot_timeout"},
		{"negative delay", map[string]cty.Value{"pre_reboot_delay": cty.NumberIntVal(-1)}, "Invalid pre_reboot_delay", "pre_reboot_delay"},
		{"delay of days", map[string]cty.Value{"pre_reboot_delay": cty.NumberIntVal(200000)}, "Invalid pre_reboot_delay", "pre_reboot_delay"},
		{"empty test command", map[string]cty.Value{"test_command": strs()}, "Empty test_command", "test_command"},
		{"long message", map[string]cty.Value{"msg": cty.StringVal(fmt.Sprintf("%0600d", 0))}, "Message too long", "msg"},
	})
}

// redials records what win_reboot asked the Redialer for.
type redials struct {
	mu   sync.Mutex
	vars []map[string]cty.Value
}

// redialer opens "new connections" to h as the engine's would: the sim
// itself (its Close does nothing), or, when the suite runs through the
// agent, a new agent connection over pipes (whose hello carries the boot
// time as it is now).
func (r *redials) redialer(t *testing.T, h *sim.Host) modules.Redialer {
	return func(ctx context.Context, vars map[string]cty.Value) (host.Host, error) {
		r.mu.Lock()
		r.vars = append(r.vars, vars)
		r.mu.Unlock()
		if viaAgent {
			return agenttest.Start(t, h, agenttest.Options{}).Client, nil
		}
		return h, nil
	}
}

func rebootCfg(t *testing.T, attrs map[string]cty.Value) modules.Config {
	if attrs == nil {
		attrs = map[string]cty.Value{}
	}
	if _, ok := attrs["pre_reboot_delay"]; !ok {
		attrs["pre_reboot_delay"] = cty.NumberIntVal(0)
	}
	return cfgFor(t, Reboot{}, attrs)
}

func TestRebootComesBack(t *testing.T) {
	h := newHost(t)
	auto := runningService(t, h, "kubelet", `C:\k\kubelet.exe`)
	writeFile(t, h, `C:\k\manual.exe`, "MZ")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "manual", BinaryPath: `C:\k\manual.exe`, StartType: host.StartManual}))
	require.NoError(t, h.StartService(ctx, "manual"))
	before, err := h.BootTime()
	require.NoError(t, err)

	var r redials
	cfg := rebootCfg(t, nil)
	hh := route(t, h)
	pr := moduletest.Plan(t, Reboot{}, modules.PlanRequest{Config: cfg, Host: hh, Redial: r.redialer(t, h)})
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	require.NotNil(t, pr.Change, "a plan always shows the reboot")
	assert.Equal(t, modules.Run, pr.Change.Action)
	assert.Equal(t, "reboot (back within 10m0s)", pr.Change.Subject)
	assert.Equal(t, cty.StringVal(before), field(t, pr.Change, "boot_time").Old)
	assert.Equal(t, cty.True, pr.Result.GetAttr("rebooted"))

	ar := moduletest.Apply(t, Reboot{}, modules.ApplyRequest{Config: cfg, Host: hh, Change: pr.Change, Redial: r.redialer(t, h)})
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.True(t, ar.Reconnect, "the engine must replace the task's connection")
	after, err := h.BootTime()
	require.NoError(t, err)
	assert.NotEqual(t, before, after)
	assert.Equal(t, cty.StringVal(after), ar.Result.GetAttr("boot_time"))
	assert.Equal(t, cty.True, ar.Result.GetAttr("rebooted"))
	boots, failures, err := h.Boots()
	require.NoError(t, err)
	assert.Equal(t, 1, boots, "rebooted exactly once")
	assert.Empty(t, failures)

	kubelet := query(t, h, "kubelet")
	assert.Equal(t, host.ServiceRunning, kubelet.State, "automatic services are back")
	assert.NotEqual(t, auto.PID, kubelet.PID, "in a new process")
	assert.Equal(t, host.ServiceStopped, query(t, h, "manual").State)

	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.vars)
	assert.Equal(t, map[string]cty.Value{"connect_timeout": cty.StringVal("5s"), "connect_retry_window": cty.StringVal("0s")}, r.vars[0])
}

// cutAnswer reboots for real but loses the answer, as a host going down
// at once may.
type cutAnswer struct{ *sim.Host }

func (c cutAnswer) Reboot(ctx context.Context, req host.RebootRequest) error {
	if err := c.Host.Reboot(ctx, req); err != nil {
		return err
	}
	return fmt.Errorf("sys.reboot: %w: EOF", host.ErrConnectionLost)
}

// neverDown accepts the reboot and never goes down.
type neverDown struct{ *sim.Host }

func (neverDown) Reboot(context.Context, host.RebootRequest) error { return nil }

// refuses fails the reboot.
type refuses struct{ *sim.Host }

func (refuses) Reboot(context.Context, host.RebootRequest) error {
	return fmt.Errorf("reboot: the agent's account does not hold SeShutdownPrivilege")
}

func TestRebootFailures(t *testing.T) {
	tests := []struct {
		name       string
		wrap       func(*sim.Host) host.Host
		attrs      map[string]cty.Value
		noRedial   bool
		wantPlan   string // a plan error's summary
		wantApply  string // an apply error's summary
		wantDetail string
		rebooted   bool
	}{
		{name: "answer cut off: still a reboot", wrap: func(h *sim.Host) host.Host { return cutAnswer{h} }, rebooted: true},
		{name: "never goes down", wrap: func(h *sim.Host) host.Host { return neverDown{h} },
			attrs:     map[string]cty.Value{"reboot_timeout": cty.NumberIntVal(1)},
			wantApply: "Host did not come back", wantDetail: "has not gone down yet"},
		{name: "refused", wrap: func(h *sim.Host) host.Host { return refuses{h} },
			wantApply: "Cannot reboot", wantDetail: "SeShutdownPrivilege"},
		{name: "platform cannot", wrap: func(h *sim.Host) host.Host { return &fakeHost{Host: h} },
			wantApply: "Not supported on this platform"},
		{name: "boot time unknown", wrap: func(h *sim.Host) host.Host {
			f, _ := h.Facts(ctx)
			f.BootTime = ""
			return &fakeHost{Host: h, facts: &f}
		}, wantPlan: "Boot time unknown"},
		{name: "no way to reconnect", noRedial: true, wantPlan: "Cannot reconnect"},
		{name: "not ready after", attrs: map[string]cty.Value{"reboot_timeout": cty.NumberIntVal(2), "test_command": strs(`C:\k\missing.exe`)},
			wantApply: "Host not ready after the reboot", wantDetail: "test_command did not succeed", rebooted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			var hh host.Host = h
			if tt.wrap != nil {
				hh = tt.wrap(h)
			}
			var r redials
			redial := r.redialer(t, h)
			if tt.noRedial {
				redial = nil
			}
			cfg := rebootCfg(t, tt.attrs)
			pr := moduletest.Plan(t, Reboot{}, modules.PlanRequest{Config: cfg, Host: hh, Redial: redial})
			if tt.wantPlan != "" {
				requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, tt.wantPlan, "")
				return
			}
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			ar := moduletest.Apply(t, Reboot{}, modules.ApplyRequest{Config: cfg, Host: hh, Change: pr.Change, Redial: redial})
			if tt.wantApply != "" {
				require.True(t, ar.Diagnostics.HasErrors())
				assert.Equal(t, tt.wantApply, ar.Diagnostics[0].Summary)
				assert.Contains(t, ar.Diagnostics[0].Detail, tt.wantDetail)
			} else {
				require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			}
			boots, _, err := h.Boots()
			require.NoError(t, err)
			want := 0
			if tt.rebooted {
				want = 1
			}
			assert.Equal(t, want, boots)
		})
	}
}
