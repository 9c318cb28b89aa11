package run

import (
	"context"
	"crypto/sha256"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/transport/agentbin"
	sshtransport "github.com/wsu-project/wsu/transport/ssh"
)

// Request is one playbook run for one instance: the run as setup takes
// it (setup.Request: mode, playbook, vars and var files, the instance's
// one-host inventory, Kubeconfig for its cluster tasks, the confinement of
// a site playbook, the instance's plan salt, the plan hash an apply is
// held to), which is also what a Job's pod receives, and what only the
// controller's side of a run needs.
type Request struct {
	setup.Request
	// Instance names the WindowsInstance (NAMESPACE/NAME), for logs and
	// Jobs.
	Instance string
	// Expect makes an apply refuse unless a fresh plan matches it: the
	// plan an admin approved. ExpectHash (setup.Request) is its hash: a
	// runner that does not get the plan itself back from a plan run
	// (JobRunner) holds the apply to that.
	Expect *planfile.Plan
	// Connections, when set, are host connections kept across this
	// reconcile's runs (its plan and the apply of that plan), so the host
	// is dialled once (engine.Connections). In-process only: a Job's run
	// is a process of its own. Never part of a Job's request.
	Connections *engine.Connections
	// Planned is the outcome of the plan an apply carries out (its hash
	// is ExpectHash): a JobRunner keeps it on the apply's Job, so a pass
	// that resumes the apply records that plan without planning again.
	Planned *Outcome
	// Secrets say which Secrets the run's secret inputs come from, so a
	// runner that must not copy them (JobRunner) hands them over by
	// reference; the in-process runner uses the values in Inventory and
	// Vars.
	Secrets Secrets
}

// Secrets locate a run's secret inputs in their Secrets (in the
// instance's namespace).
type Secrets struct {
	// Key holds the private key the run logs in with (kubeinv.KeyVar).
	Key SecretItem
	// NewKey holds a rotation's new key (kubeinv.NewKeyVar); zero when
	// the run is no rotation.
	NewKey SecretItem
	// Vars: Vars[i] is NAME=VALUE with VALUE from the item Vars[i] (a
	// varsFrom Secret's key).
	Vars map[int]SecretItem
}

// SecretItem is one key of one Secret.
type SecretItem struct{ Secret, Key string }

// Outcome is what a run reports back into the instance's status.
type Outcome struct {
	// Plan is the plan a plan-mode run made (nil from a JobRunner, which
	// reports its Hash only).
	Plan *planfile.Plan
	// Hash identifies Plan (engine.Result.PlanHash).
	Hash string
	// Counts of changed tasks by kind, and their addresses.
	Add, Change, Destroy, Run int
	Tasks                     []string
	// Changed counts changed tasks (apply) or tasks that will change (plan).
	Changed int
	// Facts are what the host reported; nil if it was never reached.
	Facts *host.Facts
	// Unreachable: no connection could be made.
	Unreachable bool
	// LoginRefused: the host refused to authenticate the run's key (one
	// way of Unreachable; the controller's tryOtherKey).
	LoginRefused bool
	// Failed: the run failed (Unreachable included).
	Failed bool
	// Message is the first error, already scrubbed of secrets.
	Message string
	// Pending: the run goes on in a Job (JobRunner) and reports nothing
	// yet; the Job's completion reconciles the instance again, or, when
	// RetryAfter is set, the run waits for room among the running Jobs
	// and is asked for again after it.
	Pending    bool
	RetryAfter time.Duration
	// Took is how long the run took where it ran (a Job's start to its
	// end), when the runner knows it better than the caller's clock.
	Took time.Duration
}

// HoldTo holds an apply to plan: in process by the plan itself, in a Job
// (which reports only its plan's hash) by the hash, which the Job checks
// against a fresh plan before applying.
func (req *Request) HoldTo(plan Outcome) {
	req.Expect, req.ExpectHash, req.Planned = plan.Plan, plan.Hash, &plan
}

