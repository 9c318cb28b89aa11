//go:build linux

package ssh

// What the transport reports while it connects — trust on first use, and
// each retry — reaches the user: here through the engine into the JSON and
// human views, against the REAL sshd (test/sshd).

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/notify"
	"github.com/wsu-project/wsu/view"
)

// TestConnectRetriesAreReported: while sshd is down, every failed attempt
// is reported as it happens (host, attempt number, error, the wait before
// the next one) through the context's hook, as the engine installs it;
// the connection then succeeds once sshd is back.
func TestConnectRetriesAreReported(t *testing.T) {
	r := newRig(t)
	r.srv.Stop()
	got := newNotices()
	ctx := notify.With(testCtx(t, 2*time.Minute), got.add)
	cfg := r.config(t, map[string]string{"connect_retry_window": "1m"})
	done := make(chan error, 1)
	go func() {
		c, err := connect(ctx, cfg)
		if err == nil {
			c.Close()
		}
		done <- err
	}()

	// The first report arrives while sshd is still down.
	select {
	case <-got.arrived:
	case err := <-done:
		t.Fatalf("connect returned before reporting a retry: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no retry reported within a minute")
	}
	first := got.get()[0]
	assert.Equal(t, notify.Retry, first.Kind)
	assert.Equal(t, "win01", first.Host)
	assert.Equal(t, 1, first.Attempt)
	require.Error(t, first.Err)
	assert.Contains(t, first.Err.Error(), "connection refused")
	assert.Greater(t, first.Wait, time.Duration(0))
	assert.LessOrEqual(t, first.Wait, maxBackoff)
	assert.Contains(t, first.Summary, "connection attempt 1 to "+r.srv.User+"@"+r.srv.Addr+" failed")
	assert.Contains(t, first.Summary, "connection refused; retrying in ")
	assert.Contains(t, first.Summary, "connect_retry_window = 1m0s")

	r.srv.Restart(t)
	require.NoError(t, <-done)
	all := got.get()
	for i, n := range all {
		assert.Equal(t, notify.Retry, n.Kind)
		assert.Equal(t, i+1, n.Attempt, "attempts are numbered in order")
	}
}

// TestConnectNoticesReachTheViews: a run through the engine against a host
// whose sshd is down at first, with an unknown host key and
// ssh_trust_on_first_use: the JSON view writes host_connect_retry events
// (attempt, error, wait) and one host_warning naming the recorded key's
// fingerprint and the known_hosts file; the human view prints them.
func TestConnectNoticesReachTheViews(t *testing.T) {
	r := newRig(t)
	r.srv.Stop()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "play.hcl"), []byte(`
play "p" {
  hosts = "all"
  task "x" {
    file {
      path    = "C:\\k\\notice.txt"
      content = "hello"
    }
  }
}
`), 0o644))
	pb, diags := playbook.NewLoader(all.Schemas(), nil).Load(filepath.Join(dir, "play.hcl"))
	require.False(t, diags.HasErrors(), "%v", diags)
	inv := inventory.FromList("win01,")
	inv.Hosts["win01"].Vars = r.vars(t, map[string]string{
		"connect_retry_window":   "1m",
		"ssh_known_hosts_file":   kh,
		"ssh_trust_on_first_use": "true",
	})

	var jsonOut, humanOut bytes.Buffer
	jv, hv := view.NewJSON(&jsonOut), view.NewHuman(&humanOut, view.HumanOptions{})
	firstRetry := make(chan struct{})
	seen := false
	hooks := engine.HooksFunc(func(e engine.Event) {
		jv.Event(e)
		hv.Event(e)
		if e.Type == engine.EventConnectRetry && !seen {
			seen = true
			close(firstRetry)
		}
	})
	done := make(chan *engine.Result, 1)
	go func() {
		done <- engine.Run(testCtx(t, 2*time.Minute), engine.Request{
			Playbook: pb, Inventory: inv, Mode: engine.ModeApply, Registry: all.Schemas(), Hooks: hooks,
			Connector: engine.ConnectorFunc(func(ctx context.Context, tg engine.Target) (host.Host, error) {
				return Dial(ctx, tg.Name, tg.Vars)
			}),
		})
	}()
	select {
	case <-firstRetry:
	case res := <-done:
		t.Fatalf("the run ended before a retry was reported: %v", res.Diagnostics)
	case <-time.After(time.Minute):
		t.Fatal("no host_connect_retry event within a minute")
	}
	r.srv.Restart(t)
	res := <-done
	require.False(t, res.Failed(), "%v\n%s", res.Diagnostics, jsonOut.String())

	var retries, warnings []engine.Event
	for _, line := range strings.Split(strings.TrimSpace(jsonOut.String()), "\n") {
		var e engine.Event
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		switch e.Type {
		case engine.EventConnectRetry:
			retries = append(retries, e)
		case engine.EventHostWarning:
			warnings = append(warnings, e)
		}
	}
	require.NotEmpty(t, retries, jsonOut.String())
	for i, e := range retries {
		assert.Equal(t, "win01", e.Host)
		assert.Equal(t, i+1, e.Attempts)
		assert.Greater(t, e.RetryInMS, int64(0))
		require.Len(t, e.Diagnostics, 1)
		assert.Equal(t, "warning", e.Diagnostics[0].Severity)
		assert.Contains(t, e.Diagnostics[0].Detail, "connection refused")
		assert.Contains(t, e.Message, "retrying in")
	}
	kb, err := os.ReadFile(kh)
	require.NoError(t, err)
	require.Len(t, warnings, 1, jsonOut.String())
	assert.Equal(t, "win01", warnings[0].Host)
	require.Len(t, warnings[0].Diagnostics, 1)
	w := warnings[0].Diagnostics[0]
	assert.Equal(t, "warning", w.Severity)
	assert.Contains(t, w.Summary, "Permanently added")
	assert.Contains(t, w.Summary, kh)
	recorded := false
	for _, k := range r.srv.HostKeys {
		if strings.Contains(w.Summary, k.Type()+" "+gossh.FingerprintSHA256(k)) {
			recorded = true
			assert.Contains(t, string(kb), strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))), "the fingerprint shown is the key recorded")
		}
	}
	assert.True(t, recorded, "the warning names a host key's fingerprint: %s", w.Summary)

	human := humanOut.String()
	assert.Contains(t, human, "retrying [win01] connection attempt 1 to ")
	assert.Contains(t, human, "warning [win01]\n    Warning: Permanently added the host key of '[127.0.0.1]:")
}
