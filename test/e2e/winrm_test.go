//go:build linux

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/test/harness"
)

// TestJoinOverWinRM: the stock join over WinRM (NTLM over HTTPS, the CA
// checked) through a WS-Management test endpoint per host, whose SimAgent
// runs the agent the transport uploads against the simulated host; then a
// re-run that changes nothing and sends nothing, the agent included.
func TestJoinOverWinRM(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1, Transport: harness.TransportWinRM})
	h := env.Hosts[0]
	w := env.WinRM(h)
	require.NotNil(t, w, "the host is behind a WS-Management endpoint")

	t0 := time.Now()
	r := run(t, env, nil, "apply", "join")
	requireSuccess(t, r)
	t.Logf("join over WinRM: %s", time.Since(t0).Round(time.Millisecond))
	recap, ok := r.Recap(h.Name)
	require.True(t, ok)
	assert.Zero(t, recap.Failed+recap.Unreachable)
	assert.NotZero(t, recap.Changed)
	assert.EqualValues(t, 1, w.Agent.Uploads.Load(), "the agent was deployed once, through the upload command")
	checkJoined(t, env, h)
	if t.Failed() {
		return
	}
	stats := w.Server.Stats()
	assert.Zero(t, stats.AuthFailures)
	for _, c := range stats.Commands {
		// The agent start and the one upload: every task is agent RPC.
		assert.Truef(t, strings.Contains(c, ` agent --sim-hostname `+h.Hostname+` --sim-ipv4 `+h.IPv4) || strings.HasPrefix(c, "powershell.exe "),
			"unexpected command on the host: %s", c)
	}

	t0 = time.Now()
	again := run(t, env, nil, "apply", "join")
	requireSuccess(t, again)
	t.Logf("re-run over WinRM: %s", time.Since(t0).Round(time.Millisecond))
	assert.Empty(t, again.Changed(h.Name), "a re-run changes nothing")
	recap, ok = again.Recap(h.Name)
	require.True(t, ok)
	assert.Zero(t, recap.Changed)
	assert.Zero(t, recap.BytesSent, "a re-run sends no bytes: no payload, no agent")
	assert.NotZero(t, recap.RPCs, "the re-run did talk to the host")
	assert.EqualValues(t, 1, w.Agent.Uploads.Load(), "the current agent is not uploaded again")
	checkJoined(t, env, h)
}
