package windows

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

const kubeletExe = `C:\k\kubelet.exe`

func recoveryObj(reset int64, delays ...int64) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(delays...), "reset_period": cty.NumberIntVal(reset)})
}

func TestServiceCreate(t *testing.T) {
	tests := []struct {
		name       string
		attrs      map[string]cty.Value // name and path are added
		wantFields []string
		check      func(t *testing.T, h *sim.Host, c *modules.Change)
	}{
		{
			name: "defaults",
			attrs: map[string]cty.Value{
				"args":         strs("--config=C:\\k\\kubelet.conf", "--windows-service"),
				"dependencies": strs("containerd"),
			},
			wantFields: []string{"path", "args", "display_name", "description", "start_mode", "dependencies", "state"},
			check: func(t *testing.T, h *sim.Host, c *modules.Change) {
				assert.Equal(t, cty.NullVal(cty.String), field(t, c, "path").Old)
				assert.Equal(t, cty.StringVal(ManagedDescription), field(t, c, "description").New)
				assert.Equal(t, cty.StringVal("running"), field(t, c, "state").New)
				info := query(t, h, "kubelet")
				assert.Equal(t, host.ServiceRunning, info.State)
				assert.Equal(t, host.ServiceConfig{
					Name: "kubelet", DisplayName: "kubelet", Description: ManagedDescription, BinaryPath: kubeletExe,
					Args: []string{`--config=C:\k\kubelet.conf`, "--windows-service"}, StartType: host.StartAutomatic,
					Dependencies: []string{"containerd"},
				}, info.Config)
			},
		},
		{
			name: "stopped, manual, named",
			attrs: map[string]cty.Value{
				"state": cty.StringVal("stopped"), "start_mode": cty.StringVal("manual"),
				"display_name": cty.StringVal("Kubernetes kubelet"), "description": cty.StringVal("Node agent"),
			},
			wantFields: []string{"path", "args", "display_name", "description", "start_mode", "dependencies", "state"},
			check: func(t *testing.T, h *sim.Host, c *modules.Change) {
				assert.Equal(t, cty.StringVal("stopped"), field(t, c, "state").New)
				info := query(t, h, "kubelet")
				assert.Equal(t, host.ServiceStopped, info.State)
				assert.Equal(t, "Kubernetes kubelet", info.Config.DisplayName)
				assert.Equal(t, "Node agent", info.Config.Description, "a custom description replaces the marker")
				assert.Equal(t, host.StartManual, info.Config.StartType)
			},
		},
		{
			name:       "with recovery",
			attrs:      map[string]cty.Value{"recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(5, 10, 30)})},
			wantFields: []string{"path", "args", "display_name", "description", "start_mode", "dependencies", "recovery", "state"},
			check: func(t *testing.T, h *sim.Host, c *modules.Change) {
				assert.Equal(t, recoveryObj(defaultResetPeriod, 5, 10, 30), field(t, c, "recovery").New)
				rec, err := h.ServiceRecovery("kubelet")
				require.NoError(t, err)
				require.NotNil(t, rec)
				assert.Equal(t, host.ServiceRecovery{
					RestartDelays: []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second},
					ResetPeriod:   24 * time.Hour,
				}, *rec)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			runningService(t, h, "containerd", `C:\k\containerd\containerd.exe`)
			writeFile(t, h, kubeletExe, "MZ kubelet")
			attrs := map[string]cty.Value{"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe)}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, Service{}, attrs)
			pr, ar := converge(t, Service{}, h, cfg)
			require.NotNil(t, pr.Change)
			assert.Equal(t, modules.Create, pr.Change.Action)
			assert.Equal(t, "kubelet", pr.Change.Subject)
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
			assert.Empty(t, pr.Change.Restarts)
			assert.Equal(t, pr.Result, ar.Result)
			tt.check(t, h, pr.Change)
		})
	}
}

func TestServiceUpdate(t *testing.T) {
	base := map[string]cty.Value{
		"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe), "args": strs("--windows-service"),
	}
	tests := []struct {
		name         string
		setup        func(t *testing.T, h *sim.Host)
		attrs        map[string]cty.Value // on top of base
		wantAction   modules.Action
		wantFields   []string
		wantRestarts []string
		wantState    host.ServiceState // afterwards; "" for deleted
		wantNewPID   bool
	}{
		{name: "in sync", wantState: host.ServiceRunning},
		{
			name:       "display name only",
			attrs:      map[string]cty.Value{"display_name": cty.StringVal("Kubelet")},
			wantAction: modules.Update, wantFields: []string{"display_name"}, wantState: host.ServiceRunning,
		},
		{
			name:       "description only",
			attrs:      map[string]cty.Value{"description": cty.StringVal("Kubernetes node agent")},
			wantAction: modules.Update, wantFields: []string{"description"}, wantState: host.ServiceRunning,
		},
		{
			name:       "start mode only",
			attrs:      map[string]cty.Value{"start_mode": cty.StringVal("delayed_automatic")},
			wantAction: modules.Update, wantFields: []string{"start_mode"}, wantState: host.ServiceRunning,
		},
		{
			name:       "dependencies only",
			attrs:      map[string]cty.Value{"dependencies": strs("containerd")},
			wantAction: modules.Update, wantFields: []string{"dependencies"}, wantState: host.ServiceRunning,
		},
		{
			name: "dependencies in another order and case",
			setup: func(t *testing.T, h *sim.Host) {
				info := query(t, h, "kubelet")
				info.Config.Dependencies = []string{"hns", "containerd"}
				require.NoError(t, h.UpdateService(ctx, info.Config))
			},
			attrs:     map[string]cty.Value{"dependencies": strs("Containerd", "HNS")},
			wantState: host.ServiceRunning,
		},
		{
			name:       "args while running",
			attrs:      map[string]cty.Value{"args": strs("--windows-service", "--v=4")},
			wantAction: modules.Update, wantFields: []string{"args"}, wantRestarts: []string{"kubelet"},
			wantState: host.ServiceRunning, wantNewPID: true,
		},
		{
			name:       "path while running",
			setup:      func(t *testing.T, h *sim.Host) { writeFile(t, h, `C:\k\v2\kubelet.exe`, "MZ v2") },
			attrs:      map[string]cty.Value{"path": cty.StringVal(`C:\k\v2\kubelet.exe`)},
			wantAction: modules.Update, wantFields: []string{"path"}, wantRestarts: []string{"kubelet"},
			wantState: host.ServiceRunning, wantNewPID: true,
		},
		{
			name:      "path differs only in spelling",
			attrs:     map[string]cty.Value{"path": cty.StringVal("c:/K/Kubelet.EXE")},
			wantState: host.ServiceRunning,
		},
		{
			name:       "args while stopped: no restart",
			setup:      func(t *testing.T, h *sim.Host) { require.NoError(t, h.StopService(ctx, "kubelet", 0)) },
			attrs:      map[string]cty.Value{"args": strs("--v=4"), "state": cty.StringVal("stopped")},
			wantAction: modules.Update, wantFields: []string{"args"}, wantState: host.ServiceStopped,
		},
		{
			name:       "stop",
			attrs:      map[string]cty.Value{"state": cty.StringVal("stopped")},
			wantAction: modules.Update, wantFields: []string{"state"}, wantState: host.ServiceStopped,
		},
		{
			name:       "start",
			setup:      func(t *testing.T, h *sim.Host) { require.NoError(t, h.StopService(ctx, "kubelet", 0)) },
			wantAction: modules.Update, wantFields: []string{"state"}, wantState: host.ServiceRunning, wantNewPID: true,
		},
		{
			name:       "recovery only",
			attrs:      map[string]cty.Value{"recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(10), "reset_period": cty.NumberIntVal(3600)})},
			wantAction: modules.Update, wantFields: []string{"recovery"}, wantState: host.ServiceRunning,
		},
		{
			name:       "absent",
			attrs:      map[string]cty.Value{"state": cty.StringVal("absent"), "path": cty.NullVal(cty.String)},
			wantAction: modules.Delete, wantFields: []string{"path", "state"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			runningService(t, h, "containerd", `C:\k\containerd.exe`)
			runningService(t, h, "hns", `C:\Windows\System32\hns.exe`)
			runningService(t, h, "kubelet", kubeletExe, "--windows-service")
			if tt.setup != nil {
				tt.setup(t, h)
			}
			before := query(t, h, "kubelet")
			attrs := map[string]cty.Value{}
			for k, v := range base {
				attrs[k] = v
			}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, Service{}, attrs)
			pr, _ := converge(t, Service{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
			if pr.Change != nil {
				assert.Equal(t, tt.wantRestarts, pr.Change.Restarts)
			}
			after := query(t, h, "kubelet")
			if tt.wantState == "" {
				assert.False(t, after.Exists, "deleted")
				return
			}
			assert.Equal(t, tt.wantState, after.State)
			if tt.wantState == host.ServiceRunning {
				assert.Equal(t, tt.wantNewPID, before.PID != after.PID, "restarted")
			}
		})
	}
}

func TestServiceFieldValues(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kubelet", kubeletExe, "--windows-service")
	cfg := cfgFor(t, Service{}, map[string]cty.Value{
		"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe), "args": strs("--windows-service", "--v=2"),
		"state": cty.StringVal("stopped"),
	})
	pr := plan(t, Service{}, h, cfg)
	require.NotNil(t, pr.Change)
	assert.Equal(t, strs("--windows-service"), field(t, pr.Change, "args").Old, "lists render as lists")
	assert.Equal(t, strs("--windows-service", "--v=2"), field(t, pr.Change, "args").New)
	assert.Equal(t, cty.StringVal("running"), field(t, pr.Change, "state").Old)
	assert.Equal(t, cty.StringVal("stopped"), field(t, pr.Change, "state").New)
	assert.Empty(t, pr.Change.Restarts, "stopping anyway")
	assert.Equal(t, cty.StringVal("stopped"), pr.Result.GetAttr("state"))
}

func TestServiceRestarted(t *testing.T) {
	for _, stopped := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "stopped"}[stopped], func(t *testing.T) {
			h := newHost(t)
			before := runningService(t, h, "kubelet", kubeletExe)
			if stopped {
				require.NoError(t, h.StopService(ctx, "kubelet", 0))
			}
			cfg := cfgFor(t, Service{}, map[string]cty.Value{
				"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe), "state": cty.StringVal("restarted"),
			})
			for range 2 { // restarted changes every time
				pr := plan(t, Service{}, h, cfg)
				require.NotNil(t, pr.Change)
				if stopped {
					assert.Equal(t, []string{"state"}, fieldNames(pr.Change))
					assert.Empty(t, pr.Change.Restarts)
					stopped = false // started by the first apply
				} else {
					assert.Empty(t, pr.Change.Fields)
					assert.Equal(t, []string{"kubelet"}, pr.Change.Restarts)
				}
				ar := apply(t, Service{}, h, cfg, pr.Change)
				require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
				after := query(t, h, "kubelet")
				assert.Equal(t, host.ServiceRunning, after.State)
				assert.NotEqual(t, before.PID, after.PID)
				before = after
			}
		})
	}
}

