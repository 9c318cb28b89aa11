//go:build linux

package ssh

// Faults OpenSSH cannot be told to make, injected by the FAKE server in
// fake_test.go.

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestCutMidUpload(t *testing.T) {
	s := newFakeServer(t)
	dir := t.TempDir()
	cfg := s.config(t, dir, nil)
	old := []byte("#!/bin/sh\necho 'an old wsu' >&2\nexit 1\n")
	require.NoError(t, os.MkdirAll(filepath.Dir(cfg.AgentPath), 0o755))
	require.NoError(t, os.WriteFile(cfg.AgentPath, old, 0o755))

	s.cutSFTPAfter.Store(4 << 20)
	_, err := Connect(testCtx(t, time.Minute), cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deploying the agent to "+cfg.AgentPath)
	got, err := os.ReadFile(cfg.AgentPath)
	require.NoError(t, err)
	assert.Equal(t, old, got, "the cut upload left the old file in place")

	// The next run converges.
	s.cutSFTPAfter.Store(0)
	h, err := Connect(testCtx(t, time.Minute), cfg)
	require.NoError(t, err)
	defer h.Close()
	want, _ := fileSHA256Uncached(cfg.AgentBinary)
	got2, err := fileSHA256Uncached(cfg.AgentPath)
	require.NoError(t, err)
	assert.Equal(t, want, got2)
	_, err = h.Facts(testCtx(t, time.Minute))
	require.NoError(t, err)
}

func TestStalledChannel(t *testing.T) {
	s := newFakeServer(t)
	// Keepalives keep being answered throughout; only op_timeout can tell.
	cfg := s.config(t, t.TempDir(), map[string]string{"op_timeout": "3s", "keepalive_interval": "250ms", "keepalive_count_max": "20"})
	ctx := testCtx(t, time.Minute)
	h, err := Connect(ctx, cfg)
	require.NoError(t, err)
	defer h.Close()
	_, err = h.Stat(ctx, `C:\k`)
	require.NoError(t, err)

	// The session stops answering; the connection (keepalives) does not.
	s.stall.Store(true)
	start := time.Now()
	_, err = h.Stat(ctx, `C:\k`)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 15*time.Second)
	assert.ErrorIs(t, err, host.ErrConnectionLost)
	assert.Contains(t, err.Error(), "fs.stat got no answer from the agent within op_timeout (3s)")
	assert.Contains(t, err.Error(), "raise op_timeout")
	assert.True(t, h.Lost())
	_, err = h.Facts(ctx)
	assert.ErrorIs(t, err, host.ErrConnectionLost, "later calls fail fast as lost")

	s.stall.Store(false)
	h2, err := Connect(ctx, cfg)
	require.NoError(t, err)
	defer h2.Close()
	_, err = h2.Stat(ctx, `C:\k`)
	require.NoError(t, err)
}

func TestSilentNetworkLossIsDetectedByKeepalive(t *testing.T) {
	s := newFakeServer(t)
	cfg := s.config(t, t.TempDir(), map[string]string{"keepalive_interval": "200ms", "keepalive_count_max": "2"})
	ctx := testCtx(t, time.Minute)
	h, err := Connect(ctx, cfg)
	require.NoError(t, err)
	defer h.Close()

	s.freezeAll()
	start := time.Now()
	_, err = h.Stat(ctx, `C:\k`)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "well before op_timeout")
	assert.ErrorIs(t, err, host.ErrConnectionLost)
	assert.Contains(t, err.Error(), "no reply to keepalives")
	assert.True(t, h.Lost())
}

func TestDropDuringTask(t *testing.T) {
	s := newFakeServer(t)
	cfg := s.config(t, t.TempDir(), nil)
	ctx := testCtx(t, time.Minute)
	h, err := Connect(ctx, cfg)
	require.NoError(t, err)
	defer h.Close()

	errc := make(chan error, 1)
	go func() {
		_, err := h.Run(ctx, host.RunRequest{Argv: []string{"sh", "-c", "sleep 30"}})
		errc <- err
	}()
	time.Sleep(time.Second) // the task is running
	s.dropAll()
	select {
	case err = <-errc:
	case <-time.After(20 * time.Second):
		t.Fatal("the task did not notice the dropped connection")
	}
	require.Error(t, err)
	assert.ErrorIs(t, err, host.ErrConnectionLost)
	assert.True(t, h.Lost())
	_, err = h.Stat(ctx, `C:\k`)
	assert.ErrorIs(t, err, host.ErrConnectionLost)
	require.NoError(t, h.Close())

	h2, err := Connect(ctx, cfg)
	require.NoError(t, err)
	defer h2.Close()
	res, err := h2.Run(ctx, host.RunRequest{Argv: []string{"sh", "-c", "echo again"}})
	require.NoError(t, err)
	assert.Equal(t, "again\n", string(res.Stdout))
}
