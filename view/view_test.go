package view

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsu-project/wsu/engine"
)

// The human recap shows file content sent, and only when there was some:
// unmetered transports and no-op re-runs read as before.
func TestHumanRecapBytesSent(t *testing.T) {
	tests := []struct {
		name    string
		traffic *engine.Traffic
		want    string
	}{
		{name: "not metered", want: "  win01  ok=1   changed=0   failed=0   skipped=0   unreachable=0   ignored=0\n"},
		{name: "nothing sent", traffic: &engine.Traffic{RPCs: 5}, want: "  win01  ok=1   changed=0   failed=0   skipped=0   unreachable=0   ignored=0\n"},
		{name: "bytes", traffic: &engine.Traffic{RPCs: 5, BytesSent: 23}, want: "  win01  ok=1   changed=0   failed=0   skipped=0   unreachable=0   ignored=0 sent=23B\n"},
		{name: "mebibytes", traffic: &engine.Traffic{BytesSent: 3<<20 + 512<<10}, want: "  win01  ok=1   changed=0   failed=0   skipped=0   unreachable=0   ignored=0 sent=3.5MiB\n"},
		{name: "agent bytes are not payload", traffic: &engine.Traffic{AgentBytes: 40 << 20}, want: "  win01  ok=1   changed=0   failed=0   skipped=0   unreachable=0   ignored=0\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			h := NewHuman(&out, HumanOptions{})
			h.Event(engine.Event{Type: engine.EventRecap, Mode: engine.ModeApply, Recap: []engine.HostRecap{{Host: "win01", OK: 1, Traffic: tt.traffic}}})
			assert.Equal(t, "\nRECAP\n"+tt.want, out.String())
		})
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0B", 1023: "1023B", 1024: "1KiB", 655360 + 23: "640KiB", 1536: "1.5KiB",
		5 << 30: "5GiB", 3 << 40: "3TiB", 2 << 50: "2048TiB",
	} {
		assert.Equal(t, want, formatBytes(n), "%d", n)
	}
}

