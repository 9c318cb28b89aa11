package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
)

// Connections keeps hosts' connections open across the consecutive runs of
// one request: the plan an approver reads, the plan again that checks it
// (Request.Expect), the apply. Each run would otherwise dial every host
// again — an SSH handshake, the agent's check, its facts — which for a
// one-host join is most of the time the plan takes.
//
// A run that ends gives each host's connection back instead of closing it,
// unless the host failed or was unreachable in that run or the connection
// was lost (the next run dials afresh, as a new run would). The next run
// takes it back only for the same host with the same inventory variables:
// a redial with other variables (another user, another key) always dials.
// Nothing is shared between runs going on at once: a connection is either
// in one run or kept here. Close closes what is kept; the caller that made
// the Connections closes it when its sequence of runs is over.
//
// Each run's Request.Connector is Connector(its own connector): a run
// dials through its own transports, and only what it dialled is kept.
type Connections struct {
	mu     sync.Mutex
	kept   map[string]keptConn // by host name
	closed bool
}

type keptConn struct {
	vars map[string]inventory.Var
	conn host.Host
	// counted is what conn had counted when kept: the next run counts
	// from there.
	counted host.Counters
}

// NewConnections makes an empty keeper.
func NewConnections() *Connections {
	return &Connections{kept: map[string]keptConn{}}
}

// Connector is base with c's kept connections in front: the
// Request.Connector of a run that shares them.
func (c *Connections) Connector(base Connector) Connector {
	return &keptConnector{conns: c, base: base}
}

// keptConnector is a run's connector over a Connections.
type keptConnector struct {
	conns *Connections
	base  Connector
}

// Connect implements Connector: a kept connection to t when there is one,
// else a new one.
func (k *keptConnector) Connect(ctx context.Context, t Target) (host.Host, error) {
	h, _, err := k.connect(ctx, t)
	return h, err
}

// connect is Connect with what the connection had counted before (zero
// for a new one).
func (k *keptConnector) connect(ctx context.Context, t Target) (host.Host, host.Counters, error) {
	if kc, ok := k.conns.take(t); ok {
		return kc.conn, kc.counted, nil
	}
	if k.base == nil {
		return nil, host.Counters{}, errors.New("no transport configured")
	}
	h, err := k.base.Connect(ctx, t)
	return h, host.Counters{}, err
}

// take removes and returns the connection kept for t, or nil: only one
// to t's host under the same variables (a redial with others leaves it).
// A kept connection found lost is closed.
func (c *Connections) take(t Target) (keptConn, bool) {
	c.mu.Lock()
	k, ok := c.kept[t.Name]
	if ok && sameVars(k.vars, t.Vars) {
		delete(c.kept, t.Name)
	} else {
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return keptConn{}, false
	}
	if lost(k.conn) {
		k.conn.Close()
		return keptConn{}, false
	}
	return k, true
}

// keep takes back a run's connection to t; false when it was not kept
// (Close was called, or one is kept already), and the caller closes it.
func (c *Connections) keep(t Target, h host.Host) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if _, ok := c.kept[t.Name]; ok {
		return false
	}
	k := keptConn{vars: t.Vars, conn: h}
	if m, ok := h.(host.Metered); ok {
		k.counted = m.Counters()
	}
	c.kept[t.Name] = k
	return true
}

// Close closes every kept connection; a run ending later closes its own.
func (c *Connections) Close() error {
	c.mu.Lock()
	kept := c.kept
	c.kept, c.closed = nil, true
	c.mu.Unlock()
	var errs []error
	for _, k := range kept {
		errs = append(errs, k.conn.Close())
	}
	return errors.Join(errs...)
}

// sameVars reports whether two hosts' inventory variables are the same
// values (their source ranges aside).
func sameVars(a, b map[string]inventory.Var) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !av.Value.RawEquals(bv.Value) {
			return false
		}
	}
	return true
}
