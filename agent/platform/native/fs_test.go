package native

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wsu-project/wsu/host/osfs"
	"github.com/wsu-project/wsu/host/osfs/osfstest"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestWriteFile(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*osfs.ChunkSize/16) // three chunks
	errCut := errors.New("stream cut")
	tests := []struct {
		name     string
		old      []byte // nil: no existing file
		content  func(cancel context.CancelFunc) io.Reader
		cancel   bool // cancel before the call
		mode     fs.FileMode
		wantErr  error
		wantData []byte // expected content afterwards; nil: file absent
	}{
		{name: "create", content: func(context.CancelFunc) io.Reader { return strings.NewReader("new") }, mode: 0o644, wantData: []byte("new")},
		{name: "replace", old: []byte("old"), content: func(context.CancelFunc) io.Reader { return strings.NewReader("new") }, mode: 0o600, wantData: []byte("new")},
		{name: "empty", old: []byte("old"), content: func(context.CancelFunc) io.Reader { return strings.NewReader("") }, mode: 0o644, wantData: []byte{}},
		{name: "large", content: func(context.CancelFunc) io.Reader { return bytes.NewReader(big) }, mode: 0o640, wantData: big},
		{name: "reader fails midway keeps old", old: []byte("old"), content: func(context.CancelFunc) io.Reader {
			return &osfstest.FailingReader{N: osfs.ChunkSize + 10, Err: errCut}
		}, mode: 0o644, wantErr: errCut, wantData: []byte("old")},
		{name: "reader fails on create leaves nothing", content: func(context.CancelFunc) io.Reader { return &osfstest.FailingReader{N: 5, Err: errCut} }, mode: 0o644, wantErr: errCut},
		{name: "cancelled before", old: []byte("old"), content: func(context.CancelFunc) io.Reader { return strings.NewReader("new") }, cancel: true, mode: 0o644, wantErr: context.Canceled, wantData: []byte("old")},
		{name: "cancelled midway keeps old", old: []byte("old"), content: func(c context.CancelFunc) io.Reader {
			return &osfstest.CancellingReader{R: bytes.NewReader(big), Cancel: c}
		}, mode: 0o644, wantErr: context.Canceled, wantData: []byte("old")},
	}
	h := New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "target.txt")
			if tt.old != nil {
				require.NoError(t, os.WriteFile(path, tt.old, 0o644))
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			err := h.WriteFile(ctx, path, tt.content(cancel), tt.mode)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}

			// Only the target may be left in the directory, never a temp file.
			if tt.wantData == nil {
				assert.Empty(t, osfstest.Entries(t, dir))
				return
			}
			assert.Equal(t, []string{"target.txt"}, osfstest.Entries(t, dir))
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(tt.wantData, got), "content differs")
			if tt.wantErr == nil && runtime.GOOS != "windows" {
				fi, err := os.Stat(path)
				require.NoError(t, err)
				assert.Equal(t, tt.mode, fi.Mode().Perm())
			}
		})
	}
}

func TestWriteFileMissingDirectory(t *testing.T) {
	dir := t.TempDir()
	err := New().WriteFile(context.Background(), filepath.Join(dir, "nope", "f"), strings.NewReader("x"), 0o644)
	require.Error(t, err)
	assert.Empty(t, osfstest.Entries(t, dir))
}

func TestSHA256(t *testing.T) {
	big := bytes.Repeat([]byte{0xab}, 2*osfs.ChunkSize+7)
	tests := []struct {
		name    string
		content []byte
		dir     bool
		missing bool
	}{
		{name: "empty", content: []byte{}},
		{name: "small", content: []byte("hello\n")},
		{name: "multi chunk", content: big},
		{name: "missing", missing: true},
		{name: "directory", dir: true},
	}
	h := New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			switch {
			case tt.dir:
				require.NoError(t, os.Mkdir(path, 0o755))
			case !tt.missing:
				require.NoError(t, os.WriteFile(path, tt.content, 0o644))
			}
			got, err := h.SHA256(context.Background(), path)
			if tt.dir || tt.missing {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, sha(tt.content), got)
		})
	}
}

