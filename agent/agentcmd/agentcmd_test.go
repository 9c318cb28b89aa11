package agentcmd

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/version"
)

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCommandLine(t *testing.T) {
	want := "wsu-agent " + version.Version + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	for _, args := range [][]string{{"--version"}, {"agent", "-version"}} {
		code, out, _ := run(args...)
		assert.Equal(t, 0, code, args)
		assert.Equal(t, want, out, "the leading word agent is optional: %v", args)
	}

	code, _, errb := run("-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, errb, "Usage: wsu-agent [agent] [flags]")
	assert.Contains(t, errb, "-sim-root")

	code, _, errb = run("--platform", "sim", "extra")
	assert.Equal(t, 2, code)
	assert.Contains(t, errb, `unexpected argument "extra"`)
	code, _, errb = run("--no-such-flag")
	assert.Equal(t, 2, code)
	assert.Contains(t, errb, "no-such-flag")

	code, _, errb = run("--platform", "mac")
	assert.Equal(t, 1, code)
	assert.Contains(t, errb, `--platform must be native or sim, not "mac"`)
	code, _, errb = run("agent", "--platform", "sim")
	assert.Equal(t, 1, code)
	assert.Contains(t, errb, "--platform sim needs --sim-root DIR")
}

// An empty input is a client that left before the start-up: a clean exit.
func TestEmptyInputExitsCleanly(t *testing.T) {
	code, _, errb := run("--platform", "sim", "--sim-root", t.TempDir())
	assert.Equal(t, 0, code, errb)
}

// Main serves the simulated host to the real client and reports the
// build's identity in its hello.
func TestServesSim(t *testing.T) {
	toAgent, agentIn := io.Pipe()
	agentOut, fromAgent := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan int, 1)
	root := t.TempDir()
	go func() {
		code := Main(ctx, []string{"agent", "--platform=sim", "--sim-root", root, "--sim-hostname", "win07", "--sim-dns-suffix", "Corp.Example.com"}, toAgent, fromAgent, io.Discard)
		fromAgent.Close()
		done <- code
	}()
	c, err := client.Dial(ctx, agentOut, agentIn)
	require.NoError(t, err)
	assert.Equal(t, "sim", c.Hello().Platform)
	assert.Equal(t, version.Version, c.Hello().AgentVersion)
	assert.Len(t, c.Hello().AgentSHA256, 64, "the agent reports its own sha256")
	facts, err := c.Facts(ctx)
	require.NoError(t, err)
	assert.Equal(t, "win07", facts.Hostname)
	assert.Equal(t, "win07.Corp.Example.com", facts.FQDN, "host name and primary DNS suffix")
	require.NoError(t, c.Close())
	select {
	case code := <-done:
		assert.Equal(t, 0, code)
	case <-ctx.Done():
		t.Fatal("the agent did not exit after its input closed")
	}
}
