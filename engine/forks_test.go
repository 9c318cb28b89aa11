package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/transport/local"
)

// slowRun holds each Run for a while and records how many ran at once.
type slowRun struct {
	host.Host
	inflight, peak *atomic.Int32
}

func (h slowRun) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	n := h.inflight.Add(1)
	defer h.inflight.Add(-1)
	for {
		old := h.peak.Load()
		if n <= old || h.peak.CompareAndSwap(old, n) {
			break
		}
	}
	time.Sleep(100 * time.Millisecond) // long enough for the others to start, if allowed
	return h.Host.Run(ctx, req)
}

// --forks caps how many hosts run at once, and the hosts do run in
// parallel up to it.
func TestForksCapsConcurrency(t *testing.T) {
	for _, forks := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(forks), func(t *testing.T) {
			f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "work" {
    command { argv = ["true"] }
  }
}
`})
			var inv strings.Builder
			for i := range 6 {
				fmt.Fprintf(&inv, "h%d connection=local\n", i)
			}
			f.inv = inv.String()
			f.forks = forks
			var inflight, peak atomic.Int32
			f.connect = func(context.Context, engine.Target) (host.Host, error) {
				return slowRun{Host: local.New(), inflight: &inflight, peak: &peak}, nil
			}
			res, rec := f.run(engine.ModeApply)
			require.False(t, res.Failed(), "%v", res.Diagnostics)
			assert.Len(t, rec.results(""), 6, "every host ran the task")
			assert.Equal(t, int32(forks), peak.Load(), "hosts running at once")
		})
	}
}
