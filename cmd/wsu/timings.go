package main

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/host"
)

// timings is the hidden --timings FILE: when this process reached main,
// started and ended the engine run, and connected to each host, so the
// benchmarks can split a run's wall time into process start, loading,
// connecting (SSH and the agent's start), tasks and exit
// (docs/performance.md). Not a user option: its format may change.
type timings struct {
	mu       sync.Mutex
	Main     time.Time     `json:"main"`
	RunStart time.Time     `json:"run_start,omitzero"`
	RunEnd   time.Time     `json:"run_end,omitzero"`
	Connects []connectSpan `json:"connects,omitempty"`
	End      time.Time     `json:"end"`
}

// connectSpan is one host's connection: dial, authentication, the agent's
// check or deployment and its start.
type connectSpan struct {
	Host  string    `json:"host"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// connector records every connection c makes.
func (t *timings) connector(c engine.Connector) engine.Connector {
	return engine.ConnectorFunc(func(ctx context.Context, target engine.Target) (host.Host, error) {
		start := time.Now()
		h, err := c.Connect(ctx, target)
		end := time.Now()
		t.mu.Lock()
		t.Connects = append(t.Connects, connectSpan{Host: target.Name, Start: start, End: end})
		t.mu.Unlock()
		return h, err
	})
}

// mark sets *at to now.
func (t *timings) mark(at *time.Time) {
	t.mu.Lock()
	*at = time.Now()
	t.mu.Unlock()
}

// write stamps the end and writes the record to path.
func (t *timings) write(path string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.End = time.Now()
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
