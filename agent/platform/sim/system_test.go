package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The machine-level settings tests give the simulation: a clock off the
// real one, a capped disk, another build; each persists for a second
// agent on the same root.
func TestSystem(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	h, err := New(root, Options{})
	require.NoError(t, err)

	before := time.Now()
	now, err := h.SystemTime(ctx)
	require.NoError(t, err)
	assert.False(t, now.Before(before), "an unset offset is the real clock")

	ds, err := h.DiskFree(ctx, `C:\k\not\there\yet`)
	require.NoError(t, err, "a missing path is answered for its volume")
	assert.NotZero(t, ds.Total)
	assert.LessOrEqual(t, ds.Free, ds.Total)

	require.NoError(t, h.SetClockOffset(-90*time.Second))
	require.NoError(t, h.SetDiskFree(1<<20))
	require.NoError(t, h.SetBuild("14393"))

	again, err := New(root, Options{})
	require.NoError(t, err)
	now, err = again.SystemTime(ctx)
	require.NoError(t, err)
	assert.True(t, now.Before(time.Now().Add(-80*time.Second)), "the clock is 90s behind: %s", now)
	ds, err = again.DiskFree(ctx, `C:\`)
	require.NoError(t, err)
	assert.Equal(t, uint64(1<<20), ds.Free)
	f, err := again.Facts(ctx)
	require.NoError(t, err)
	assert.Equal(t, "14393", f.Build)

	_, err = h.DiskFree(ctx, `relative\path`)
	assert.Error(t, err, "a path that is not absolute")
}