func TestStat(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, []byte("12345"), 0o640))
	tests := []struct {
		name          string
		path          string
		exists, isDir bool
		size          int64
		checkPerm     bool
		perm          fs.FileMode
	}{
		{name: "missing", path: filepath.Join(dir, "nope")},
		{name: "file", path: file, exists: true, size: 5, checkPerm: true, perm: 0o640},
		{name: "directory", path: dir, exists: true, isDir: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fi, err := New().Stat(context.Background(), tt.path)
			require.NoError(t, err)
			assert.Equal(t, tt.path, fi.Path)
			assert.Equal(t, tt.exists, fi.Exists)
			assert.Equal(t, tt.isDir, fi.IsDir)
			if !tt.isDir {
				assert.Equal(t, tt.size, fi.Size)
			}
			if tt.checkPerm && runtime.GOOS != "windows" {
				assert.Equal(t, tt.perm, fi.Mode.Perm())
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, []byte("0123456789"), 0o644))
	tests := []struct {
		name    string
		path    string
		limit   int64
		want    string
		wantErr string
	}{
		{name: "under limit", path: file, limit: 100, want: "0123456789"},
		{name: "exactly limit", path: file, limit: 10, want: "0123456789"},
		{name: "over limit", path: file, limit: 9, wantErr: "limit of 9 bytes"},
		{name: "no limit", path: file, limit: 0, want: "0123456789"},
		{name: "missing", path: filepath.Join(dir, "nope"), limit: 10, wantErr: "no such file"},
		{name: "directory", path: dir, limit: 10, wantErr: "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New().ReadFile(context.Background(), tt.path, tt.limit)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(t *testing.T, path string)
		recursive bool
		wantErr   bool
		wantGone  bool
	}{
		{name: "missing", setup: func(*testing.T, string) {}, wantGone: true},
		{name: "missing recursive", setup: func(*testing.T, string) {}, recursive: true, wantGone: true},
		{name: "file", setup: func(t *testing.T, p string) { require.NoError(t, os.WriteFile(p, nil, 0o644)) }, wantGone: true},
		{name: "empty dir", setup: func(t *testing.T, p string) { require.NoError(t, os.Mkdir(p, 0o755)) }, wantGone: true},
		{name: "full dir not recursive", setup: mkTree, wantErr: true},
		{name: "full dir recursive", setup: mkTree, recursive: true, wantGone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "victim")
			tt.setup(t, path)
			err := New().Remove(context.Background(), path, tt.recursive)
			if tt.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			_, statErr := os.Stat(path)
			assert.Equal(t, tt.wantGone, errors.Is(statErr, fs.ErrNotExist))
		})
	}
}

func mkTree(t *testing.T, p string) {
	require.NoError(t, os.MkdirAll(filepath.Join(p, "a", "b"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(p, "a", "b", "f"), []byte("x"), 0o644))
}

func TestMkdirAllAndChmod(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("permission bits are not meaningful on Windows")
	}
	h, ctx := New(), context.Background()
	path := filepath.Join(t.TempDir(), "a", "b", "c")
	require.NoError(t, h.MkdirAll(ctx, path, 0o755))
	require.NoError(t, h.MkdirAll(ctx, path, 0o755), "existing directory is fine")
	require.NoError(t, h.Chmod(ctx, path, 0o700))
	fi, err := h.Stat(ctx, path)
	require.NoError(t, err)
	assert.True(t, fi.IsDir)
	assert.Equal(t, fs.FileMode(0o700), fi.Mode.Perm())

	file := filepath.Join(path, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.Error(t, h.MkdirAll(ctx, file, 0o755), "a file is in the way")
	require.Error(t, h.Chmod(ctx, filepath.Join(path, "nope"), 0o644))
}
