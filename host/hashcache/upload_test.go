package hashcache

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/transport/local"
)

// uploading is a host with an Uploader of its own, counting its uses.
type uploading struct {
	host.Host
	uploads int
}

func (u *uploading) Upload(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	u.uploads++
	return u.Host.WriteFile(ctx, path, content, mode)
}

// TestUploadPassesThrough: the cache hands Upload to the wrapped host's
// Uploader (not its WriteFile) and forgets the old sum.
func TestUploadPassesThrough(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "kubelet.exe")
	writeOld(t, p, []byte("kubelet v1"), old)
	inner := &uploading{Host: local.New()}
	h := Wrap(inner, filepath.Join(dir, "cache.json"))
	_, ok := h.(host.Uploader)
	require.True(t, ok, "the cache offers Upload")

	got, err := h.SHA256(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("kubelet v1")), got)
	require.NoError(t, host.Upload(ctx, h, p, bytes.NewReader([]byte("kubelet v2")), 0o644))
	assert.Equal(t, 1, inner.uploads)
	require.NoError(t, os.Chtimes(p, old, old)) // size and mtime as cached
	got, err = h.SHA256(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("kubelet v2")), got)
}
