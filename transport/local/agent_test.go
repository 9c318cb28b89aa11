//go:build unix

package local_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/transport/local"
)

var wsuBuild struct {
	once sync.Once
	path string
	out  []byte
	err  error
}

// wsuBinary builds the wsu command once per run: the agent the local
// transport starts.
func wsuBinary(t *testing.T) string {
	t.Helper()
	wsuBuild.once.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			wsuBuild.err = err
			return
		}
		dir, err := os.MkdirTemp("", "wsu-local-test")
		if err != nil {
			wsuBuild.err = err
			return
		}
		wsuBuild.path = filepath.Join(dir, "wsu")
		cmd := exec.Command("go", "build", "-o", wsuBuild.path, "./cmd/wsu")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
		wsuBuild.out, wsuBuild.err = cmd.CombinedOutput()
	})
	if wsuBuild.err != nil {
		t.Fatalf("go build ./cmd/wsu: %v\n%s", wsuBuild.err, wsuBuild.out)
	}
	return wsuBuild.path
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withAgent points the transport at the wsu binary for one test.
func withAgent(t *testing.T) {
	old := local.AgentExecutable
	local.AgentExecutable = wsuBinary(t)
	t.Cleanup(func() { local.AgentExecutable = old })
}

func argsVar(v cty.Value) map[string]inventory.Var {
	return map[string]inventory.Var{"wsu_agent_args": {Value: v, Range: hcl.Range{Filename: "inventory.ini", Start: hcl.Pos{Line: 2, Column: 7}}}}
}

type agentProc interface {
	Hello() proto.Hello
	PID() int
	Lost() bool
}

// gone reports whether pid has exited and been reaped.
func gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

// connection = local starts `wsu agent` as a child: the host is the agent
// client, so the run takes the remote path (protocol, counters), and Close
// ends the process.
func TestDialStartsAgent(t *testing.T) {
	withAgent(t)
	ctx := ctxFor(t)
	h, err := local.Dial(ctx, "localhost", nil)
	require.NoError(t, err)
	a, ok := h.(agentProc)
	require.True(t, ok, "an agent process, not the in-process host: %T", h)
	assert.Equal(t, "linux", a.Hello().Platform)
	assert.False(t, gone(a.PID()))

	path := filepath.Join(t.TempDir(), "x.txt")
	require.NoError(t, h.WriteFile(ctx, path, strings.NewReader("through the agent"), 0o644))
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "through the agent", string(got))
	m, ok := h.(host.Metered)
	require.True(t, ok, "the agent client counts round trips")
	assert.Equal(t, int64(1), m.Counters().RPCsByOp["fs.write"])

	require.NoError(t, h.Close())
	assert.True(t, gone(a.PID()), "Close ends the agent process")
}

// wsu_agent_args reach the agent: the tests' simulated Windows host.
func TestDialAgentArgs(t *testing.T) {
	withAgent(t)
	ctx := ctxFor(t)
	root := t.TempDir()
	h, err := local.Dial(ctx, "win01", argsVar(cty.TupleVal([]cty.Value{
		cty.StringVal("--platform"), cty.StringVal("sim"), cty.StringVal("--sim-root"), cty.StringVal(root),
	})))
	require.NoError(t, err)
	defer h.Close()
	assert.Equal(t, "sim", h.(agentProc).Hello().Platform)
	require.NoError(t, h.MkdirAll(ctx, `C:\k`, 0o755))
	fi, err := h.Stat(ctx, `C:\K`)
	require.NoError(t, err)
	assert.True(t, fi.IsDir)

	// One string is split at spaces.
	h2, err := local.Dial(ctx, "win01", argsVar(cty.StringVal("--platform sim --sim-root "+root)))
	require.NoError(t, err)
	defer h2.Close()
	fi, err = h2.Stat(ctx, `C:\k`)
	require.NoError(t, err)
	assert.True(t, fi.IsDir, "the same simulated host")
}

func TestDialErrors(t *testing.T) {
	ctx := ctxFor(t)
	t.Run("bad wsu_agent_args", func(t *testing.T) {
		withAgent(t)
		_, err := local.Dial(ctx, "localhost", argsVar(cty.NumberIntVal(3)))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "inventory.ini:2,7")
		assert.Contains(t, err.Error(), "wsu_agent_args must be a string or a list of strings")
	})
	t.Run("not an agent", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "not-wsu")
		require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho no agent here >&2\nexit 3\n"), 0o755))
		old := local.AgentExecutable
		local.AgentExecutable = script
		defer func() { local.AgentExecutable = old }()
		_, err := local.Dial(ctx, "localhost", nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "starting the local agent")
		assert.Contains(t, err.Error(), "it wrote on stderr: no agent here")
	})
	t.Run("args without the agent process", func(t *testing.T) {
		old := local.AgentExecutable
		local.AgentExecutable = ""
		defer func() { local.AgentExecutable = old }()
		_, err := local.Dial(ctx, "localhost", argsVar(cty.StringVal("--platform sim")))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "wsu_agent_args needs the agent process")
	})
	t.Run("in-process without the agent", func(t *testing.T) {
		old := local.AgentExecutable
		local.AgentExecutable = ""
		defer func() { local.AgentExecutable = old }()
		h, err := local.Dial(ctx, "localhost", nil)
		require.NoError(t, err)
		_, isAgent := h.(agentProc)
		assert.False(t, isAgent, "wsu used as a library serves the host in-process")
		require.NoError(t, h.Close())
	})
}

// An agent that dies is a lost connection, which the engine reconnects.
func TestAgentKilledIsLost(t *testing.T) {
	withAgent(t)
	ctx := ctxFor(t)
	h, err := local.Dial(ctx, "localhost", nil)
	require.NoError(t, err)
	defer h.Close()
	a := h.(agentProc)
	require.NoError(t, syscall.Kill(a.PID(), syscall.SIGKILL))
	require.Eventually(t, func() bool {
		_, err := h.Stat(ctx, "/")
		return errors.Is(err, host.ErrConnectionLost)
	}, 10*time.Second, 10*time.Millisecond)
	assert.True(t, a.Lost())
}
