package engine_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/transport/local"
)

// dialCounter is a FAKE connector: metered local hosts, counting the
// dials and the connections closed.
type dialCounter struct {
	mu     sync.Mutex
	dials  int
	closed int
}

func (d *dialCounter) Connect(context.Context, engine.Target) (host.Host, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials++
	drop := false
	return &closeCounting{meteredHost: &meteredHost{Host: local.NewPOSIX(), drop: &drop}, d: d}, nil
}

func (d *dialCounter) counts() (dials, closed int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dials, d.closed
}

type closeCounting struct {
	*meteredHost
	d *dialCounter
}

func (c *closeCounting) Close() error {
	c.d.mu.Lock()
	c.d.closed++
	c.d.mu.Unlock()
	return c.meteredHost.Close()
}

const connectionsPlay = rootVar + `
variable "ok" {
  type    = bool
  default = true
}
play "p" {
  hosts = "all"
  task "conf" {
    file {
      path    = "${var.root}/conf/a.conf"
      content = "a\n"
    }
  }
  task "check" {
    assert { that = [var.ok] }
  }
}`

func connectionsRequest(t *testing.T, mode engine.Mode, c engine.Connector, inv string, vars ...string) engine.Request {
	t.Helper()
	f := newFixture(t, map[string]string{"play.hcl": connectionsPlay})
	pb, diags := playbook.NewLoader(all.Schemas(), nil).Load(filepath.Join(f.dir, "play.hcl"))
	require.False(t, diags.HasErrors(), "%v", diags)
	parsed, diags := inventory.ParseINI("inv", []byte(inv))
	require.False(t, diags.HasErrors(), "%v", diags)
	return engine.Request{
		Playbook: pb, Inventory: parsed, Mode: mode, Registry: all.Schemas(), Connector: c,
		Inputs: engine.Inputs{Vars: append([]string{"root=" + f.root}, vars...)},
	}
}

// TestApplyOfPlanDialsOnce: applying a plan (Request.Expect) plans again
// to check it and then applies, over one connection per host, not two; a
// caller keeping connections across its own plan and the apply dials
// once in all, and each run counts only its own traffic.
func TestApplyOfPlanDialsOnce(t *testing.T) {
	t.Run("the check and the apply", func(t *testing.T) {
		d := &dialCounter{}
		req := connectionsRequest(t, engine.ModePlan, d, "win01\n")
		plan := engine.Run(context.Background(), req)
		require.False(t, plan.Failed(), "%v", plan.Diagnostics)
		req.Mode, req.Expect, req.Salt = engine.ModeApply, plan.Plan, nil
		res := engine.Run(context.Background(), req)
		require.False(t, res.Failed(), "%v", res.Diagnostics)
		assert.Equal(t, 1, res.Changes)
		dials, closed := d.counts()
		assert.Equal(t, 2, dials, "one for the plan, one for the check and the apply")
		assert.Equal(t, 2, closed, "nothing is left open")
	})
	t.Run("a caller's plan, the check and the apply", func(t *testing.T) {
		d := &dialCounter{}
		conns := engine.NewConnections()
		req := connectionsRequest(t, engine.ModePlan, conns.Connector(d), "win01\n")
		plan := engine.Run(context.Background(), req)
		require.False(t, plan.Failed(), "%v", plan.Diagnostics)
		require.NotNil(t, plan.Recap[0].Traffic)
		planRPCs := plan.Recap[0].Traffic.RPCs
		req.Mode, req.Expect = engine.ModeApply, plan.Plan
		res := engine.Run(context.Background(), req)
		require.False(t, res.Failed(), "%v", res.Diagnostics)
		dials, closed := d.counts()
		assert.Equal(t, 1, dials)
		assert.Equal(t, 0, closed, "kept for the caller's next run")
		// The apply's own traffic only: it plans (stat, sum) and writes.
		assert.Equal(t, map[string]int64{"fs.sha256": 1, "fs.stat": 1, "fs.mkdir": 1, "fs.write": 1}, res.Recap[0].Traffic.RPCsByOp)
		assert.Equal(t, int64(1), planRPCs, "the plan's own: one sum")
		require.NoError(t, conns.Close())
		_, closed = d.counts()
		assert.Equal(t, 1, closed)
	})
}

// TestKeptConnectionsOnlyWhenSound: a connection is kept for the next run
// only when its host came through the run well, and is taken only for
// the same host under the same variables.
func TestKeptConnectionsOnlyWhenSound(t *testing.T) {
	run := func(t *testing.T, c engine.Connector, inv string, vars ...string) *engine.Result {
		return engine.Run(context.Background(), connectionsRequest(t, engine.ModePlan, c, inv, vars...))
	}
	t.Run("reused", func(t *testing.T) {
		d := &dialCounter{}
		keeper := engine.NewConnections()
		defer keeper.Close()
		conns := keeper.Connector(d)
		require.False(t, run(t, conns, "win01\n").Failed())
		require.False(t, run(t, conns, "win01\n").Failed())
		dials, _ := d.counts()
		assert.Equal(t, 1, dials)
	})
	t.Run("failed host", func(t *testing.T) {
		d := &dialCounter{}
		keeper := engine.NewConnections()
		defer keeper.Close()
		conns := keeper.Connector(d)
		require.True(t, run(t, conns, "win01\n", "ok=false").Failed())
		dials, closed := d.counts()
		assert.Equal(t, [2]int{1, 1}, [2]int{dials, closed}, "a failed host's connection is closed, not kept")
		require.False(t, run(t, conns, "win01\n").Failed())
		dials, _ = d.counts()
		assert.Equal(t, 2, dials)
	})
	t.Run("other variables", func(t *testing.T) {
		d := &dialCounter{}
		keeper := engine.NewConnections()
		defer keeper.Close()
		conns := keeper.Connector(d)
		require.False(t, run(t, conns, "win01 ansible_user=a\n").Failed())
		require.False(t, run(t, conns, "win01 ansible_user=b\n").Failed())
		dials, _ := d.counts()
		assert.Equal(t, 2, dials)
	})
	t.Run("cancelled run", func(t *testing.T) {
		d := &dialCounter{}
		conns := engine.NewConnections()
		defer conns.Close()
		ctx, cancel := context.WithCancel(context.Background())
		req := connectionsRequest(t, engine.ModePlan, conns.Connector(d), "win01\n")
		req.Hooks = cancelAfter{task: "check", cancel: cancel}
		require.True(t, engine.Run(ctx, req).Failed())
		dials, closed := d.counts()
		assert.Equal(t, [2]int{1, 1}, [2]int{dials, closed}, "a cancelled run's connection is closed, not kept")
	})
	t.Run("closed keeper", func(t *testing.T) {
		d := &dialCounter{}
		conns := engine.NewConnections()
		require.NoError(t, conns.Close())
		require.False(t, run(t, conns.Connector(d), "win01\n").Failed())
		dials, closed := d.counts()
		assert.Equal(t, [2]int{1, 1}, [2]int{dials, closed}, "after Close a run closes its own")
	})
}

// cancelAfter cancels the run when task starts.
type cancelAfter struct {
	task   string
	cancel context.CancelFunc
}

func (c cancelAfter) Event(ev engine.Event) {
	if ev.Type == engine.EventTaskStart && ev.Address == `task["`+c.task+`"]` {
		c.cancel()
	}
}
