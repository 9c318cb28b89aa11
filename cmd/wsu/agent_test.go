package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/host"
)

// TestAgentCommandServesSim runs `wsu agent --platform sim` on pipes and
// drives it with the real client: the command wiring, end to end.
func TestAgentCommandServesSim(t *testing.T) {
	simRoot := t.TempDir()
	toAgent, agentIn := io.Pipe()
	agentOut, fromAgent := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		a := &app{ctx: ctx, stdin: toAgent, stdout: fromAgent, stderr: io.Discard}
		cmd := a.rootCommand()
		cmd.SetArgs([]string{"agent", "--platform", "sim", "--sim-root", simRoot, "--sim-hostname", "win42"})
		code := 0
		if err := cmd.ExecuteContext(ctx); err != nil {
			code = 1
		}
		fromAgent.Close()
		done <- code
	}()

	c, err := client.Dial(ctx, agentOut, agentIn)
	require.NoError(t, err)
	assert.Equal(t, "sim", c.Hello().Platform)

	facts, err := c.Facts(ctx)
	require.NoError(t, err)
	assert.Equal(t, "windows", facts.OS)
	assert.Equal(t, "win42", facts.Hostname)

	require.NoError(t, c.MkdirAll(ctx, `C:\k`, 0o755))
	require.NoError(t, c.WriteFile(ctx, `C:\k\kubelet.conf`, strings.NewReader("kind: KubeletConfiguration\n"), 0o644))
	sum, err := c.SHA256(ctx, `C:\k\kubelet.conf`)
	require.NoError(t, err)
	assert.Len(t, sum, 64)
	// The file the simulation keeps, named as Linux (and SFTP) sees it.
	native, err := c.NativePath(ctx, `c:\K\kubelet.conf`)
	require.NoError(t, err)
	b, err := os.ReadFile(native)
	require.NoError(t, err, "fs.native_path names the simulating file")
	assert.Equal(t, "kind: KubeletConfiguration\n", string(b))
	assert.True(t, strings.HasPrefix(native, simRoot), "%s is under the sim root", native)
	require.NoError(t, c.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\kubelet.exe`, StartType: host.StartAutomatic}))
	info, err := c.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	assert.True(t, info.Exists)
	assert.Equal(t, host.ServiceStopped, info.State)

	require.NoError(t, c.Close())
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "the agent exits cleanly when its input closes")
	case <-ctx.Done():
		t.Fatal("agent did not exit after its input closed")
	}
}
