package view

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
)

// fakeClock stands still at now; the test ticks it with fire, which
// returns once the tick was handled.
type fakeClock struct {
	now    time.Time
	tick   func(time.Time)
	period time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Every(d time.Duration, tick func(time.Time)) func() {
	c.period, c.tick = d, tick
	return func() { c.tick = nil }
}

func (c *fakeClock) fire(now time.Time) { c.tick(now) }

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

// Off a terminal, a task still running is reported at the progress
// interval with its elapsed time and attempt; a task that finished, or has
// run for less than the interval, is not.
func TestHumanProgressOffTerminal(t *testing.T) {
	clock := newFakeClock()
	var out bytes.Buffer
	h := NewHuman(&out, HumanOptions{ProgressEvery: 5 * time.Second, Clock: clock})
	t0 := clock.now
	h.Event(engine.Event{Type: engine.EventRunStart, Mode: engine.ModeApply})
	h.Event(engine.Event{Type: engine.EventTaskStart, Host: "win02", Task: "wait for node", Index: 3, Count: 7})
	h.Event(engine.Event{Type: engine.EventTaskStart, Host: "win01", Task: "wait for node", Index: 3, Count: 7})
	require.Equal(t, 5*time.Second, clock.period, "the injected interval")
	clock.fire(t0.Add(5 * time.Second))
	h.Event(engine.Event{Type: engine.EventTaskRetry, Host: "win01", Attempts: 1})
	clock.fire(t0.Add(15 * time.Minute))
	h.Event(engine.Event{Type: engine.EventTaskResult, Mode: engine.ModeApply, Host: "win02", Task: "wait for node", Status: engine.StatusOK})
	clock.now = t0.Add(15 * time.Minute)
	h.Event(engine.Event{Type: engine.EventTaskStart, Host: "win02", Task: "label", Index: 4, Count: 7})
	clock.fire(t0.Add(15*time.Minute + 3*time.Second))
	h.Close()
	assert.Equal(t, ""+
		"  running  [win01] task \"wait for node\" (3/7): 5s elapsed\n"+
		"  running  [win02] task \"wait for node\" (3/7): 5s elapsed\n"+
		"  running  [win01] task \"wait for node\" (3/7): 15m0s elapsed, attempt 2\n"+
		"  running  [win02] task \"wait for node\" (3/7): 15m0s elapsed\n"+
		"  ok       [win02] task \"wait for node\"\n"+
		"  running  [win01] task \"wait for node\" (3/7): 15m3s elapsed, attempt 2\n", out.String())
}

// On a terminal the status line carries the elapsed time and the attempt,
// redrawn every second.
func TestHumanStatusLineElapsed(t *testing.T) {
	clock := newFakeClock()
	var out bytes.Buffer
	h := NewHuman(&out, HumanOptions{Progress: true, Clock: clock})
	h.Event(engine.Event{Type: engine.EventTaskStart, Mode: engine.ModeApply, Host: "win01", Task: "wait for node", Index: 3, Count: 7})
	require.Equal(t, time.Second, clock.period)
	h.Event(engine.Event{Type: engine.EventTaskRetry, Mode: engine.ModeApply, Host: "win01", Attempts: 2})
	clock.now = clock.now.Add(4*time.Minute + 12*time.Second)
	clock.fire(clock.now)
	h.Close()
	assert.Contains(t, out.String(), "… 1 running: win01: task \"wait for node\" (3/7), 0s elapsed")
	assert.Contains(t, out.String(), "… 1 running: win01: task \"wait for node\" (3/7), 4m12s elapsed, attempt 3")
	assert.True(t, bytes.HasSuffix(out.Bytes(), []byte("\r\x1b[K")), "Close clears the status line")
}

// The JSON view writes task_start and task_retry: a consumer sees a task
// begin, and each failed attempt, before its result.
func TestJSONTaskStart(t *testing.T) {
	var out bytes.Buffer
	j := NewJSON(&out)
	j.Event(engine.Event{Schema: engine.EventSchema, Type: engine.EventTaskStart, Host: "win01", Task: "wait", Index: 1, Count: 2})
	j.Event(engine.Event{Schema: engine.EventSchema, Type: engine.EventTaskRetry, Host: "win01", Task: "wait", Attempts: 1, RetryInMS: 10000})
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	require.Len(t, lines, 2)
	assert.Contains(t, string(lines[0]), `"type":"task_start"`)
	assert.Contains(t, string(lines[1]), `"type":"task_retry"`)
	assert.Contains(t, string(lines[1]), `"attempts":1,"retry_in_ms":10000`)
}
