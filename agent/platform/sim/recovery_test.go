package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

// The query reports failure actions once some are set, as Windows' does.
func TestQueryServiceReportsRecovery(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\kubelet.exe`, "MZ simulated")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\kubelet.exe`}))
	info, err := h.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	assert.Nil(t, info.Recovery, "none set")

	rec := host.ServiceRecovery{RestartDelays: []time.Duration{time.Second, 5 * time.Second}, ResetPeriod: time.Hour}
	require.NoError(t, h.SetServiceRecovery(ctx, "kubelet", rec))
	info, err = h.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	assert.Equal(t, &host.ObservedRecovery{ServiceRecovery: rec}, info.Recovery)

	require.NoError(t, h.SetServiceRecovery(ctx, "kubelet", host.ServiceRecovery{}))
	info, err = h.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	assert.Nil(t, info.Recovery, "cleared")
}
