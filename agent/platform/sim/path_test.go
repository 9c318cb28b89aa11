package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLocalPath(t *testing.T) {
	tests := []struct {
		in      string
		want    string // below root/fs
		wantErr string
	}{
		{in: `C:\k\kubelet.exe`, want: "C/k/kubelet.exe"},
		{in: `c:\k\kubelet.exe`, want: "C/k/kubelet.exe"},
		{in: `C:/k/kubelet.exe`, want: "C/k/kubelet.exe"},
		{in: `C:\k/cni\config`, want: "C/k/cni/config"},
		{in: `/C:/k/x`, want: "C/k/x"},
		{in: `/d:/data`, want: "D/data"},
		{in: `/C:`, want: "C"},
		{in: `\\?\C:\k\x`, want: "C/k/x"},
		{in: `C:\`, want: "C"},
		{in: `C:/`, want: "C"},
		{in: `C:\k\`, want: "C/k"},
		{in: `C:\k\\x`, want: "C/k/x"},
		{in: `C:\k\.\x`, want: "C/k/x"},
		{in: `C:\k\..\var\log`, want: "C/var/log"},
		{in: `C:\Program Files\x y.exe`, want: "C/Program Files/x y.exe"},
		{in: ``, wantErr: "empty path"},
		{in: `k\kubelet.exe`, wantErr: "not an absolute Windows path"},
		{in: `.\x`, wantErr: "not an absolute Windows path"},
		{in: `\k\x`, wantErr: "not an absolute Windows path"},
		{in: `/k/x`, wantErr: "not an absolute Windows path"},
		{in: `/etc/passwd`, wantErr: "not an absolute Windows path"},
		{in: `1:\x`, wantErr: "not an absolute Windows path"},
		{in: `C:`, wantErr: "drive-relative"},
		{in: `C:k\x`, wantErr: "drive-relative"},
		{in: `\\server\share\x`, wantErr: "UNC"},
		{in: `C:\..`, wantErr: "escapes the drive"},
		{in: `C:\k\..\..\etc\passwd`, wantErr: "escapes the drive"},
		{in: `/C:/../../x`, wantErr: "escapes the drive"},
		{in: `C:\k\a:b`, wantErr: "invalid file name"},
		{in: `C:\k\a*b`, wantErr: "invalid file name"},
		{in: "C:\\k\\a\x01", wantErr: "invalid file name"},
	}
	root := t.TempDir()
	h, err := New(root, Options{})
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := h.LocalPath(tt.in)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.Join(root, "fs", filepath.FromSlash(tt.want)), got)
		})
	}
}

// TestLocalPathFoldsCase: NTFS ignores case, so existing components match
// whatever case the path uses; new ones keep theirs.
func TestLocalPathFoldsCase(t *testing.T) {
	root := t.TempDir()
	h, err := New(root, Options{})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "fs", "C", "var", "lib", "Kubelet"), 0o755))
	tests := []struct{ in, want string }{
		{`C:\VAR\LIB\kubelet\pki`, "C/var/lib/Kubelet/pki"},
		{`c:\var\Lib\KUBELET`, "C/var/lib/Kubelet"},
		{`C:\Windows\system32\New.txt`, "C/Windows/System32/New.txt"},
	}
	for _, tt := range tests {
		got, err := h.LocalPath(tt.in)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(root, "fs", filepath.FromSlash(tt.want)), got, tt.in)
	}
}

func TestIsWinPath(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{`C:\k\x.exe`, true},
		{`c:/k/x.exe`, true},
		{`/C:/k/x.exe`, true},
		{`\\?\C:\x`, true},
		{`sh`, false},
		{`/bin/sh`, false},
		{`./x`, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, isWinPath(tt.in), tt.in)
	}
}
