package sim

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestServiceLifecycle(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\kubelet.exe`, "MZ simulated")
	cfg := host.ServiceConfig{
		Name: "kubelet", Description: "Managed by wsu", BinaryPath: `C:\k\kubelet.exe`,
		Args: []string{"--config=C:\\k\\kubelet.conf"}, StartType: host.StartAutomatic,
	}

	info, err := h.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	assert.Equal(t, host.ServiceInfo{}, info, "missing is Exists=false")

	require.NoError(t, h.CreateService(ctx, cfg))
	assert.ErrorIs(t, h.CreateService(ctx, cfg), ErrServiceExists)
	assert.ErrorIs(t, h.CreateService(ctx, host.ServiceConfig{Name: "KUBELET", BinaryPath: `C:\x`}), ErrServiceExists, "names ignore case")

	info, err = h.QueryService(ctx, "Kubelet")
	require.NoError(t, err)
	want := cfg
	want.DisplayName = "kubelet"
	assert.Equal(t, host.ServiceInfo{Exists: true, State: host.ServiceStopped, Config: want}, info)

	upd := cfg
	upd.Name, upd.DisplayName, upd.Args = "KUBELET", "Kubelet", []string{"--v=4"}
	require.NoError(t, h.UpdateService(ctx, upd))
	info, err = h.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	upd.Name = "kubelet"
	assert.Equal(t, upd, info.Config, "updated, keeping the created name")

	rec := host.ServiceRecovery{RestartDelays: []time.Duration{time.Second, 5 * time.Second}, ResetPeriod: time.Hour}
	require.NoError(t, h.SetServiceRecovery(ctx, "kubelet", rec))
	got, err := h.ServiceRecovery("kubelet")
	require.NoError(t, err)
	assert.Equal(t, &rec, got)

	require.NoError(t, h.StartService(ctx, "kubelet"))
	assert.ErrorIs(t, h.StartService(ctx, "kubelet"), ErrServiceAlreadyRunning)
	info, err = h.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	assert.Equal(t, host.ServiceRunning, info.State)
	assert.GreaterOrEqual(t, info.PID, firstSyntheticPID, "simulated: a synthetic pid")
	require.NoError(t, h.WaitService(ctx, "kubelet", host.ServiceRunning, time.Second))
	procs, err := h.ListProcesses(ctx)
	require.NoError(t, err)
	assert.Equal(t, []host.Process{{PID: info.PID, Image: "kubelet.exe"}}, procs)

	require.NoError(t, h.StopService(ctx, "kubelet", time.Second))
	require.NoError(t, h.StopService(ctx, "kubelet", time.Second), "stopping a stopped service does nothing")
	require.NoError(t, h.WaitService(ctx, "kubelet", host.ServiceStopped, time.Second))
	procs, err = h.ListProcesses(ctx)
	require.NoError(t, err)
	assert.Empty(t, procs)

	require.NoError(t, h.StartService(ctx, "kubelet"))
	require.NoError(t, h.DeleteService(ctx, "kubelet", time.Second), "a running service is stopped first")
	info, err = h.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	assert.False(t, info.Exists)
	procs, err = h.ListProcesses(ctx)
	require.NoError(t, err)
	assert.Empty(t, procs)
}

func TestServiceErrors(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\x.exe`, "x")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "nobin", BinaryPath: `C:\k\missing.exe`}))
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "off", BinaryPath: `C:\k\x.exe`, StartType: host.StartDisabled}))
	tests := []struct {
		name    string
		op      func() error
		is      error
		wantErr string
	}{
		{"create without name", func() error { return h.CreateService(ctx, host.ServiceConfig{BinaryPath: `C:\x`}) }, nil, "invalid service name"},
		{"create with relative binary", func() error { return h.CreateService(ctx, host.ServiceConfig{Name: "a", BinaryPath: `x.exe`}) }, nil, "not an absolute"},
		{"create with bad start type", func() error {
			return h.CreateService(ctx, host.ServiceConfig{Name: "a", BinaryPath: `C:\x`, StartType: "sometimes"})
		}, nil, "unknown start type"},
		{"update missing", func() error { return h.UpdateService(ctx, host.ServiceConfig{Name: "nope", BinaryPath: `C:\x`}) }, ErrServiceNotFound, ""},
		{"recovery of missing", func() error { return h.SetServiceRecovery(ctx, "nope", host.ServiceRecovery{}) }, ErrServiceNotFound, ""},
		{"start missing", func() error { return h.StartService(ctx, "nope") }, ErrServiceNotFound, ""},
		{"start without binary", func() error { return h.StartService(ctx, "nobin") }, fs.ErrNotExist, "ERROR_FILE_NOT_FOUND"},
		{"start disabled", func() error { return h.StartService(ctx, "off") }, ErrServiceDisabled, ""},
		{"stop missing", func() error { return h.StopService(ctx, "nope", time.Second) }, ErrServiceNotFound, ""},
		{"delete missing", func() error { return h.DeleteService(ctx, "nope", time.Second) }, ErrServiceNotFound, ""},
		{"wait for missing", func() error { return h.WaitService(ctx, "nope", host.ServiceRunning, time.Second) }, ErrServiceNotFound, ""},
		{"wait times out", func() error { return h.WaitService(ctx, "off", host.ServiceRunning, 100*time.Millisecond) }, nil, "timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			require.Error(t, err)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
}

func TestServiceDependencies(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\bin.exe`, "simulated")
	for _, s := range []host.ServiceConfig{
		{Name: "containerd"},
		{Name: "kubelet", Dependencies: []string{"Containerd"}},
		{Name: "hybrid-overlay-node", Dependencies: []string{"kubelet"}},
		{Name: "kube-proxy", Dependencies: []string{"hybrid-overlay-node", "+NetworkProvider"}},
		{Name: "orphan", Dependencies: []string{"gone"}},
		{Name: "loop-a", Dependencies: []string{"loop-b"}},
		{Name: "loop-b", Dependencies: []string{"loop-a"}},
	} {
		s.BinaryPath = `C:\k\bin.exe`
		require.NoError(t, h.CreateService(ctx, s))
	}
	state := func(name string) host.ServiceState {
		info, err := h.QueryService(ctx, name)
		require.NoError(t, err)
		return info.State
	}

	require.NoError(t, h.StartService(ctx, "kube-proxy"), "starts the chain, ignoring the group")
	for _, s := range []string{"containerd", "kubelet", "hybrid-overlay-node", "kube-proxy"} {
		assert.Equal(t, host.ServiceRunning, state(s), s)
	}

	err := h.StopService(ctx, "kubelet", time.Second)
	assert.ErrorIs(t, err, ErrDependentServicesRunning)
	assert.ErrorContains(t, err, "hybrid-overlay-node")
	assert.ErrorIs(t, h.DeleteService(ctx, "containerd", time.Second), ErrDependentServicesRunning)
	assert.Equal(t, host.ServiceRunning, state("kubelet"))

	// The dependents, in the order to stop them, with their states; the
	// group is not a service, and "broken" is created below.
	deps, err := h.DependentServices(ctx, "CONTAINERD")
	require.NoError(t, err)
	assert.Equal(t, []host.ServiceStatus{
		{Name: "kube-proxy", State: host.ServiceRunning},
		{Name: "hybrid-overlay-node", State: host.ServiceRunning},
		{Name: "kubelet", State: host.ServiceRunning},
	}, deps)
	deps, err = h.DependentServices(ctx, "kube-proxy")
	require.NoError(t, err)
	assert.Empty(t, deps)
	_, err = h.DependentServices(ctx, "missing")
	assert.ErrorIs(t, err, ErrServiceNotFound)

	for _, s := range []string{"kube-proxy", "hybrid-overlay-node", "kubelet", "containerd"} {
		require.NoError(t, h.StopService(ctx, s, time.Second), "the removal order works")
	}
	deps, err = h.DependentServices(ctx, "containerd")
	require.NoError(t, err)
	assert.Equal(t, host.ServiceStopped, deps[0].State, "stopped dependents are listed too")

	assert.ErrorIs(t, h.StartService(ctx, "orphan"), ErrDependencyMissing)
	assert.Equal(t, host.ServiceStopped, state("orphan"))
	assert.ErrorIs(t, h.StartService(ctx, "loop-a"), ErrCircularDependency)

	// A dependency that started stays started when the dependent fails.
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "broken", BinaryPath: `C:\k\missing.exe`, Dependencies: []string{"containerd"}}))
	assert.ErrorIs(t, h.StartService(ctx, "broken"), fs.ErrNotExist)
	assert.Equal(t, host.ServiceRunning, state("containerd"))
}

// TestServiceRealProcess: a Linux-executable binary really runs, detached,
// with its output in root/logs, and a process that dies shows as stopped.
func TestServiceRealProcess(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\svc.exe`, "#!/bin/sh\necho \"started $* as $"+EnvService+"\"\nexec sleep 30\n")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "svc", BinaryPath: `C:\k\svc.exe`, Args: []string{"--flag"}}))
	require.NoError(t, h.StartService(ctx, "svc"))
	info, err := h.QueryService(ctx, "svc")
	require.NoError(t, err)
	require.Equal(t, host.ServiceRunning, info.State)
	require.Less(t, info.PID, firstSyntheticPID, "a real pid")
	assert.False(t, gone(info.PID))
	procs, err := h.ListProcesses(ctx)
	require.NoError(t, err)
	assert.Equal(t, []host.Process{{PID: info.PID, Image: "svc.exe"}}, procs)

	log := filepath.Join(h.Root(), "logs", "svc.log")
	assert.Eventually(t, func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "started --flag as svc")
	}, 5*time.Second, 10*time.Millisecond)

	// The process dies behind the SCM's back.
	n, err := h.Kill(ctx, 0, "SVC.EXE")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.True(t, gone(info.PID))
	require.NoError(t, h.WaitService(ctx, "svc", host.ServiceStopped, 5*time.Second))

	// Delete waits for the process to exit.
	require.NoError(t, h.StartService(ctx, "svc"))
	info, err = h.QueryService(ctx, "svc")
	require.NoError(t, err)
	require.NoError(t, h.DeleteService(ctx, "svc", 10*time.Second))
	assert.True(t, gone(info.PID))
}