func TestServiceAbsentMissing(t *testing.T) {
	cfg := cfgFor(t, Service{}, map[string]cty.Value{"name": cty.StringVal("kubelet"), "state": cty.StringVal("absent")})
	pr, _ := converge(t, Service{}, newHost(t), cfg)
	assert.Nil(t, pr.Change)
	assert.Equal(t, cty.NullVal(cty.String), pr.Result.GetAttr("state"))
}

// TestServiceAbsentOnlyIfManaged: the removal playbook deletes only the
// services carrying wsu's marker; another service of the same name (an
// admin's own containerd) stays, with a warning, in plan and apply alike.
func TestServiceAbsentOnlyIfManaged(t *testing.T) {
	tests := []struct {
		name        string
		description string
		wantDeleted bool
	}{
		{"created by wsu", ManagedDescription, true},
		{"marker with more after it", ManagedDescription + ": containerd", true},
		{"someone else's", "containerd container runtime", false},
		{"no description", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			info := runningService(t, h, "containerd", `C:\k\containerd\containerd.exe`)
			info.Config.Description = tt.description
			require.NoError(t, h.UpdateService(ctx, info.Config))
			cfg := cfgFor(t, Service{}, map[string]cty.Value{"name": cty.StringVal("containerd"), "state": cty.StringVal("absent"), "only_if_managed": cty.True})
			pr, _ := converge(t, Service{}, h, cfg)
			after := query(t, h, "containerd")
			if tt.wantDeleted {
				assert.Equal(t, modules.Delete, action(pr.Change))
				assert.False(t, after.Exists)
				return
			}
			assert.Nil(t, pr.Change)
			require.Len(t, pr.Diagnostics, 1)
			assert.Equal(t, hcl.DiagWarning, pr.Diagnostics[0].Severity)
			assert.Equal(t, "Service not managed by wsu", pr.Diagnostics[0].Summary)
			assert.True(t, after.Exists)
			assert.Equal(t, host.ServiceRunning, after.State)
		})
	}
}