// The JSON view writes a task's traffic when the engine measured it, zeros
// included, and leaves the fields out when it did not.
func TestJSONTraffic(t *testing.T) {
	tests := []struct {
		name    string
		traffic *engine.Traffic
		want    string
	}{
		{name: "not metered", want: `"status":"ok"}`},
		{name: "no-op", traffic: &engine.Traffic{RPCs: 1, RPCsByOp: map[string]int64{"fs.sha256": 1}}, want: `"status":"ok","rpcs":1,"rpcs_by_op":{"fs.sha256":1},"bytes_sent":0}`},
		{name: "deployed", traffic: &engine.Traffic{RPCs: 2, BytesSent: 9, AgentBytes: 7}, want: `"status":"ok","rpcs":2,"bytes_sent":9,"agent_bytes":7}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			NewJSON(&out).Event(engine.Event{Schema: engine.EventSchema, Type: engine.EventTaskResult, Host: "win01", Status: engine.StatusOK, Traffic: tt.traffic})
			assert.True(t, strings.HasSuffix(strings.TrimSpace(out.String()), tt.want), out.String())
		})
	}
}

// A plan shows the warning of a task that changes nothing (a service
// remove leaves alone), even though such tasks are otherwise not listed.
func TestHumanPlanShowsWarningsOfUnchangedTasks(t *testing.T) {
	var out bytes.Buffer
	h := NewHuman(&out, HumanOptions{})
	warn := []engine.DiagnosticView{{Severity: "warning", Summary: "Service not managed by wsu", Detail: "kept",
		Range: &engine.RangeView{Filename: "remove.hcl", Line: 80, Column: 7}}}
	h.Event(engine.Event{Type: engine.EventTaskResult, Mode: engine.ModePlan, Host: "win01", Task: "services", Key: "00-windows_exporter", Status: engine.StatusOK, Diagnostics: warn})
	h.Event(engine.Event{Type: engine.EventTaskResult, Mode: engine.ModePlan, Host: "win01", Task: "quiet", Status: engine.StatusOK})
	got := out.String()
	assert.Contains(t, got, `[win01] task "services"["00-windows_exporter"]`)
	assert.Contains(t, got, "Warning: Service not managed by wsu\n")
	assert.Contains(t, got, "on remove.hcl line 80, column 7\n")
	assert.NotContains(t, got, "quiet", "an unchanged task without warnings stays unlisted")
}

// What a transport reports while connecting is shown as it happens: each
// retry and each warning (a host key recorded on first use) on its own
// line in the human view, and as host_connect_retry / host_warning events
// in the JSON view.
func TestConnectNotices(t *testing.T) {
	retry := engine.Event{Type: engine.EventConnectRetry, Host: "win01", Attempts: 2, RetryInMS: 1900,
		Message:     "connection attempt 2 to admin@10.0.0.5:22 failed: dial tcp 10.0.0.5:22: connect: connection refused; retrying in 1.9s (connect_retry_window = 5m0s, 4m57s left)",
		Diagnostics: []engine.DiagnosticView{{Severity: "warning", Summary: "Connection attempt 2 failed", Detail: "dial tcp 10.0.0.5:22: connect: connection refused"}}}
	warn := engine.Event{Type: engine.EventHostWarning, Host: "win01",
		Message:     "Permanently added the host key of '10.0.0.5' (ssh-ed25519 SHA256:abc) to the list of known hosts /root/.ssh/known_hosts",
		Diagnostics: []engine.DiagnosticView{{Severity: "warning", Summary: "Permanently added the host key of '10.0.0.5' (ssh-ed25519 SHA256:abc) to the list of known hosts /root/.ssh/known_hosts", Detail: "Compare SHA256:abc with the host's own fingerprint."}}}

	var out bytes.Buffer
	h := NewHuman(&out, HumanOptions{})
	h.Event(retry)
	h.Event(warn)
	assert.Equal(t, "  retrying [win01] "+retry.Message+"\n"+
		"  warning [win01]\n    Warning: "+warn.Diagnostics[0].Summary+"\n      Compare SHA256:abc with the host's own fingerprint.\n", out.String())

	out.Reset()
	j := NewJSON(&out)
	j.Event(retry)
	j.Event(warn)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if assert.Len(t, lines, 2) {
		assert.Contains(t, lines[0], `"type":"host_connect_retry"`)
		assert.Contains(t, lines[0], `"attempts":2,"retry_in_ms":1900`)
		assert.Contains(t, lines[0], `"detail":"dial tcp 10.0.0.5:22: connect: connection refused"`)
		assert.Contains(t, lines[1], `"type":"host_warning"`)
		assert.Contains(t, lines[1], `SHA256:abc`)
	}
}

// A plan holds task results until its play ends (to list them in host
// order) but shows each connection retry as it happens: against a dead
// host the operator sees why nothing moves, not only "running".
func TestPlanShowsConnectRetriesLive(t *testing.T) {
	var out bytes.Buffer
	h := NewHuman(&out, HumanOptions{})
	h.Event(engine.Event{Type: engine.EventPlayStart, Mode: engine.ModePlan, Play: "p", Hosts: []string{"win01", "win02"}})
	h.Event(engine.Event{Type: engine.EventTaskResult, Mode: engine.ModePlan, Host: "win02", Task: "t", Index: 1, Count: 1, Status: engine.StatusChanged,
		Change: &engine.ChangeView{Action: "create", Symbol: "+", Subject: "/x"}})
	h.Event(engine.Event{Type: engine.EventConnectRetry, Host: "win01", Attempts: 1, Message: "connection attempt 1 to admin@10.0.0.5:22 failed; retrying in 1s"})
	got := out.String()
	assert.Contains(t, got, "  retrying [win01] connection attempt 1 to admin@10.0.0.5:22 failed; retrying in 1s\n", "shown before the play ends")
	assert.NotContains(t, got, `task "t"`, "task results still wait for the play's ordered listing")
	h.Event(engine.Event{Type: engine.EventReconnecting, Host: "win02", Message: "the connection dropped; reconnecting"})
	assert.Contains(t, out.String(), "  reconnecting [win02] the connection dropped; reconnecting\n")
	h.Close()
	assert.Contains(t, out.String(), `task "t"`)
}
