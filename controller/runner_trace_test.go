package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
