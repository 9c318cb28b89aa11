// Package osfstest holds the helpers the file-operation tests of the hosts
// built on osfs share: readers that fail or cancel midway, and a directory
// listing to check that no temp file is left.
package osfstest

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host/osfs"
)

// FailingReader yields N bytes and then Err, like a cut stream.
type FailingReader struct {
	N   int
	Err error
}

func (r *FailingReader) Read(p []byte) (int, error) {
	if r.N == 0 {
		return 0, r.Err
	}
	k := min(len(p), r.N)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.N -= k
	return k, nil
}

// CancellingReader reads R and calls Cancel once it has yielded more than
// one chunk, so the copy loop sees the cancel between chunks.
type CancellingReader struct {
	R      io.Reader
	Cancel context.CancelFunc
	read   int
}

func (c *CancellingReader) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	if c.read += n; c.read > osfs.ChunkSize {
		c.Cancel()
	}
	return n, err
}

// Entries lists the names in dir.
func Entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}