// TestServiceOnlyIfManagedPresent: join's exporter task configures the
// service wsu installed, or installs it, but leaves a site's own
// windows_exporter as it is, with a warning.
func TestServiceOnlyIfManagedPresent(t *testing.T) {
	exe := `C:\k\windows_exporter.exe`
	for _, tt := range []struct {
		name, description string
		exists, wantOwn   bool
	}{
		{"missing", "", false, true},
		{"wsu's", ManagedDescription, true, true},
		{"the site's", "Exports Windows metrics", true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			writeFile(t, h, exe, "MZ exporter")
			if tt.exists {
				require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "windows_exporter", BinaryPath: `C:\Program Files\x.exe`, Description: tt.description, StartType: host.StartManual}))
			}
			cfg := cfgFor(t, Service{}, map[string]cty.Value{"name": cty.StringVal("windows_exporter"), "path": cty.StringVal(exe), "args": strs("--web.listen-address=:9182"), "only_if_managed": cty.True})
			pr, _ := converge(t, Service{}, h, cfg)
			after := query(t, h, "windows_exporter")
			if tt.wantOwn {
				assert.Equal(t, exe, after.Config.BinaryPath)
				assert.Equal(t, host.ServiceRunning, after.State)
				return
			}
			assert.Nil(t, pr.Change)
			requireDiag(t, pr.Diagnostics, cfg, hcl.DiagWarning, "Service not managed by wsu", "only_if_managed")
			assert.Equal(t, `C:\Program Files\x.exe`, after.Config.BinaryPath, "not reconfigured")
			assert.Equal(t, host.ServiceStopped, after.State, "not started")
		})
	}
}

