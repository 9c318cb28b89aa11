package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stillClock stands at t0; the test ticks it (tick returns once handled).
type stillClock struct {
	t0     time.Time
	mu     sync.Mutex
	period time.Duration
	fn     func(time.Time)
}

func (c *stillClock) Now() time.Time { return c.t0 }

func (c *stillClock) Every(d time.Duration, fn func(time.Time)) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.period, c.fn = d, fn
	return func() {}
}

func (c *stillClock) tick(at time.Time) {
	c.mu.Lock()
	fn := c.fn
	c.mu.Unlock()
	fn(at)
}

// TestProgressOffTerminal: an apply whose output is not a terminal reports
// a task still running after the 30 s interval with its elapsed time. The
// task waits until the test has ticked the clock, so nothing depends on
// how long anything takes.
func TestProgressOffTerminal(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	pb := writeFile(t, dir, "wait.hcl", `
variable "root" {
  type = string
}
play "p" {
  hosts = "all"
  task "wait for node" {
    command {
      argv = ["sh", "-c", "touch ${var.root}/started; while [ ! -e ${var.root}/release ]; do sleep 0.05; done"]
    }
  }
}
`)
	clock := &stillClock{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var out, errb bytes.Buffer
	a := &app{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb, clock: clock}
	root0 := a.rootCommand()
	root0.SetArgs(normalizeArgs(root0, []string{"apply", "--auto-approve", pb, "--local", "-var", "root=" + root}))
	done := make(chan error, 1)
	go func() { done <- root0.ExecuteContext(context.Background()) }()

	for {
		if _, err := os.Stat(filepath.Join(root, "started")); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended before the task started: %v\n%s%s", err, out.String(), errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	clock.mu.Lock()
	assert.Equal(t, 30*time.Second, clock.period, "the default interval off a terminal")
	clock.mu.Unlock()
	clock.tick(clock.t0.Add(20 * time.Second)) // under the interval: no line
	clock.tick(clock.t0.Add(15*time.Minute + 2*time.Second))
	require.NoError(t, os.WriteFile(filepath.Join(root, "release"), nil, 0o644))
	require.NoError(t, <-done, errb.String())

	assert.NotContains(t, out.String(), "20s elapsed")
	assert.Contains(t, out.String(), "  running  [localhost] task \"wait for node\" (1/1): 15m2s elapsed\n")
	assert.Regexp(t, `running .*15m2s elapsed\n\s+changed\s+\[localhost\] task "wait for node"`, out.String(), "the progress line comes before the result")
}
