//go:build unix

package winetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPaths(t *testing.T) {
	p := &Prefix{Dir: "/tmp/t/prefix"}
	assert.Equal(t, "/tmp/t/prefix/drive_c", p.DriveC())
	assert.Equal(t, `C:\k\kubelet.exe`, p.WinPath("/tmp/t/prefix/drive_c/k/kubelet.exe"))
	assert.Equal(t, `C:\`, p.WinPath("/tmp/t/prefix/drive_c"))
	assert.Equal(t, `Z:\tmp\t\prefix\drive_cx\a`, p.WinPath("/tmp/t/prefix/drive_cx/a"))
	assert.Equal(t, `Z:\usr\bin`, p.WinPath("/usr/bin"))
	assert.Equal(t, "/tmp/t/prefix/drive_c/Program Files/x y/a.exe", p.LinuxPath(`C:\Program Files\x y\a.exe`))
	assert.Equal(t, "/tmp/t/prefix/drive_c/k", p.LinuxPath(`c:\k`))
	assert.Equal(t, "", p.LinuxPath(`D:\k`))
	assert.Equal(t, "wine-8.0_Debian_8.0_repack-4", sanitize("wine-8.0 (Debian 8.0~repack-4)"))
}

func TestWineEnv(t *testing.T) {
	t.Setenv("DISPLAY", ":0")
	t.Setenv("WINEDEBUG", "+all")
	env := wineEnv("/p")
	assert.Contains(t, env, "WINEPREFIX=/p")
	assert.Contains(t, env, "WINEDEBUG=-all")
	for _, kv := range env {
		assert.NotContains(t, kv, "DISPLAY=")
		assert.NotEqual(t, "WINEDEBUG=+all", kv)
	}
}