// On a platform that cannot set failure actions (Wine) the task fails with
// an error that says so, and keeps failing: nothing pretends it worked.
func TestServiceRecoveryNotSupported(t *testing.T) {
	h := newHost(t)
	writeFile(t, h, kubeletExe, "MZ kubelet")
	f := &fakeHost{Host: h, recoveryErr: host.NotSupported("service recovery", "wine")}
	cfg := cfgFor(t, Service{}, map[string]cty.Value{
		"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe),
		"recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(5)}),
	})
	for range 2 {
		pr := plan(t, Service{}, f, cfg)
		require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
		require.NotNil(t, pr.Change)
		assert.Contains(t, fieldNames(pr.Change), "recovery")
		ar := apply(t, Service{}, f, cfg, pr.Change)
		d := requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Recovery actions not supported", "recovery")
		assert.Contains(t, d.Detail, "recovery actions are not supported on this platform")
		// The rest of the change still happened.
		assert.Equal(t, host.ServiceRunning, query(t, h, "kubelet").State)
	}
	assert.Equal(t, []string{"recovery kubelet", "start kubelet", "recovery kubelet"}, f.ops())
}

// Where the registry cannot be read, recovery cannot be compared: the plan
// says so with an unknown old value rather than claiming it is in sync.
func TestServiceRecoveryUnobservable(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kubelet", kubeletExe)
	f := &fakeHost{Host: h, registryErr: host.NotSupported("registry get", "test")}
	cfg := cfgFor(t, Service{}, map[string]cty.Value{
		"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe),
		"recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(5)}),
	})
	pr := plan(t, Service{}, f, cfg)
	require.NotNil(t, pr.Change)
	assert.Equal(t, []string{"recovery"}, fieldNames(pr.Change))
	assert.False(t, field(t, pr.Change, "recovery").Old.IsKnown())
}

