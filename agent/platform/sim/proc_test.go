package sim

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestProcesses(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\containerd.exe`, "simulated")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "containerd", BinaryPath: `C:\k\containerd.exe`}))
	require.NoError(t, h.StartService(ctx, "containerd"))
	svc, err := h.QueryService(ctx, "containerd")
	require.NoError(t, err)

	shim1, err := h.AddProcess(host.Process{Image: "containerd-shim-runhcs-v1.exe"})
	require.NoError(t, err)
	shim2, err := h.AddProcess(host.Process{Image: "containerd-shim-runhcs-v1.exe"})
	require.NoError(t, err)
	assert.NotEqual(t, shim1.PID, shim2.PID)
	_, err = h.AddProcess(host.Process{})
	assert.Error(t, err)

	// A real process recorded by a harness.
	cmd := exec.Command("sleep", "30")
	require.NoError(t, cmd.Start())
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	t.Cleanup(func() { cmd.Process.Kill() })
	real, err := h.AddProcess(host.Process{PID: cmd.Process.Pid, Image: "pause.exe"})
	require.NoError(t, err)
	_, err = h.AddProcess(host.Process{PID: cmd.Process.Pid, Image: "pause.exe"})
	assert.ErrorContains(t, err, "already recorded")
	_, err = h.AddProcess(host.Process{PID: 1 << 30, Image: "x.exe"})
	assert.ErrorContains(t, err, "not a running process")

	procs, err := h.ListProcesses(ctx)
	require.NoError(t, err)
	assert.Equal(t, []host.Process{
		real, {PID: svc.PID, Image: "containerd.exe"}, shim1, shim2,
	}, procs)

	tests := []struct {
		name  string
		pid   int
		image string
		want  int
		left  []host.Process
	}{
		{"by image, any case", 0, "CONTAINERD-SHIM-RUNHCS-V1.EXE", 2, []host.Process{real, {PID: svc.PID, Image: "containerd.exe"}}},
		{"nothing matches", 0, "nope.exe", 0, []host.Process{real, {PID: svc.PID, Image: "containerd.exe"}}},
		{"missing pid", 12345678, "", 0, []host.Process{real, {PID: svc.PID, Image: "containerd.exe"}}},
		{"a real process by pid", real.PID, "", 1, []host.Process{{PID: svc.PID, Image: "containerd.exe"}}},
		{"a service's process", svc.PID, "", 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := h.Kill(ctx, tt.pid, tt.image)
			require.NoError(t, err)
			assert.Equal(t, tt.want, n)
			procs, err := h.ListProcesses(ctx)
			require.NoError(t, err)
			assert.Equal(t, tt.left, procs)
		})
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the real process was not killed")
	}
	info, err := h.QueryService(ctx, "containerd")
	require.NoError(t, err)
	assert.Equal(t, host.ServiceStopped, info.State, "killing its process stops the service")

	_, err = h.Kill(ctx, 0, "")
	assert.Error(t, err)
}
