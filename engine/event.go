package engine

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/notify"
)

// EventSchema versions the event stream (`--output json`). Add fields freely;
// bump it only when a field changes meaning or goes away.
const EventSchema = "wsu.event/v1"

// EventType tells what an Event reports.
type EventType string

const (
	EventRunStart     EventType = "run_start"
	EventPlayStart    EventType = "play_start"
	EventTaskStart    EventType = "task_start"
	EventTaskResult   EventType = "task_result"
	EventTaskRetry    EventType = "task_retry"
	EventUnreachable  EventType = "host_unreachable"
	EventReconnecting EventType = "host_reconnecting"
	EventHostWarning  EventType = "host_warning"
	EventConnectRetry EventType = "host_connect_retry"
	EventHostFailed   EventType = "host_failed"
	EventPlayAborted  EventType = "play_aborted"
	EventPlayNotRun   EventType = "play_not_run"
	EventDiagnostic   EventType = "diagnostic"
	EventRecap        EventType = "recap"
	EventRunCancelled EventType = "run_cancelled"
	// EventPlayOutline is --list-hosts and --list-tasks under -o json:
	// one per play, in run order; no host is touched.
	EventPlayOutline EventType = "play_outline"
)

// Status is a task's outcome on one host.
type Status string

const (
	StatusOK      Status = "ok"      // already in the desired state
	StatusChanged Status = "changed" // changed (apply) or will change (plan)
	StatusFailed  Status = "failed"
	StatusIgnored Status = "ignored" // failed, but ignore_errors was set
	StatusSkipped Status = "skipped" // when was false, or a tag filter excluded it
	// StatusDeferred: during plan, whether or how the task runs depends on a
	// value known only after apply.
	StatusDeferred Status = "deferred"
)

// Event is one thing that happened during a run. Events carry rendered values
// only: sensitive values have already become "(sensitive)".
type Event struct {
	Schema  string    `json:"@schema"`
	Type    EventType `json:"type"`
	Time    time.Time `json:"time"`
	Mode    Mode      `json:"mode,omitempty"`
	Play    string    `json:"play,omitempty"`
	Host    string    `json:"host,omitempty"`
	Task    string    `json:"task,omitempty"`
	Address string    `json:"address,omitempty"`
	// Key is the for_each key of this task instance.
	Key     string      `json:"key,omitempty"`
	Module  string      `json:"module,omitempty"`
	Handler bool        `json:"handler,omitempty"`
	Status  Status      `json:"status,omitempty"`
	Change  *ChangeView `json:"change,omitempty"`
	// Message is what a task asks to show (print's msg).
	Message string `json:"message,omitempty"`
	// Attempts is a task's attempts (task_result), or the number of the
	// attempt that failed (task_retry, host_connect_retry).
	Attempts int `json:"attempts,omitempty"`
	// RetryInMS is how long wsu waits before the next attempt: the task's
	// delay (task_retry) or the transport's (host_connect_retry).
	RetryInMS   int64            `json:"retry_in_ms,omitempty"`
	DurationMS  int64            `json:"duration_ms,omitempty"`
	Hosts       []string         `json:"hosts,omitempty"`
	Batches     [][]string       `json:"batches,omitempty"`
	Diagnostics []DiagnosticView `json:"diagnostics,omitempty"`
	Recap       []HostRecap      `json:"recap,omitempty"`
	// Tasks are a play_outline's tasks (--list-tasks).
	Tasks []TaskOutline `json:"tasks,omitempty"`
	// Failed, on a recap, says the run failed: an error stopped it or a
	// host failed or was unreachable.
	Failed bool `json:"failed,omitempty"`
	// NothingChecked, on a recap of a run that touched no host, says why
	// (the inventory is empty, no play's hosts matched a host).
	NothingChecked string `json:"nothing_checked,omitempty"`
	// Index and Count place a task in its play for progress displays.
	Index int `json:"index,omitempty"`
	Count int `json:"count,omitempty"`
	// Traffic is what a task_result's task cost on the wire; nil unless
	// the task acted on a host through a metered transport.
	*Traffic

	// traffic, when set, measures the task's Traffic at emission.
	traffic func() *Traffic
}