// The SCM's FailureActions value wins over wsu's copy, so a change made
// outside wsu on a real node shows in the plan.
func TestServiceRecoveryFromSCM(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kubelet", kubeletExe)
	cfg := cfgFor(t, Service{}, map[string]cty.Value{
		"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe),
		"recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(60, 60), "reset_period": cty.NumberIntVal(86400)}),
	})
	converge(t, Service{}, h, cfg)
	// As Windows stores "restart after 60 s twice, then nothing".
	require.NoError(t, h.RegistrySet(ctx, serviceKey("kubelet"), scmFailureActions, host.RegistryValue{Type: host.RegBinary, Binary: windowsFailureActions(t)}))
	assert.Nil(t, plan(t, Service{}, h, cfg).Change)

	other := cfgFor(t, Service{}, map[string]cty.Value{
		"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe),
		"recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(5)}),
	})
	pr := plan(t, Service{}, h, other)
	require.NotNil(t, pr.Change)
	assert.Equal(t, recoveryObj(86400, 60, 60), field(t, pr.Change, "recovery").Old)
}

// windowsFailureActions is a FailureActions value as a real node holds it.
func windowsFailureActions(t *testing.T) []byte {
	b, err := hex.DecodeString("80510100" + "00000000" + "00000000" + "03000000" + "14000000" +
		"0100000060ea0000" + "0100000060ea0000" + "0000000000000000")
	require.NoError(t, err)
	return b
}

func TestDecodeFailureActions(t *testing.T) {
	rec, other, ok := decodeFailureActions(windowsFailureActions(t))
	require.True(t, ok)
	assert.False(t, other)
	assert.Equal(t, host.ServiceRecovery{RestartDelays: []time.Duration{time.Minute, time.Minute}, ResetPeriod: 24 * time.Hour}, rec)

	reboot := windowsFailureActions(t)
	reboot[20] = 2 // SC_ACTION_REBOOT
	_, other, ok = decodeFailureActions(reboot)
	assert.True(t, ok)
	assert.True(t, other)

	_, _, ok = decodeFailureActions(windowsFailureActions(t)[:30])
	assert.False(t, ok, "truncated")
	_, _, ok = decodeFailureActions(nil)
	assert.False(t, ok)

	want := host.ServiceRecovery{RestartDelays: []time.Duration{5 * time.Second, 1500 * time.Millisecond}, ResetPeriod: time.Hour}
	rec, other, ok = decodeFailureActions(encodeFailureActions(want))
	require.True(t, ok)
	assert.False(t, other)
	assert.Equal(t, want, rec)
}

