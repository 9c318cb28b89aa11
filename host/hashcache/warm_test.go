package hashcache

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/transport/local"
)

// With Warm, a file written through the wrapper is hashed in the
// background once the racy window has passed; the next SHA256 (another
// run's, through the cache file) reads nothing.
func TestWarm(t *testing.T) {
	racy := withRacyWindow(50 * time.Millisecond)
	ctx := context.Background()
	dir := t.TempDir()
	p, cacheFile := filepath.Join(dir, "kubelet.exe"), filepath.Join(dir, "cache.json")

	h := Wrap(local.New(), cacheFile, Warm(), racy)
	require.NoError(t, h.WriteFile(ctx, p, bytes.NewReader([]byte("kubelet v2")), 0o755))
	// Until the warming hash, another run would hash the file itself
	// (without saving: the file is too new).
	assert.Eventually(t, func() bool {
		next := &counting{Host: local.New()}
		got, err := Wrap(next, cacheFile, racy).SHA256(ctx, p)
		return err == nil && got == sum([]byte("kubelet v2")) && next.n.Load() == 0
	}, 5*time.Second, 20*time.Millisecond, "served from the warmed cache")
	require.NoError(t, h.Close())
}

// Close stops a pending warming hash: nothing is hashed or saved after it.
func TestWarmStopsOnClose(t *testing.T) {
	const window = 200 * time.Millisecond
	ctx := context.Background()
	dir := t.TempDir()
	p, cacheFile := filepath.Join(dir, "kubelet.exe"), filepath.Join(dir, "cache.json")
	inner := &counting{Host: local.New()}
	h := Wrap(inner, cacheFile, Warm(), withRacyWindow(window))
	require.NoError(t, h.WriteFile(ctx, p, bytes.NewReader([]byte("kubelet")), 0o755))
	require.NoError(t, h.Close())
	time.Sleep(2 * (window + warmMargin))
	assert.Zero(t, inner.n.Load())
	_, err := os.Stat(cacheFile)
	assert.True(t, os.IsNotExist(err), "no cache file written")
}

// withRacyWindow shortens a cache's racy window (tests).
func withRacyWindow(d time.Duration) Option { return func(c *cache) { c.racy = d } }
