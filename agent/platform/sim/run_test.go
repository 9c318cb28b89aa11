package sim

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestRun(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\tool.exe`, "#!/bin/sh\necho \"args:$*\"\necho \"cwd:$(pwd)\"\necho \"root:$"+EnvRoot+"\"\nexit 3\n")
	writeFile(t, h, `C:\k\kubelet.exe`, "MZ\x90\x00 a Windows binary")
	require.NoError(t, h.MkdirAll(ctx, `C:\k\work dir`, 0o755))
	tests := []struct {
		name     string
		req      host.RunRequest
		want     host.RunResult
		contains []string // in stdout
		wantErr  string
		is       error
	}{
		{name: "linux command", req: host.RunRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 2"}},
			want: host.RunResult{ExitCode: 2, Stdout: []byte("out\n"), Stderr: []byte("err\n")}},
		{name: "stdin and env", req: host.RunRequest{Argv: []string{"sh", "-c", "cat; echo $X"}, Stdin: []byte("in:"), Env: []string{"X=y"}},
			want: host.RunResult{Stdout: []byte("in:y\n")}},
		{name: "output limit", req: host.RunRequest{Argv: []string{"sh", "-c", "echo 0123456789"}, OutputLimit: 4},
			want: host.RunResult{Stdout: []byte("0123"), Truncated: true}},
		{name: "timeout", req: host.RunRequest{Argv: []string{"sh", "-c", "sleep 10"}, Timeout: 100 * time.Millisecond},
			want: host.RunResult{ExitCode: -1, TimedOut: true}},
		{name: "windows path, translated", req: host.RunRequest{Argv: []string{`c:/K/tool.exe`, "--v=2"}, Dir: `C:\k\work dir`},
			want:     host.RunResult{ExitCode: 3},
			contains: []string{"args:--v=2\n", "cwd:" + h.Root() + "/fs/C/k/work dir\n", "root:" + h.Root() + "\n"}},
		{name: "SFTP-style path", req: host.RunRequest{Argv: []string{`/C:/k/tool.exe`}},
			want: host.RunResult{ExitCode: 3}, contains: []string{"args:\n"}},
		{name: "windows binary", req: host.RunRequest{Argv: []string{`C:\k\kubelet.exe`}}, wantErr: "not a Linux executable", is: host.ErrNotSupported},
		{name: "missing binary", req: host.RunRequest{Argv: []string{`C:\k\missing.exe`}}, wantErr: `C:\k\missing.exe`, is: fs.ErrNotExist},
		{name: "linux dir rejected", req: host.RunRequest{Argv: []string{"true"}, Dir: "/tmp"}, wantErr: "not an absolute Windows path"},
		{name: "empty argv", req: host.RunRequest{}, wantErr: "empty argv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.Run(ctx, tt.req)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				if tt.is != nil {
					assert.ErrorIs(t, err, tt.is)
				}
				return
			}
			require.NoError(t, err)
			if tt.contains != nil {
				for _, c := range tt.contains {
					assert.Contains(t, string(got.Stdout), c)
				}
				got.Stdout = nil
			}
			if len(got.Stdout) == 0 {
				got.Stdout = tt.want.Stdout
			}
			if len(got.Stderr) == 0 {
				got.Stderr = tt.want.Stderr
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

// TestRunBinaryInUse: a binary is locked while a Run executes it.
func TestRunBinaryInUse(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	writeFile(t, h, `C:\k\slow.exe`, "#!/bin/sh\ntouch \"$"+EnvRoot+"/started\"\nsleep 1\n")
	done := make(chan error)
	go func() {
		_, err := h.Run(ctx, host.RunRequest{Argv: []string{`C:\k\slow.exe`}})
		done <- err
	}()
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(h.Root(), "started"))
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
	assert.ErrorIs(t, h.WriteFile(ctx, `C:\k\slow.exe`, strings.NewReader("x"), 0o644), ErrFileInUse)
	require.NoError(t, <-done)
	writeFile(t, h, `C:\k\slow.exe`, "x")
}
