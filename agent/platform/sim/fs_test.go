package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
	"github.com/wsu-project/wsu/host/osfs/osfstest"
)

func TestWriteFile(t *testing.T) {
	errCut := errors.New("stream cut")
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*osfs.ChunkSize/16)
	tests := []struct {
		name     string
		path     string
		old      string // "" : no existing file
		readOnly bool   // the existing file is read-only
		content  func(cancel context.CancelFunc) io.Reader
		want     string // content after the call
		wantErr  error
	}{
		{name: "new file", path: `C:\k\a.conf`, content: func(context.CancelFunc) io.Reader { return strings.NewReader("new") }, want: "new"},
		{name: "replace", path: `C:\k\a.conf`, old: "old", content: func(context.CancelFunc) io.Reader { return strings.NewReader("new") }, want: "new"},
		{name: "other case and slashes", path: `c:/K/A.conf`, old: "old", content: func(context.CancelFunc) io.Reader { return strings.NewReader("new") }, want: "new"},
		{name: "failing reader", path: `C:\k\a.conf`, old: "old", content: func(context.CancelFunc) io.Reader { return &osfstest.FailingReader{N: 10, Err: errCut} }, want: "old", wantErr: errCut},
		{name: "cancelled", path: `C:\k\a.conf`, old: "old", content: func(cancel context.CancelFunc) io.Reader {
			return &osfstest.CancellingReader{R: bytes.NewReader(big), Cancel: cancel}
		}, want: "old", wantErr: context.Canceled},
		{name: "read-only target", path: `C:\k\a.conf`, old: "old", readOnly: true, content: func(context.CancelFunc) io.Reader { return strings.NewReader("new") }, want: "old", wantErr: ErrAccessDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			require.NoError(t, h.MkdirAll(ctx, `C:\k`, 0o755))
			if tt.old != "" {
				writeFile(t, h, `C:\k\a.conf`, tt.old)
				if tt.readOnly {
					require.NoError(t, h.Chmod(ctx, `C:\k\a.conf`, 0o444))
				}
			}
			err := h.WriteFile(ctx, tt.path, tt.content(cancel), 0o644)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			got, err := os.ReadFile(filepath.Join(h.Root(), "fs", "C", "k", "a.conf"))
			if tt.want == "" {
				assert.ErrorIs(t, err, fs.ErrNotExist)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.want, string(got))
			}
			assert.Equal(t, []string{"a.conf"}, osfstest.Entries(t, filepath.Join(h.Root(), "fs", "C", "k")), "no temp file left")
		})
	}
}

