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
	"testing/fstest"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/transport/agentbin"
	"github.com/wsu-project/wsu/transport/local"
)

var agentBuild struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

// agentDir builds the node agent (cmd/wsu-agent) once per run into a
// directory, under the name make build gives it: the agent the local
// transport starts.
func agentDir(t *testing.T) string {
	t.Helper()
	agentBuild.once.Do(func() {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			agentBuild.err = err
			return
		}
		dir, err := os.MkdirTemp("", "wsu-local-test")
		if err != nil {
			agentBuild.err = err
			return
		}
		agentBuild.dir = dir
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, agentbin.FileName(agentbin.Native())), "./cmd/wsu-agent")
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
		agentBuild.out, agentBuild.err = cmd.CombinedOutput()
	})
	if agentBuild.err != nil {
		t.Fatalf("go build ./cmd/wsu-agent: %v\n%s", agentBuild.err, agentBuild.out)
	}
	return agentBuild.dir
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withAgent is the local transport with the agent build found in a
// directory, as bin/wsu finds bin/wsu-agent-* beside it.
func withAgent(t *testing.T) local.Dialer {
	return local.Dialer{Agents: agentbin.New(agentbin.Options{Dir: agentDir(t)})}
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

// connection = local starts the agent as a child: the host is the agent
// client, so the run takes the remote path (protocol, counters), and Close
// ends the process.
func TestDialStartsAgent(t *testing.T) {
	d := withAgent(t)
	ctx := ctxFor(t)
	h, err := d.Dial(ctx, "localhost", nil)
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
	d := withAgent(t)
	ctx := ctxFor(t)
	root := t.TempDir()
	h, err := d.Dial(ctx, "win01", argsVar(cty.TupleVal([]cty.Value{
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
	h2, err := d.Dial(ctx, "win01", argsVar(cty.StringVal("--platform sim --sim-root "+root)))
	require.NoError(t, err)
	defer h2.Close()
	fi, err = h2.Stat(ctx, `C:\k`)
	require.NoError(t, err)
	assert.True(t, fi.IsDir, "the same simulated host")
}

func TestDialErrors(t *testing.T) {
	ctx := ctxFor(t)
	t.Run("bad wsu_agent_args", func(t *testing.T) {
		_, err := withAgent(t).Dial(ctx, "localhost", argsVar(cty.NumberIntVal(3)))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "inventory.ini:2,7")
		assert.Contains(t, err.Error(), "wsu_agent_args must be a string or a list of strings")
	})
	t.Run("not an agent", func(t *testing.T) {
		script := filepath.Join(t.TempDir(), "not-wsu")
		require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho no agent here >&2\nexit 3\n"), 0o755))
		d := local.Dialer{Agents: agentbin.New(agentbin.Options{Self: script})}
		_, err := d.Dial(ctx, "localhost", nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "starting the local agent")
		assert.Contains(t, err.Error(), "it wrote on stderr: no agent here")
	})
	t.Run("no build for this machine", func(t *testing.T) {
		d := local.Dialer{Agents: agentbin.New(agentbin.Options{Dir: t.TempDir()})}
		_, err := d.Dial(ctx, "localhost", nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "carries no agent for "+agentbin.Native().String())
		assert.Contains(t, err.Error(), "make build")
	})
	t.Run("args without the agent process", func(t *testing.T) {
		_, err := local.Dial(ctx, "localhost", argsVar(cty.StringVal("--platform sim")))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "wsu_agent_args needs the agent process")
	})
	t.Run("in-process without the agent", func(t *testing.T) {
		h, err := local.Dial(ctx, "localhost", nil)
		require.NoError(t, err)
		_, isAgent := h.(agentProc)
		assert.False(t, isAgent, "wsu used as a library serves the host in-process")
		require.NoError(t, h.Close())
	})
}

// An agent that dies is a lost connection, which the engine reconnects.
func TestAgentKilledIsLost(t *testing.T) {
	d := withAgent(t)
	ctx := ctxFor(t)
	h, err := d.Dial(ctx, "localhost", nil)
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

// A build the CLI carries in memory (make build embeds it) is written to
// the cache directory once and run from there; the next run finds the
// file in place, and a file that is not the build is replaced.
func TestDialEmbeddedAgent(t *testing.T) {
	ctx := ctxFor(t)
	name := agentbin.FileName(agentbin.Native())
	data, err := os.ReadFile(filepath.Join(agentDir(t), name))
	require.NoError(t, err)
	cache := t.TempDir()
	dial := func() (agentProc, host.Host) {
		d := local.Dialer{Agents: agentbin.New(agentbin.Options{
			Embedded: fstest.MapFS{name: {Data: data}},
			CacheDir: cache,
		})}
		h, err := d.Dial(ctx, "localhost", nil)
		require.NoError(t, err)
		return h.(agentProc), h
	}
	a, h := dial()
	sum := a.Hello().AgentSHA256
	require.NoError(t, h.Close())
	files, err := filepath.Glob(filepath.Join(cache, "wsu-agent-*"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one executable copy")
	assert.Contains(t, filepath.Base(files[0]), sum[:12], "named by its sha256")
	fi, err := os.Stat(files[0])
	require.NoError(t, err)
	first := fi.ModTime()

	a, h = dial()
	assert.Equal(t, sum, a.Hello().AgentSHA256)
	require.NoError(t, h.Close())
	fi, err = os.Stat(files[0])
	require.NoError(t, err)
	assert.Equal(t, first, fi.ModTime(), "the next run reuses the copy")

	require.NoError(t, os.WriteFile(files[0], []byte("#!/bin/sh\nexit 3\n"), 0o700))
	a, h = dial()
	assert.Equal(t, sum, a.Hello().AgentSHA256, "a copy that is not the build is written again")
	require.NoError(t, h.Close())
}