// secretVars name the vars whose values came from a varsFrom Secret:
// sensitive in the run whatever the playbook declares, so no plan, event,
// status or log shows them.
func (req Request) secretVars() []string {
	var names []string
	for i := range req.Secrets.Vars {
		if i >= 0 && i < len(req.Vars) {
			name, _, _ := strings.Cut(req.Vars[i], "=")
			names = append(names, strings.TrimSpace(name))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// Runner runs playbooks. The in-process runner is the default; a Job runner
// (one Kubernetes Job per run) implements the same interface.
type Runner interface {
	Run(ctx context.Context, req Request) Outcome
}

// InProcess runs playbooks in the controller's process through package
// setup, as `wsu apply` does. Each run has its own cluster clients and SSH
// passphrases (setup's contract), so runs for different instances may go at
// once.
type InProcess struct {
	// Agents are the agent builds deployed to hosts (the wsu binary's
	// embedded ones); they are the controller's own and the same for every
	// run, so one Source hashes each build once.
	Agents *agentbin.Source
	// Sources are the hashes of the files win_copy sends (the payload),
	// shared by the controller's runs so each is read once, not once per
	// instance and run; bounded, and keyed by each file's path and
	// metadata. nil: each run hashes its own.
	Sources *setup.SourceHashes
	// Trace, when set, sees every event of every run as it happens (make
	// bench keeps them to split the controller's time); nil: none.
	Trace engine.Hooks
}

// Run implements Runner.
func (p InProcess) Run(ctx context.Context, req Request) Outcome {
	rec := &recorder{trace: p.Trace}
	run, diags := setup.Prepare(ctx, setup.Options{
		Request:  req.setup(),
		Hooks:    rec,
		Clusters: kube.NewCache(kube.Defaults{Kubeconfig: req.Kubeconfig}),
		Agents:   p.Agents,
		Sources:  p.Sources,
	})
	if diags.HasErrors() {
		return Outcome{Failed: true, Message: FirstError(diags)}
	}
	run.Request.Expect = req.Expect
	if req.Connections != nil {
		run.Request.Connector = req.Connections.Connector(run.Request.Connector)
	}
	res := engine.Run(ctx, run.Request)
	return rec.outcome(res)
}

// recorder collects what a run's events say about its changes and errors.
type recorder struct {
	mu      sync.Mutex
	out     Outcome
	message string
	trace   engine.Hooks // nil: none
}

// Event implements engine.Hooks.
func (r *recorder) Event(ev engine.Event) {
	if r.trace != nil {
		r.trace.Event(ev)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev.Type {
	case engine.EventTaskResult:
		r.countChange(ev)
		if ev.Status == engine.StatusFailed {
			r.noteError(ev.Address, ev.Diagnostics)
		}
	case engine.EventUnreachable:
		r.out.Unreachable = true
		for _, d := range ev.Diagnostics {
			r.out.LoginRefused = r.out.LoginRefused || strings.Contains(d.Detail, sshtransport.AuthFailureText)
		}
		r.noteError("host unreachable", ev.Diagnostics)
	case engine.EventHostFailed, engine.EventDiagnostic, engine.EventPlayAborted:
		r.noteError(ev.Play, ev.Diagnostics)
	}
}

func (r *recorder) countChange(ev engine.Event) {
	if ev.Status != engine.StatusChanged || ev.Change == nil {
		return
	}
	r.out.Changed++
	switch ev.Change.Action {
	case "create":
		r.out.Add++
	case "update":
		r.out.Change++
	case "delete":
		r.out.Destroy++
	case "replace":
		r.out.Add++
		r.out.Destroy++
	default:
		r.out.Run++
	}
	if len(r.out.Tasks) < maxPlanTasks {
		r.out.Tasks = append(r.out.Tasks, ev.Address)
	}
}

// maxPlanTasks bounds the task list kept in status.
const maxPlanTasks = 50

func (r *recorder) noteError(where string, diags []engine.DiagnosticView) {
	if r.message != "" {
		return
	}
	for _, d := range diags {
		if d.Severity != "error" {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		if where != "" {
			msg = where + ": " + msg
		}
		r.message = msg
		return
	}
}

// outcome completes the recorded outcome with the run's result.
func (r *recorder) outcome(res *engine.Result) Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.out
	out.Failed = res.Failed()
	out.Message = r.message
	if out.Message == "" && res.Failed() {
		out.Message = FirstError(append(res.SetupDiagnostics, res.Diagnostics...))
	}
	if out.Message == "" && res.Cancelled {
		out.Message = "the run was cancelled"
	}
	for _, h := range res.Recap {
		if h.Facts != nil {
			out.Facts = h.Facts
		}
		if h.Unreachable > 0 {
			out.Unreachable = true
		}
	}
	if res.Plan != nil {
		out.Plan, out.Hash = res.Plan, res.PlanHash
	}
	return out
}

// setup is the request as setup takes it, here or in a Job's pod: every
// controller run is confined (a site playbook to its directory and
// ReadDirs, so it cannot read the pod's files), a varsFrom Secret's value
// is sensitive whatever the playbook declares, and its plan hashes are
// keyed by its instance's salt.
func (req Request) setup() setup.Request {
	r := req.Request
	r.Confined = true
	r.SecretVars = req.secretVars()
	if len(r.Salt) == 0 {
		r.Salt = PlanSalt(req.Instance)
	}
	return r
}

// PlanSalt keys the hashes of an instance's plans: the same for every plan
// of one instance, so the same state planned twice gives the same plan
// hash (what an approval names), and different across instances. The
// plans stay in the controller (only their hash travels), so it need not
// be secret.
func PlanSalt(instance string) []byte {
	sum := sha256.Sum256([]byte("wsu controller plan salt\x00" + instance))
	return sum[:]
}

// FirstError is the first error among diags as an outcome's message
// (its summary and detail); the first diagnostic's summary when none is an
// error.
func FirstError(diags hcl.Diagnostics) string {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			if d.Detail != "" {
				return d.Summary + ": " + d.Detail
			}
			return d.Summary
		}
	}
	if len(diags) > 0 {
		return diags[0].Summary
	}
	return ""
}

// Truncate bounds a message kept in status and events.
func Truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n-- // never cut a character in two
	}
	return s[:n] + "…"
}