// TestServiceStopEscalates: a service ignoring the stop request is killed
// once its grace period is over.
func TestServiceStopEscalates(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\stubborn.exe`, "#!/bin/sh\ntrap '' TERM\ntouch \"$"+EnvRoot+"/ready\"\nwhile :; do sleep 0.05; done\n")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "stubborn", BinaryPath: `C:\k\stubborn.exe`}))
	require.NoError(t, h.StartService(ctx, "stubborn"))
	info, err := h.QueryService(ctx, "stubborn")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(h.Root(), "ready"))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "the TERM trap is set")
	start := time.Now()
	require.NoError(t, h.StopService(ctx, "stubborn", time.Second))
	assert.True(t, gone(info.PID))
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 400*time.Millisecond, "SIGTERM was ignored for the grace period")
	assert.Less(t, took, 2*time.Second, "then killed")
}

// TestDeleteServiceRemovesItsKey: as on Windows, deleting a service removes
// HKLM\SYSTEM\CurrentControlSet\Services\<name> with everything under it;
// the Services key itself stays.
func TestDeleteServiceRemovesItsKey(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\kubelet.exe`, "MZ simulated")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\kubelet.exe`}))
	key := `HKLM\SYSTEM\CurrentControlSet\Services\kubelet`
	v := host.RegistryValue{Type: host.RegBinary, Binary: []byte{1}}
	require.NoError(t, h.RegistrySet(ctx, key, "WsuFailureActions", v))
	require.NoError(t, h.RegistrySet(ctx, key+`\Parameters`, "X", host.RegistryValue{Type: host.RegSZ, String: "y"}))
	require.NoError(t, h.RegistrySet(ctx, `HKLM\SYSTEM\CurrentControlSet\Services\kubelet2`, "Keep", v))

	require.NoError(t, h.DeleteService(ctx, "kubelet", time.Second))
	got, err := h.RegistryGet(ctx, key, "WsuFailureActions")
	require.NoError(t, err)
	assert.False(t, got.Exists, "the service's key went with it")
	got, err = h.RegistryGet(ctx, key+`\Parameters`, "X")
	require.NoError(t, err)
	assert.False(t, got.Exists, "and its subkeys")
	got, err = h.RegistryGet(ctx, `HKLM\SYSTEM\CurrentControlSet\Services\kubelet2`, "Keep")
	require.NoError(t, err)
	assert.True(t, got.Exists, "a key that only shares the prefix stays")
}