func TestServiceUnknown(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kubelet", kubeletExe)
	path := cty.StringVal(kubeletExe)
	tests := []struct {
		name         string
		attrs        map[string]cty.Value
		wantAction   modules.Action
		wantSubject  string
		wantFields   []string
		wantRestarts []string
	}{
		{
			name:        "name",
			attrs:       map[string]cty.Value{"name": unknownStr, "path": path},
			wantAction:  modules.Update,
			wantSubject: knownAfterApply,
			wantFields:  []string{"path", "args", "display_name", "description", "start_mode", "dependencies", "state"},
		},
		{
			name:        "state",
			attrs:       map[string]cty.Value{"name": cty.StringVal("kubelet"), "path": path, "state": unknownStr},
			wantAction:  modules.Update,
			wantSubject: "kubelet",
			wantFields:  []string{"path", "args", "display_name", "description", "start_mode", "dependencies", "state"},
		},
		{
			name:        "name, absent",
			attrs:       map[string]cty.Value{"name": unknownStr, "state": cty.StringVal("absent")},
			wantAction:  modules.Delete,
			wantSubject: knownAfterApply,
			wantFields:  []string{"state"},
		},
		{
			name:         "path of a running service",
			attrs:        map[string]cty.Value{"name": cty.StringVal("kubelet"), "path": unknownStr},
			wantAction:   modules.Update,
			wantSubject:  "kubelet",
			wantFields:   []string{"path"},
			wantRestarts: []string{"kubelet"},
		},
		{
			name:        "recovery",
			attrs:       map[string]cty.Value{"name": cty.StringVal("kubelet"), "path": path, "recovery": cty.UnknownVal(recoveryValueType)},
			wantAction:  modules.Update,
			wantSubject: "kubelet",
			wantFields:  []string{"recovery"},
		},
		{
			name: "one restart delay",
			attrs: map[string]cty.Value{"name": cty.StringVal("kubelet"), "path": path,
				"recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": cty.ListVal([]cty.Value{cty.UnknownVal(cty.Number)})})},
			wantAction:  modules.Update,
			wantSubject: "kubelet",
			wantFields:  []string{"recovery"},
		},
		{
			name:        "description",
			attrs:       map[string]cty.Value{"name": cty.StringVal("kubelet"), "path": path, "description": unknownStr},
			wantAction:  modules.Update,
			wantSubject: "kubelet",
			wantFields:  []string{"description"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Service{}, tt.attrs)
			pr := plan(t, Service{}, h, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.wantAction, pr.Change.Action)
			assert.Equal(t, tt.wantSubject, pr.Change.Subject)
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
			assert.Equal(t, tt.wantRestarts, pr.Change.Restarts)
		})
	}
	assert.Equal(t, host.ServiceRunning, query(t, h, "kubelet").State, "planning changed nothing")
}

