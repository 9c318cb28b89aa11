//go:build linux

package ssh

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/windows"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
)

func TestUploadMethodConfig(t *testing.T) {
	base := map[string]string{"wsu_remote_os": "linux", "wsu_agent_binary": "/bin/true"}
	for _, tt := range []struct{ value, want string }{{"", "auto"}, {"auto", "auto"}, {"SFTP", "sftp"}, {"agent", "agent"}} {
		kv := map[string]string{}
		for k, v := range base {
			kv[k] = v
		}
		if tt.value != "" {
			kv["wsu_upload_method"] = tt.value
		}
		cfg, err := ParseConfig("win01", vars(kv))
		require.NoError(t, err)
		assert.Equal(t, tt.want, cfg.UploadMethod)
	}
	base["wsu_upload_method"] = "scp"
	_, err := ParseConfig("win01", vars(base))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `inventory.ini:3:10: wsu_upload_method must be auto, agent or sftp, not "scp"`)
}

// copyFile runs win_copy's plan and apply of src to dest, as the engine
// does, and returns the apply's bytes_sent (-1 when the plan saw no change).
func copyFile(t *testing.T, h host.Host, src, dest string) int64 {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	m := windows.Copy{}
	cfg := moduleConfig(t, m, map[string]cty.Value{"src": cty.StringVal(src), "dest": cty.StringVal(dest)})
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg, Host: h})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	if plan.Change == nil {
		return -1
	}
	apply := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Host: h, Change: plan.Change})
	require.False(t, apply.Diagnostics.HasErrors(), "%v", apply.Diagnostics)
	sent, _ := apply.Result.GetAttr("bytes_sent").AsBigFloat().Int64()
	return sent
}

// TestUploadMethods copies payload files with win_copy over the real sshd
// by each method: SFTP, the agent stream, auto, and SFTP on a host without
// the subsystem (which falls back to the agent stream). Each converges, a
// second apply changes nothing, and a changed source of the same size is
// seen (no stale cached sum after an SFTP upload).
func TestUploadMethods(t *testing.T) {
	tests := []struct {
		name, method string
		noSFTP       bool
		want         string // the method used
	}{
		{"sftp", "sftp", false, "sftp"},
		{"agent", "agent", false, "agent"},
		{"auto", "auto", false, autoUpload},
		{"sftp without the subsystem", "sftp", true, "agent"},
		{"auto without the subsystem", "auto", true, "agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRigWith(t, sshdtest.Options{NoSFTP: tt.noSFTP})
			ctx := testCtx(t, 3*time.Minute)
			hh, err := Dial(ctx, "win01", r.vars(t, map[string]string{"wsu_upload_method": tt.method}))
			require.NoError(t, err)
			defer hh.Close()
			h := hh.(*Host)
			require.NoError(t, h.MkdirAll(ctx, `C:\k\payload`, 0o755))

			srcDir := t.TempDir()
			src := filepath.Join(srcDir, "kubelet.exe")
			v1 := randomBytes(3<<20+5, 21) // several SFTP writes and agent frames
			require.NoError(t, os.WriteFile(src, v1, 0o644))
			dest := `C:\k\payload\kubelet.exe`

			before := h.Counters()
			assert.Equal(t, int64(len(v1)), copyFile(t, h, src, dest))
			assert.Equal(t, tt.want, h.UploadMethod())
			used := h.Counters().Sub(before)
			assert.Equal(t, int64(len(v1)), used.BytesSent, "the payload is counted either way")
			if tt.want == "sftp" {
				assert.Zero(t, used.RPCsByOp["fs.write"], "no fs.write: the content went over SFTP")
				assert.Equal(t, int64(1), used.RPCsByOp["fs.native_path"])
				assert.Equal(t, int64(1), used.RPCsByOp["fs.chmod"])
			} else {
				assert.Equal(t, int64(1), used.RPCsByOp["fs.write"])
			}
			got, err := h.ReadFile(ctx, dest, 0)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(v1, got), "the host has the file")
			assert.Equal(t, int64(-1), copyFile(t, h, src, dest), "second apply: no change")

			// New content of the same size: seen, copied, converged.
			v2 := randomBytes(len(v1), 22)
			require.NoError(t, os.WriteFile(src, v2, 0o644))
			assert.Equal(t, int64(len(v2)), copyFile(t, h, src, dest))
			got, err = h.ReadFile(ctx, dest, 0)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(v2, got))
			assert.Equal(t, int64(-1), copyFile(t, h, src, dest), "no change after the update")
			// Past the hash cache's racy window the agent serves the sum
			// from its cache: it must be the new content's.
			time.Sleep(3 * time.Second)
			assert.Equal(t, int64(-1), copyFile(t, h, src, dest), "no change with the cached sum")

			// The same through a fresh connection (a re-run).
			again, err := Dial(ctx, "win01", r.vars(t, map[string]string{"wsu_upload_method": tt.method}))
			require.NoError(t, err)
			defer again.Close()
			assert.Equal(t, int64(-1), copyFile(t, again, src, dest), "a re-run changes nothing")

			native, err := h.agent.client.NativePath(ctx, `C:\k\payload`)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(native, filepath.Join(r.dir, "sim")), native)
			noTemps(t, native)
		})
	}
}

// TestUploadSemantics: Upload over SFTP is WriteFile: a missing parent is
// fs.ErrNotExist, a reader that fails leaves the old file and no temp, the
// mode is applied as the agent applies it.
func TestUploadSemantics(t *testing.T) {
	r := newRig(t)
	ctx := testCtx(t, 2*time.Minute)
	hh, err := Dial(ctx, "win01", r.vars(t, map[string]string{"wsu_upload_method": "sftp"}))
	require.NoError(t, err)
	defer hh.Close()
	h := hh.(*Host)
	require.NoError(t, h.MkdirAll(ctx, `C:\k`, 0o755))

	err = h.Upload(ctx, `C:\k\missing\x.bin`, bytes.NewReader([]byte("x")), 0o644)
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.Contains(t, err.Error(), `C:\k\missing\x.bin`)

	require.NoError(t, h.Upload(ctx, `C:\k\x.bin`, bytes.NewReader([]byte("old")), 0o644))
	err = h.Upload(ctx, `C:\k\x.bin`, &failingReader{data: randomBytes(2<<20, 1), n: 1 << 20}, 0o644)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "injected")
	got, err := h.ReadFile(ctx, `C:\k\x.bin`, 0)
	require.NoError(t, err)
	assert.Equal(t, "old", string(got), "a failed upload leaves the old file")
	entries, err := h.ReadDir(ctx, `C:\k`, 0)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temp file: %v", entries)

	// Read-only as the simulation's WriteFile makes it.
	require.NoError(t, h.Upload(ctx, `C:\k\ro.bin`, bytes.NewReader([]byte("ro")), 0o444))
	viaAgent := `C:\k\ro-agent.bin`
	require.NoError(t, h.WriteFile(ctx, viaAgent, bytes.NewReader([]byte("ro")), 0o444))
	a, err := h.Stat(ctx, `C:\k\ro.bin`)
	require.NoError(t, err)
	b, err := h.Stat(ctx, viaAgent)
	require.NoError(t, err)
	assert.Equal(t, b.Mode, a.Mode)
	assert.Equal(t, "sftp", h.UploadMethod())
}