// Traffic is what acting on a host cost, from its transport's counters
// (host.Metered): agent round trips and file content sent. Its JSON fields
// appear only for metered transports, so "rpcs": 0 means none were made,
// never "not measured".
type Traffic struct {
	RPCs int64 `json:"rpcs"`
	// RPCsByOp splits RPCs by agent op (fs.stat, svc.query...).
	RPCsByOp map[string]int64 `json:"rpcs_by_op,omitempty"`
	// BytesSent is file content sent to the host (fs.write streams and
	// transport uploads of playbook files), not process stdin or framing.
	BytesSent int64 `json:"bytes_sent"`
	// AgentBytes is the agent binary uploaded when a transport deployed it.
	AgentBytes int64 `json:"agent_bytes,omitempty"`
}

func trafficOf(c host.Counters) *Traffic {
	return &Traffic{RPCs: c.RPCs, RPCsByOp: c.RPCsByOp, BytesSent: c.BytesSent, AgentBytes: c.AgentBytes}
}

// ChangeView is a module's Change with every value rendered for display;
// a saved plan keeps it as it was shown (planfile.Change).
type ChangeView = planfile.Change

// FieldView is one rendered attribute change. Old is empty for a created
// attribute, New for a removed one.
type FieldView = planfile.Field

// DiagnosticView is an hcl.Diagnostic flattened for events.
type DiagnosticView struct {
	Severity string     `json:"severity"`
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail,omitempty"`
	Range    *RangeView `json:"range,omitempty"`
}

// RangeView is a source location.
type RangeView struct {
	Filename string `json:"filename"`
	Line     int    `json:"line"`
	Column   int    `json:"column"`
}

// HostRecap counts a host's task outcomes, like Ansible's PLAY RECAP.
type HostRecap struct {
	Host        string `json:"host"`
	OK          int    `json:"ok"`
	Changed     int    `json:"changed"`
	Failed      int    `json:"failed"`
	Skipped     int    `json:"skipped"`
	Unreachable int    `json:"unreachable"`
	Ignored     int    `json:"ignored"`
	Deferred    int    `json:"deferred,omitempty"`
	// Facts are what the host reported of itself when wsu first connected
	// to it (hostname, addresses, OS build); nil if it never connected.
	// Not in the JSON stream (it would make output machine-dependent): for
	// callers of Run such as the controller.
	Facts *host.Facts `json:"-"`
	// Traffic is the host's total over the run, reconnects included, and
	// connection set-up (facts, agent deployment) too; nil when its
	// transport is not metered.
	*Traffic
}

// Hooks receive events. Run calls Event from several goroutines at once.
type Hooks interface {
	Event(Event)
}

// HooksFunc adapts a function to Hooks.
type HooksFunc func(Event)

// Event implements Hooks.
func (f HooksFunc) Event(e Event) { f(e) }

// notifier turns what a transport reports while connecting to a host into
// events: warnings become host_warning, failed attempts that will be
// retried host_connect_retry.
func (r *runner) notifier(hostName string) notify.Func {
	return func(n notify.Notice) {
		e := Event{Host: hostName, Message: n.Summary}
		switch n.Kind {
		case notify.Retry:
			e.Type = EventConnectRetry
			e.Attempts = n.Attempt
			e.RetryInMS = n.Wait.Milliseconds()
			if n.Err != nil {
				e.Diagnostics = []DiagnosticView{{Severity: "warning", Summary: fmt.Sprintf("Connection attempt %d failed", n.Attempt), Detail: n.Err.Error()}}
			}
		default:
			e.Type = EventHostWarning
			e.Diagnostics = []DiagnosticView{{Severity: "warning", Summary: n.Summary, Detail: n.Detail}}
		}
		r.emit(e)
	}
}

// DiagViews flattens diagnostics for events.
func DiagViews(diags hcl.Diagnostics) []DiagnosticView {
	out := make([]DiagnosticView, 0, len(diags))
	for _, d := range diags {
		dv := DiagnosticView{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			dv.Severity = "warning"
		}
		if d.Subject != nil {
			dv.Range = &RangeView{Filename: d.Subject.Filename, Line: d.Subject.Start.Line, Column: d.Subject.Start.Column}
		}
		out = append(out, dv)
	}
	return out
}
