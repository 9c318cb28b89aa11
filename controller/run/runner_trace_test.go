package run

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
)

// TestRecorderTraces: a run's events reach InProcess.Trace as they
// happen, and the outcome is recorded as without it.
func TestRecorderTraces(t *testing.T) {
	var seen []engine.EventType
	r := &recorder{trace: engine.HooksFunc(func(ev engine.Event) { seen = append(seen, ev.Type) })}
	r.Event(engine.Event{Type: engine.EventUnreachable})
	r.Event(engine.Event{Type: engine.EventRecap})
	assert.Equal(t, []engine.EventType{engine.EventUnreachable, engine.EventRecap}, seen)
	assert.True(t, r.out.Unreachable, "recorded as without a trace")
}

// TestLoginRefused: only a host that refused the key is reported so (the
// controller then tries the Secret's other key); a host that cannot be
// reached, or a failed task, is not. The flag survives a Job's result,
// whose message may be cut.
func TestLoginRefused(t *testing.T) {
	outcome := func(ev engine.Event) Outcome {
		rec := &recorder{}
		rec.Event(ev)
		return rec.outcome(&engine.Result{})
	}
	unreachable := func(detail string) engine.Event {
		return engine.Event{Type: engine.EventUnreachable, Diagnostics: []engine.DiagnosticView{{Severity: "error", Summary: "Host unreachable", Detail: detail}}}
	}
	refused := outcome(unreachable("ssh: cannot connect to win-01 (Administrator@10.1.42.1:22): ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain"))
	assert.True(t, refused.Unreachable && refused.LoginRefused)
	assert.False(t, outcome(unreachable("ssh: cannot connect to win-01: dial tcp 10.1.42.1:22: connect: connection refused")).LoginRefused)
	failedTask := outcome(engine.Event{Type: engine.EventTaskResult, Status: engine.StatusFailed, Address: "task.x",
		Diagnostics: []engine.DiagnosticView{{Severity: "error", Summary: "unable to authenticate to the registry"}}})
	assert.False(t, failedTask.LoginRefused, "a task's failure is no login")

	data, err := encodeResult(resultOf(refused, ""))
	require.NoError(t, err)
	var back jobResult
	require.NoError(t, json.Unmarshal(data, &back))
	assert.True(t, back.outcome().LoginRefused, "through a Job's result")
}
