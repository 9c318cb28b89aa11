package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

//go:noinline
func allocateForPeakHeapTest() [][]byte {
	out := make([][]byte, 64)
	for i := range out {
		out[i] = make([]byte, 1<<20)
	}
	return out
}

// The --memprofile sampler writes a whole heap profile that names what
// made the heap largest, even when the peak comes after its last tick.
func TestPeakHeapProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	p := startPeakHeap(path, time.Hour) // one tick at the start, then only Stop's look
	big := allocateForPeakHeapTest()
	runtime.GC() // the profile's in-use figures are as of the last GC
	require.NoError(t, p.Stop())
	runtime.KeepAlive(big)

	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	require.NoError(t, err, "a pprof profile is gzipped protobuf")
	body, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Contains(t, string(body), "allocateForPeakHeapTest", "the profile names the allocation behind the peak")
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".memprofile-*"))
	assert.Empty(t, left, "no temporary file is left")
}

// The hidden flag works on any command.
func TestMemProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.pprof")
	code, _, errs := wsu(t, nil, "--memprofile", path, "validate", "wsu:join")
	require.Equal(t, 0, code, errs)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.NotZero(t, info.Size())
}
