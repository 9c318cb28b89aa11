package native

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wsu-project/wsu/host"
)

func skipWithoutShell(t *testing.T) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("tests drive /bin/sh")
	}
}

func TestRun(t *testing.T) {
	skipWithoutShell(t)
	dir := t.TempDir()
	tests := []struct {
		name    string
		req     host.RunRequest
		want    host.RunResult
		wantErr string
	}{
		{name: "success", req: host.RunRequest{Argv: []string{"true"}}, want: host.RunResult{ExitCode: 0}},
		{name: "exit code", req: host.RunRequest{Argv: []string{"sh", "-c", "exit 3"}}, want: host.RunResult{ExitCode: 3}},
		{
			name: "stdout and stderr",
			req:  host.RunRequest{Argv: []string{"sh", "-c", "echo out; echo err >&2"}},
			want: host.RunResult{Stdout: []byte("out\n"), Stderr: []byte("err\n")},
		},
		{
			name: "argv is not a shell line",
			req:  host.RunRequest{Argv: []string{"echo", "a b", "$HOME", ";", "c"}},
			want: host.RunResult{Stdout: []byte("a b $HOME ; c\n")},
		},
		{name: "stdin", req: host.RunRequest{Argv: []string{"cat"}, Stdin: []byte("piped")}, want: host.RunResult{Stdout: []byte("piped")}},
		{name: "no stdin reads EOF", req: host.RunRequest{Argv: []string{"cat"}}, want: host.RunResult{}},
		{
			name: "env added to environment",
			req:  host.RunRequest{Argv: []string{"sh", "-c", `printf '%s %s' "$WSU_TEST" "${PATH:+has-path}"`}, Env: []string{"WSU_TEST=yes"}},
			want: host.RunResult{Stdout: []byte("yes has-path")},
		},
		{name: "dir", req: host.RunRequest{Argv: []string{"pwd"}, Dir: dir}, want: host.RunResult{Stdout: []byte(dir + "\n")}},
		{
			name: "truncated",
			req:  host.RunRequest{Argv: []string{"sh", "-c", "printf 0123456789; printf abcdefghij >&2"}, OutputLimit: 4},
			want: host.RunResult{Stdout: []byte("0123"), Stderr: []byte("abcd"), Truncated: true},
		},
		{
			name: "exactly the limit is not truncated",
			req:  host.RunRequest{Argv: []string{"printf", "0123"}, OutputLimit: 4},
			want: host.RunResult{Stdout: []byte("0123")},
		},
		{
			// 3 MiB through a 1 MiB default limit: the child must not block.
			name: "default limit drains",
			req:  host.RunRequest{Argv: []string{"sh", "-c", "head -c 3145728 /dev/zero"}},
			want: host.RunResult{Stdout: make([]byte, host.DefaultOutputLimit), Truncated: true},
		},
		{
			name: "timeout",
			req:  host.RunRequest{Argv: []string{"sh", "-c", "echo started; sleep 30"}, Timeout: 200 * time.Millisecond},
			want: host.RunResult{ExitCode: -1, TimedOut: true, Stdout: []byte("started\n")},
		},
		{name: "timeout not reached", req: host.RunRequest{Argv: []string{"true"}, Timeout: 10 * time.Second}, want: host.RunResult{}},
		{name: "not found", req: host.RunRequest{Argv: []string{"wsu-no-such-program"}}, wantErr: "wsu-no-such-program"},
		{name: "bad dir", req: host.RunRequest{Argv: []string{"true"}, Dir: dir + "/nope"}, wantErr: "nope"},
		{name: "empty argv", req: host.RunRequest{}, wantErr: "empty argv"},
	}
	h := New()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			got, err := h.Run(context.Background(), tt.req)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Less(t, time.Since(start), 10*time.Second)
			assert.Equal(t, tt.want.ExitCode, got.ExitCode)
			assert.Equal(t, string(tt.want.Stdout), string(got.Stdout))
			assert.Equal(t, string(tt.want.Stderr), string(got.Stderr))
			assert.Equal(t, tt.want.Truncated, got.Truncated)
			assert.Equal(t, tt.want.TimedOut, got.TimedOut)
		})
	}
}

func TestRunCallerCancel(t *testing.T) {
	skipWithoutShell(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got, err := New().Run(ctx, host.RunRequest{Argv: []string{"sleep", "30"}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, got.TimedOut, "the caller's deadline is not the request's timeout")
}

func TestRunOrphanHoldingPipes(t *testing.T) {
	skipWithoutShell(t)
	h := NewPOSIX().(*localHost)
	h.waitDelay = 300 * time.Millisecond

	// The shell exits at once but its background child keeps stdout open.
	start := time.Now()
	got, err := h.Run(context.Background(), host.RunRequest{Argv: []string{"sh", "-c", "sleep 3 & echo done"}})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, 0, got.ExitCode)
	assert.True(t, strings.HasPrefix(string(got.Stdout), "done"))
}
