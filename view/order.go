package view

import (
	"sort"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine"
)

// playOrder makes a plan's text the same on every run. Hosts run a play's
// tasks independently, so their results arrive in whatever order the hosts
// happen to finish; a plan is read and compared, so the human view holds
// a play's results until the play ends and prints them task by task, and
// within a task host by host in the play's (inventory) order: batch, then
// tasks before handlers, then the task's place in the play, then the host,
// then arrival (a host's for_each instances, and a warning before the
// result it came with). Apply prints as it goes: its order is what
// happened, and a long rollout must show progress.
type playOrder struct {
	hostPos map[string]int // host -> place in the play's hosts
	batch   map[string]int // host -> its batch
	current map[string]orderKey
	held    []heldEvent
	seq     int
}

// orderKey places an event within its play.
type orderKey struct {
	batch, handler, index, host int
}

type heldEvent struct {
	key orderKey
	seq int
	e   engine.Event
}

// begin starts a play: its hosts and batches give the order.
func (o *playOrder) begin(e engine.Event) {
	o.hostPos, o.batch, o.current = map[string]int{}, map[string]int{}, map[string]orderKey{}
	for i, h := range e.Hosts {
		o.hostPos[h] = i
	}
	for b, hosts := range e.Batches {
		for _, h := range hosts {
			o.batch[h] = b
		}
	}
}

// started notes the task a host is at, for the events it raises before
// its result (a connection warning).
func (o *playOrder) started(e engine.Event) {
	if o.hostPos == nil || e.Host == "" {
		return
	}
	o.current[e.Host] = o.key(e)
}

func (o *playOrder) key(e engine.Event) orderKey {
	k := orderKey{batch: o.batch[e.Host], index: e.Index, host: o.hostPos[e.Host]}
	if e.Handler {
		k.handler = 1
	}
	return k
}

// hold keeps a host's event of the current play for release; other
// events (a play starting, a run-wide diagnostic, the recap) end it.
func (o *playOrder) hold(e engine.Event) bool {
	if o.hostPos == nil || e.Host == "" {
		return false
	}
	if _, ok := o.hostPos[e.Host]; !ok {
		return false
	}
	k, ok := o.current[e.Host]
	if e.Index > 0 {
		k, ok = o.key(e), true
	}
	if !ok {
		k = orderKey{batch: o.batch[e.Host], host: o.hostPos[e.Host]}
	}
	o.current[e.Host] = k
	o.seq++
	o.held = append(o.held, heldEvent{key: k, seq: o.seq, e: e})
	return true
}

// release returns the held events in order and ends the play.
func (o *playOrder) release() []engine.Event {
	held := o.held
	o.held, o.hostPos, o.batch, o.current = nil, nil, nil, nil
	sort.SliceStable(held, func(i, j int) bool {
		a, b := held[i].key, held[j].key
		if a != b {
			if a.batch != b.batch {
				return a.batch < b.batch
			}
			if a.handler != b.handler {
				return a.handler < b.handler
			}
			if a.index != b.index {
				return a.index < b.index
			}
			return a.host < b.host
		}
		return held[i].seq < held[j].seq
	})
	out := make([]engine.Event, len(held))
	for i, h := range held {
		out[i] = h.e
	}
	return out
}

// sortDiagnostics orders diagnostics by file, line and column, so a
// playbook with several mistakes lists them the same way every time and
// in the order an editor shows them. Diagnostics without a location keep
// their order and come first: they are about the run as a whole.
func sortDiagnostics(diags hcl.Diagnostics) hcl.Diagnostics {
	out := append(hcl.Diagnostics(nil), diags...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Subject, out[j].Subject
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		case a.Start.Line != b.Start.Line:
			return a.Start.Line < b.Start.Line
		}
		return a.Start.Column < b.Start.Column
	})
	return out
}
