//go:build linux

package limits

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadDevZero: a device that never ends is refused at the bound,
// read no further than it.
func TestReadDevZero(t *testing.T) {
	_, err := ReadFile("/dev/zero")
	var tl *TooLargeError
	require.ErrorAs(t, err, &tl)
	assert.Equal(t, MaxFileSize, tl.Max)

	files := NewFiles(context.Background())
	head, err := files.Head("/dev/zero", 512)
	require.NoError(t, err)
	assert.Len(t, head, 512, "Head reads only the start")
	_, err = files.Read("/dev/zero")
	require.ErrorAs(t, err, &tl)
}

// TestFilesReadsAPipeOnce: every reader of a pipe gets its whole content,
// not the first reader alone.
func TestFilesReadsAPipeOnce(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	go func() {
		_, _ = w.Write([]byte("x = 1\n"))
		w.Close()
	}()
	path := "/proc/self/fd/" + strconv.Itoa(int(r.Fd()))
	files := NewFiles(context.Background())
	head, err := files.Head(path, 2)
	require.NoError(t, err)
	assert.Equal(t, "x ", string(head))
	for range 2 {
		b, err := files.Read(path)
		require.NoError(t, err)
		assert.Equal(t, "x = 1\n", string(b))
	}
}

// TestReadFIFOInterrupted: a FIFO nothing writes to holds the read only
// until the context ends.
func TestReadFIFOInterrupted(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := NewFiles(ctx).Read(fifo)
	require.Error(t, err)
	assert.True(t, Interrupted(err), "%v", err)
	assert.Less(t, time.Since(start), 5*time.Second)
}