func TestWriteFileRejects(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	require.NoError(t, h.MkdirAll(ctx, `C:\k\dir`, 0o755))
	tests := []struct {
		name, path, wantErr string
		is                  error
	}{
		{"drive root", `C:\`, "names a directory", nil},
		{"directory", `C:\k\dir`, "", ErrAccessDenied},
		{"missing parent", `C:\nope\x`, "", fs.ErrNotExist},
		{"relative", `k\x`, "not an absolute", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.WriteFile(ctx, tt.path, strings.NewReader("x"), 0o644)
			require.Error(t, err)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
			}
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
			assert.NotContains(t, err.Error(), h.Root(), "errors name the Windows path")
		})
	}
}

func TestStat(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\kubelet.exe`, "12345")
	require.NoError(t, h.WriteFile(ctx, `C:\k\ro.txt`, strings.NewReader("r"), 0o444))
	tests := []struct {
		path string
		want host.FileInfo // ModTime not compared
	}{
		{`C:\k\kubelet.exe`, host.FileInfo{Path: `C:\k\kubelet.exe`, Exists: true, Size: 5, Mode: 0o666}},
		{`c:/K/KUBELET.EXE`, host.FileInfo{Path: `c:/K/KUBELET.EXE`, Exists: true, Size: 5, Mode: 0o666}},
		{`C:\k\ro.txt`, host.FileInfo{Path: `C:\k\ro.txt`, Exists: true, Size: 1, Mode: 0o444}},
		{`C:\k`, host.FileInfo{Path: `C:\k`, Exists: true, IsDir: true, Mode: fs.ModeDir | 0o777}},
		{`C:\`, host.FileInfo{Path: `C:\`, Exists: true, IsDir: true, Mode: fs.ModeDir | 0o777}},
		{`C:\k\missing`, host.FileInfo{Path: `C:\k\missing`}},
		{`C:\k\kubelet.exe\below`, host.FileInfo{Path: `C:\k\kubelet.exe\below`}},
		{`D:\x`, host.FileInfo{Path: `D:\x`}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, err := h.Stat(ctx, tt.path)
			require.NoError(t, err)
			if got.Exists {
				assert.WithinDuration(t, time.Now(), got.ModTime, time.Minute)
			}
			got.ModTime = time.Time{}
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := h.Stat(ctx, `relative\x`)
	assert.Error(t, err)
}

// ReadDir lists as Windows does: the path matches in any case, names keep
// the case they were created with, modes and directory sizes are Windows'.
func TestReadDir(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\var\log\Kubelet\kubelet.log`, "12345")
	require.NoError(t, h.WriteFile(ctx, `C:\var\log\ro.txt`, strings.NewReader("r"), 0o444))
	require.NoError(t, h.MkdirAll(ctx, `C:\var\lib`, 0o755))
	logDir := []host.DirEntry{
		{Name: "Kubelet", IsDir: true, Mode: fs.ModeDir | 0o777},
		{Name: "ro.txt", Size: 1, Mode: 0o444},
	}
	tests := []struct {
		name    string
		path    string
		limit   int
		want    []host.DirEntry // ModTime not compared
		wantOf  []host.DirEntry // with a limit: the entries may be any of these
		wantErr error           // a sentinel the error wraps
	}{
		{name: "entries sorted", path: `C:\var\log`, want: logDir},
		{name: "other case and slashes", path: `c:/VAR/LOG/kubelet`, want: []host.DirEntry{{Name: "kubelet.log", Size: 5, Mode: 0o666}}},
		{name: "limit", path: `C:\var\log`, limit: 1, wantOf: logDir},
		{name: "empty", path: `C:\var\lib`, limit: 1, want: []host.DirEntry{}},
		{name: "missing", path: `C:\var\missing`, wantErr: fs.ErrNotExist},
		{name: "through a file", path: `C:\var\log\ro.txt\below`, wantErr: fs.ErrNotExist},
		{name: "missing drive", path: `D:\x`, wantErr: fs.ErrNotExist},
		{name: "a file", path: `C:\var\log\ro.txt`, wantErr: osfs.ErrNotDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.ReadDir(ctx, tt.path, tt.limit)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.ErrorContains(t, err, tt.path, "the error names the Windows path")
				return
			}
			require.NoError(t, err)
			for i := range got {
				assert.WithinDuration(t, time.Now(), got[i].ModTime, time.Minute)
				got[i].ModTime = time.Time{}
			}
			if tt.wantOf != nil {
				require.Len(t, got, tt.limit)
				assert.Contains(t, tt.wantOf, got[0])
				return
			}
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := h.ReadDir(ctx, `var\log`, 0)
	assert.ErrorContains(t, err, "not an absolute Windows path")
}

func TestReadFileAndSHA256(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\kubelet.conf`, "kind: KubeletConfiguration\n")
	sum := sha256.Sum256([]byte("kind: KubeletConfiguration\n"))

	got, err := h.SHA256(ctx, `C:\K\kubelet.conf`)
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sum[:]), got)

	tests := []struct {
		name    string
		path    string
		limit   int64
		want    string
		wantErr string
	}{
		{"whole", `C:\k\kubelet.conf`, 0, "kind: KubeletConfiguration\n", ""},
		{"exactly the limit", `C:\k\kubelet.conf`, 27, "kind: KubeletConfiguration\n", ""},
		{"over the limit", `C:\k\kubelet.conf`, 26, "", "larger than the limit"},
		{"missing", `C:\k\missing`, 0, "", `C:\k\missing`},
		{"directory", `C:\k`, 0, "", "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.ReadFile(ctx, tt.path, tt.limit)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
		})
	}
	_, err = h.SHA256(ctx, `C:\k\missing`)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestMkdirChmodRemove(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	require.NoError(t, h.MkdirAll(ctx, `C:\var\log\kubelet`, 0o755))
	require.NoError(t, h.MkdirAll(ctx, `C:\VAR\log\kubelet`, 0o755), "exists already, in another case")
	assert.DirExists(t, filepath.Join(h.Root(), "fs", "C", "var", "log", "kubelet"))
	assert.ErrorContains(t, h.MkdirAll(ctx, `D:\data`, 0o755), "drive D: does not exist")

	writeFile(t, h, `C:\var\log\kubelet\kubelet.log`, "log")
	require.NoError(t, h.Chmod(ctx, `C:\var\log\kubelet\kubelet.log`, 0o400))
	st, err := h.Stat(ctx, `C:\var\log\kubelet\kubelet.log`)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o444), st.Mode)
	require.NoError(t, h.Chmod(ctx, `C:\var\log\kubelet\kubelet.log`, 0o600))
	st, err = h.Stat(ctx, `C:\var\log\kubelet\kubelet.log`)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o666), st.Mode)
	require.NoError(t, h.Chmod(ctx, `C:\var`, 0o500), "a directory keeps no mode")
	assert.Error(t, h.Chmod(ctx, `C:\missing`, 0o644))

	assert.Error(t, h.Remove(ctx, `C:\var\log`, false), "not empty")
	require.NoError(t, h.Remove(ctx, `C:\var\log\kubelet\kubelet.log`, false))
	require.NoError(t, h.Remove(ctx, `C:\var\log\kubelet\kubelet.log`, false), "missing is fine")
	require.NoError(t, h.Remove(ctx, `C:\VAR`, true))
	assert.NoDirExists(t, filepath.Join(h.Root(), "fs", "C", "var"))
	assert.ErrorContains(t, h.Remove(ctx, `C:\`, true), "drive root")
}

// TestFileInUse is what real nodes do to kube-proxy.exe: its binary cannot
// be replaced or removed while the service runs.
func TestFileInUse(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	const bin = `C:\k\kube-proxy.exe`
	writeFile(t, h, bin, "#!/bin/sh\nsleep 30\n")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "kube-proxy", BinaryPath: bin}))
	require.NoError(t, h.StartService(ctx, "kube-proxy"))
	info, err := h.QueryService(ctx, "kube-proxy")
	require.NoError(t, err)
	require.Equal(t, host.ServiceRunning, info.State)
	require.False(t, gone(info.PID), "a real process runs")

	err = h.WriteFile(ctx, bin, strings.NewReader("new"), 0o755)
	assert.ErrorIs(t, err, ErrFileInUse)
	assert.ErrorContains(t, err, "being used by another process")
	assert.ErrorIs(t, h.WriteFile(ctx, `c:/K/KUBE-PROXY.EXE`, strings.NewReader("new"), 0o755), ErrFileInUse)
	assert.ErrorIs(t, h.Remove(ctx, bin, false), ErrFileInUse)
	assert.ErrorIs(t, h.Remove(ctx, `C:\k`, true), ErrFileInUse)
	assert.FileExists(t, filepath.Join(h.Root(), "fs", "C", "k", "kube-proxy.exe"), "nothing removed")
	writeFile(t, h, `C:\k\kube-proxy.conf`, "other files are free")

	require.NoError(t, h.StopService(ctx, "kube-proxy", 10*time.Second))
	assert.True(t, gone(info.PID), "stop waits for the process to exit")
	writeFile(t, h, bin, "new")
	require.NoError(t, h.Remove(ctx, `C:\k`, true))
}

// TestFileInUseSimulated: a binary that cannot run on Linux is just as
// locked while its simulated service runs.
func TestFileInUseSimulated(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\kubelet.exe`, "MZ not really")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\kubelet.exe`}))
	require.NoError(t, h.StartService(ctx, "kubelet"))
	assert.ErrorIs(t, h.WriteFile(ctx, `C:\k\kubelet.exe`, strings.NewReader("v2"), 0o644), ErrFileInUse)
	// UpdateService changes the path for the next start, not the running
	// binary.
	require.NoError(t, h.UpdateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\kubelet-v2.exe`}))
	assert.ErrorIs(t, h.WriteFile(ctx, `C:\k\kubelet.exe`, strings.NewReader("v2"), 0o644), ErrFileInUse)
	writeFile(t, h, `C:\k\kubelet-v2.exe`, "v2")
	require.NoError(t, h.StopService(ctx, "kubelet", time.Second))
	writeFile(t, h, `C:\k\kubelet.exe`, "v2")
}
