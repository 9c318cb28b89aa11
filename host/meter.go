package host

import (
	"context"
	"sync"
	"sync/atomic"
)

// Metered is implemented by hosts that count what they cost on the wire:
// the agent client and the transports built on it. The engine reads it
// before and after each task; a host that is not Metered (the in-process
// local transport) has no such cost to report.
type Metered interface {
	// Counters returns the totals since the connection was made. The
	// counters only grow, so the difference of two snapshots is what
	// happened in between.
	Counters() Counters
}

// Counters is a connection's traffic.
type Counters struct {
	// RPCs counts agent round trips (a request sent, whatever the answer).
	RPCs int64
	// RPCsByOp splits RPCs by op name (proto.OpStat...); ops never used
	// are absent.
	RPCsByOp map[string]int64
	// BytesSent counts file content sent to the host: fs.write streams and
	// any transport-level upload of files a playbook writes. Process stdin
	// and protocol framing are not counted.
	BytesSent int64
	// AgentBytes counts the agent binary uploaded when the transport
	// (re)deployed it, kept apart so a re-run's payload traffic can be 0.
	AgentBytes int64
}

// Add returns c + o.
func (c Counters) Add(o Counters) Counters {
	out := Counters{RPCs: c.RPCs + o.RPCs, BytesSent: c.BytesSent + o.BytesSent, AgentBytes: c.AgentBytes + o.AgentBytes}
	out.RPCsByOp = mergeOps(c.RPCsByOp, o.RPCsByOp, 1)
	return out
}

// Sub returns c - prev: the traffic since prev was taken. Ops with no
// calls in between are left out.
func (c Counters) Sub(prev Counters) Counters {
	out := Counters{RPCs: c.RPCs - prev.RPCs, BytesSent: c.BytesSent - prev.BytesSent, AgentBytes: c.AgentBytes - prev.AgentBytes}
	out.RPCsByOp = mergeOps(c.RPCsByOp, prev.RPCsByOp, -1)
	return out
}

func mergeOps(a, b map[string]int64, sign int64) map[string]int64 {
	var out map[string]int64
	put := func(op string, n int64) {
		if n == 0 {
			return
		}
		if out == nil {
			out = map[string]int64{}
		}
		out[op] = n
	}
	for op, n := range a {
		put(op, n+sign*b[op])
	}
	for op, n := range b {
		if _, ok := a[op]; !ok {
			put(op, sign*n)
		}
	}
	return out
}

// Meter keeps Counters for one connection. It is safe for concurrent use
// and cheap on the hot path: atomic adds, and after an op's first call a
// lock-free map load. The zero value is ready to use.
type Meter struct {
	rpcs, bytesSent, agentBytes atomic.Int64
	ops                         sync.Map // op name → *atomic.Int64
}

// RPC counts one round trip of op.
func (m *Meter) RPC(op string) {
	m.rpcs.Add(1)
	n, ok := m.ops.Load(op)
	if !ok {
		n, _ = m.ops.LoadOrStore(op, new(atomic.Int64))
	}
	n.(*atomic.Int64).Add(1)
}

// Sent counts n bytes of file content sent to the host.
func (m *Meter) Sent(n int64) { m.bytesSent.Add(n) }

// AgentSent counts n bytes of agent binary uploaded.
func (m *Meter) AgentSent(n int64) { m.agentBytes.Add(n) }

// Counters implements Metered. Calls running meanwhile may be counted in
// one field and not yet in another; snapshots taken between tasks, when a
// host is idle, are exact.
func (m *Meter) Counters() Counters {
	c := Counters{RPCs: m.rpcs.Load(), BytesSent: m.bytesSent.Load(), AgentBytes: m.agentBytes.Load()}
	m.ops.Range(func(k, v any) bool {
		if c.RPCsByOp == nil {
			c.RPCsByOp = map[string]int64{}
		}
		c.RPCsByOp[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return c
}

// meterKey is the context key of WithMeter.
type meterKey struct{}

// WithMeter returns ctx carrying m: a Metered host counts the calls made
// with that context in m as well as in its connection's totals. The engine
// gives each task instance that shares its connection with others running
// at once (a task's for_each `parallelism`) its own Meter this way, since
// the connection's totals then mix the instances.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// ContextMeter is the Meter WithMeter put in ctx, or nil.
func ContextMeter(ctx context.Context) *Meter {
	m, _ := ctx.Value(meterKey{}).(*Meter)
	return m
}