func TestServiceValidate(t *testing.T) {
	name, path := cty.StringVal("kubelet"), cty.StringVal(kubeletExe)
	rec := func(delays cty.Value, reset cty.Value) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"restart_delays": delays, "reset_period": reset})
	}
	runValidate(t, Service{}, []validateCase{
		{name: "ok", attrs: map[string]cty.Value{"name": name, "path": path, "recovery": rec(nums(5, 10), cty.NumberIntVal(0))}},
		{name: "absent needs no path", attrs: map[string]cty.Value{"name": name, "state": cty.StringVal("absent")}},
		{name: "disabled and stopped", attrs: map[string]cty.Value{"name": name, "path": path, "start_mode": cty.StringVal("disabled"), "state": cty.StringVal("stopped")}},
		{name: "load order group dependency", attrs: map[string]cty.Value{"name": name, "path": path, "dependencies": strs("+NetworkProvider")}},
		{name: "name with slash", attrs: map[string]cty.Value{"name": cty.StringVal("k/let"), "path": path}, wantSummary: "Invalid service name", wantAttr: "name"},
		{name: "name with backslash", attrs: map[string]cty.Value{"name": cty.StringVal(`k\let`), "path": path}, wantSummary: "Invalid service name", wantAttr: "name"},
		{name: "name too long", attrs: map[string]cty.Value{"name": cty.StringVal(strings.Repeat("k", 257)), "path": path}, wantSummary: "Invalid service name", wantAttr: "name"},
		{name: "config without path", attrs: map[string]cty.Value{"name": name, "args": strs("--v=2")}, wantSummary: "Missing path", wantAttr: "args"},
		{name: "relative path", attrs: map[string]cty.Value{"name": name, "path": cty.StringVal("kubelet.exe")}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "posix path", attrs: map[string]cty.Value{"name": name, "path": cty.StringVal("/usr/bin/kubelet")}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "bad state", attrs: map[string]cty.Value{"name": name, "path": path, "state": cty.StringVal("started")}, wantSummary: "Invalid state", wantAttr: "state"},
		{name: "only_if_managed, present", attrs: map[string]cty.Value{"name": name, "path": path, "only_if_managed": cty.True}},
		{name: "bad start mode", attrs: map[string]cty.Value{"name": name, "path": path, "start_mode": cty.StringVal("auto")}, wantSummary: "Invalid start_mode", wantAttr: "start_mode"},
		{name: "disabled but running", attrs: map[string]cty.Value{"name": name, "path": path, "start_mode": cty.StringVal("disabled")}, wantSummary: "Conflicting start_mode and state", wantAttr: "start_mode"},
		{name: "disabled but restarted", attrs: map[string]cty.Value{"name": name, "path": path, "start_mode": cty.StringVal("disabled"), "state": cty.StringVal("restarted")}, wantSummary: "Conflicting start_mode and state", wantAttr: "start_mode"},
		{name: "depends on itself", attrs: map[string]cty.Value{"name": name, "path": path, "dependencies": strs("containerd", "Kubelet")}, wantSummary: "Service depends on itself", wantAttr: "dependencies"},
		{name: "bad dependency", attrs: map[string]cty.Value{"name": name, "path": path, "dependencies": strs("a/b")}, wantSummary: "Invalid dependency", wantAttr: "dependencies"},
		{name: "null argument", attrs: map[string]cty.Value{"name": name, "path": path, "args": cty.ListVal([]cty.Value{cty.StringVal("x"), cty.NullVal(cty.String)})}, wantSummary: "Null argument", wantAttr: "args"},
		{name: "negative delay", attrs: map[string]cty.Value{"name": name, "path": path, "recovery": rec(nums(-1), cty.NullVal(cty.Number))}, wantSummary: "Invalid restart delay", wantAttr: "recovery"},
		{name: "fractional delay", attrs: map[string]cty.Value{"name": name, "path": path, "recovery": rec(cty.ListVal([]cty.Value{cty.NumberFloatVal(1.5)}), cty.NullVal(cty.Number))}, wantSummary: "Invalid restart delay", wantAttr: "recovery"},
		{name: "huge delay", attrs: map[string]cty.Value{"name": name, "path": path, "recovery": rec(nums(maxDelaySeconds+1), cty.NullVal(cty.Number))}, wantSummary: "Invalid restart delay", wantAttr: "recovery"},
		{name: "negative reset", attrs: map[string]cty.Value{"name": name, "path": path, "recovery": rec(nums(5), cty.NumberIntVal(-5))}, wantSummary: "Invalid reset_period", wantAttr: "recovery"},
		{name: "null delays", attrs: map[string]cty.Value{"name": name, "path": path, "recovery": rec(cty.NullVal(cty.List(cty.Number)), cty.NullVal(cty.Number))}, wantSummary: "Missing restart_delays", wantAttr: "recovery"},
	})
}

// TestServiceStateOnly: without path a task (a handler) restarts, stops or
// starts an existing service and leaves its configuration alone.
func TestServiceStateOnly(t *testing.T) {
	h := newHost(t)
	before := runningService(t, h, "kubelet", `C:\k\kubelet.exe`, "--v=2")
	m := Service{}
	restart := cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("kubelet"), "state": cty.StringVal("restarted")})
	pr := plan(t, m, h, restart)
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	require.NotNil(t, pr.Change)
	assert.Empty(t, fieldNames(pr.Change), "no configuration field changes")
	assert.Equal(t, []string{"kubelet"}, pr.Change.Restarts)
	ar := apply(t, m, h, restart, pr.Change)
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	after := query(t, h, "kubelet")
	assert.Equal(t, host.ServiceRunning, after.State)
	assert.NotEqual(t, before.PID, after.PID, "restarted")
	assert.Equal(t, before.Config, after.Config, "configuration untouched")

	missing := cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("nope"), "state": cty.StringVal("restarted")})
	pr = plan(t, m, h, missing)
	requireDiag(t, pr.Diagnostics, missing, hcl.DiagError, "Service not found", "name")

	// In a dry run where an earlier task creates the service, the restart
	// is planned; applying it while the service is still missing fails.
	pr = m.Plan(ctx, modules.PlanRequest{Config: missing, Host: h, Pending: true})
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	require.NotNil(t, pr.Change)
	assert.Equal(t, []string{"nope"}, pr.Change.Restarts)
	ar = apply(t, m, h, missing, pr.Change)
	requireDiag(t, ar.Diagnostics, missing, hcl.DiagError, "Service not found", "name")
}
