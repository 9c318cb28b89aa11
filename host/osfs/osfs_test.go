package osfs

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestTempPattern(t *testing.T) {
	tests := []struct{ base, want string }{
		{"a.txt", ".wsu-tmp-a.txt-*"},
		{strings.Repeat("a", 100), ".wsu-tmp-" + strings.Repeat("a", maxTempBase) + "-*"},
		// 63 ASCII bytes then a two-byte rune: the rune must not be split.
		{strings.Repeat("a", 63) + "é", ".wsu-tmp-" + strings.Repeat("a", 63) + "-*"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, TempPattern(tt.base))
	}
}

// ReadDir reads no more than it returns: a directory larger than the
// maximum costs one bounded listing; links are reported, not followed.
func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	require.NoError(t, os.Mkdir(big, 0o755))
	for i := range host.MaxDirEntries + 5 {
		require.NoError(t, os.WriteFile(filepath.Join(big, fmt.Sprintf("f%04d", i)), nil, 0o644))
	}
	small := filepath.Join(dir, "small")
	require.NoError(t, os.MkdirAll(filepath.Join(small, "sub"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(small, "file"), []byte("12345"), 0o640))
	require.NoError(t, os.Symlink("sub", filepath.Join(small, "link")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))

	tests := []struct {
		name      string
		path      string
		limit     int
		wantLen   int
		wantNames []string
		wantErr   error
	}{
		{name: "no limit is the maximum", path: big, wantLen: host.MaxDirEntries},
		{name: "above the maximum is the maximum", path: big, limit: host.MaxDirEntries + 1, wantLen: host.MaxDirEntries},
		{name: "limit", path: big, limit: 3, wantLen: 3},
		{name: "sorted", path: small, wantLen: 3, wantNames: []string{"file", "link", "sub"}},
		{name: "empty", path: filepath.Join(dir, "empty"), limit: 1, wantLen: 0},
		{name: "missing", path: filepath.Join(dir, "missing"), wantErr: fs.ErrNotExist},
		{name: "a file", path: filepath.Join(small, "file"), wantErr: ErrNotDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FS{}.ReadDir(context.Background(), tt.path, tt.limit)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.ErrorContains(t, err, "readdir "+tt.path)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, got, "an empty directory is an empty list")
			assert.Len(t, got, tt.wantLen)
			var names []string
			for _, e := range got {
				names = append(names, e.Name)
			}
			assert.True(t, sort.StringsAreSorted(names), "sorted: %v", names)
			if tt.wantNames != nil {
				assert.Equal(t, tt.wantNames, names)
			}
		})
	}

	got, err := FS{}.ReadDir(context.Background(), small, 0)
	require.NoError(t, err)
	byName := map[string]host.DirEntry{}
	for _, e := range got {
		byName[e.Name] = e
	}
	assert.Equal(t, host.DirEntry{Name: "file", Size: 5, Mode: 0o640, ModTime: byName["file"].ModTime}, byName["file"])
	assert.False(t, byName["file"].ModTime.IsZero())
	assert.True(t, byName["sub"].IsDir)
	assert.Equal(t, fs.ModeDir|0o700, byName["sub"].Mode)
	assert.False(t, byName["link"].IsDir, "a link is not followed")
	assert.Equal(t, fs.ModeSymlink, byName["link"].Mode.Type())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = FS{}.ReadDir(ctx, small, 0)
	assert.ErrorIs(t, err, context.Canceled)
}
