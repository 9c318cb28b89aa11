//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/wsu-project/wsu/test/harness"
)

// joinResult is one `wsu apply join` run, from its events and rusage.
type joinResult struct {
	wall time.Duration
	// cpu is the wsu process's user and system time.
	cpu time.Duration
	// bytesSent and rpcs are the recap's totals over the hosts.
	bytesSent, rpcs int64
	// agentPerHost is the agent binary uploaded, per host (recap
	// agent_bytes over the hosts / hosts).
	agentPerHost int64
	// copyWall is how long any win_copy task was running (the union of
	// their intervals over all hosts); copyBytes what they sent.
	copyWall  time.Duration
	copyBytes int64
	maxRSS    int64 // bytes
	changed   int
	// split is where the wall time went (with --split).
	split *phases
	// RPCs per task instance: over unchanged instances when there are
	// any (the no-op re-run), else over all metered ones.
	perTask taskRPCs
	// tasks are the run's task_result events.
	tasks []event
}

// taskRPCs summarises round trips per task instance.
type taskRPCs struct {
	instances int
	max       int64
	mean      float64
	// over are the tasks whose instances took more than one round trip.
	over []string
}

// event is a task_result or recap line with the fields the bench reads.
type event struct {
	Type       string           `json:"type"`
	Time       time.Time        `json:"time"`
	Play       string           `json:"play"`
	Host       string           `json:"host"`
	Address    string           `json:"address"`
	Module     string           `json:"module"`
	Status     string           `json:"status"`
	DurationMS int64            `json:"duration_ms"`
	RPCs       *int64           `json:"rpcs"`
	RPCsByOp   map[string]int64 `json:"rpcs_by_op"`
	BytesSent  int64            `json:"bytes_sent"`
}

// phases split a run's wall time; they add up to it.
type phases struct {
	// start is exec to wsu's main: the runtime and every package's init.
	start time.Duration
	// load is main to the engine's start: flags, playbooks, inventory,
	// variables.
	load time.Duration
	// connect is while any host was connecting (the union of the
	// connections' intervals): dial, SSH handshake, authentication, the
	// agent's check and start.
	connect time.Duration
	// tasks is the rest of the engine run: every task, on every host.
	tasks time.Duration
	// exit is the engine's end to the process's exit seen here.
	exit time.Duration
}

// wsuTimings is what wsu's hidden --timings writes (cmd/wsu/timings.go).
type wsuTimings struct {
	Main     time.Time `json:"main"`
	RunStart time.Time `json:"run_start"`
	RunEnd   time.Time `json:"run_end"`
	Connects []struct {
		Start time.Time `json:"start"`
		End   time.Time `json:"end"`
	} `json:"connects"`
}

// split divides the wall time from start to end by t.
func split(t wsuTimings, start, end time.Time) *phases {
	spans := make([]span, len(t.Connects))
	for i, c := range t.Connects {
		spans[i] = span{c.Start, c.End}
	}
	p := &phases{start: t.Main.Sub(start), load: t.RunStart.Sub(t.Main), connect: union(spans), exit: end.Sub(t.RunEnd)}
	p.tasks = t.RunEnd.Sub(t.RunStart) - p.connect
	return p
}

// runJoin runs wsu with args (apply join --limit the hosts) and reads
// what it cost. A run that fails is an error.
// With events set, the JSON events are kept in that file; with withSplit,
// wsu's --timings split the wall time.
func runJoin(ctx context.Context, env *harness.Env, hosts []*harness.Host, args []string, events string, withSplit bool) (*joinResult, error) {
	cmd := func(args []string) *exec.Cmd { return env.Cmd(ctx, append(args, "-o", "json")...) }
	return runJoinCmd(ctx, cmd, hosts, args, events, withSplit)
}

// runJoinCmd is runJoin for a command made by cmd from the arguments (a
// node-only join's, with its own inputs and environment).
func runJoinCmd(ctx context.Context, cmd func(args []string) *exec.Cmd, hosts []*harness.Host, args []string, events string, withSplit bool) (*joinResult, error) {
	var timingsFile string
	if withSplit {
		f, err := os.CreateTemp("", "wsu-bench-timings-")
		if err != nil {
			return nil, err
		}
		f.Close()
		defer os.Remove(f.Name())
		timingsFile = f.Name()
		args = append(args[:len(args):len(args)], "--timings", timingsFile)
	}
	start := time.Now()
	r, err := harness.RunCmdJSON(cmd(args), nil)
	end := time.Now()
	wall := end.Sub(start)
	if err != nil {
		return nil, err
	}
	if events != "" {
		if err := os.WriteFile(events, []byte(r.Stdout), 0o644); err != nil {
			return nil, err
		}
	}
	if r.ExitCode != 0 {
		return nil, fmt.Errorf("wsu %s exited %d:\n%s", strings.Join(args, " "), r.ExitCode, r.Failures())
	}
	jr := &joinResult{wall: wall}
	if withSplit {
		var t wsuTimings
		b, err := os.ReadFile(timingsFile)
		if err == nil {
			err = json.Unmarshal(b, &t)
		}
		if err != nil {
			return nil, fmt.Errorf("wsu --timings: %w", err)
		}
		jr.split = split(t, start, end)
	}
	if ru, ok := r.ProcessState.SysUsage().(*syscall.Rusage); ok {
		jr.maxRSS = ru.Maxrss << 10 // kilobytes on Linux
		jr.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	for _, h := range hosts {
		rc, ok := r.Recap(h.Name)
		if !ok {
			return nil, fmt.Errorf("no recap line for %s", h.Name)
		}
		jr.bytesSent += rc.BytesSent
		jr.rpcs += rc.RPCs
		jr.changed += rc.Changed
		jr.agentPerHost += rc.AgentBytes
	}
	if len(hosts) > 0 {
		jr.agentPerHost /= int64(len(hosts))
	}
	var tasks []event
	for _, ev := range r.Events {
		if ev.Type != "task_result" {
			continue
		}
		var e event
		if err := json.Unmarshal(ev.Raw, &e); err != nil {
			return nil, err
		}
		tasks = append(tasks, e)
	}
	jr.tasks = tasks
	jr.copyWall, jr.copyBytes = copyPhase(tasks)
	jr.perTask = perTask(tasks)
	return jr, nil
}

// span is an interval of time.
type span struct{ from, to time.Time }

// copyPhase is the union of the win_copy tasks' intervals, and their bytes.
func copyPhase(tasks []event) (time.Duration, int64) {
	var spans []span
	var sent int64
	for _, e := range tasks {
		if e.Module != "win_copy" {
			continue
		}
		sent += e.BytesSent
		spans = append(spans, span{e.Time.Add(-time.Duration(e.DurationMS) * time.Millisecond), e.Time})
	}
	return union(spans), sent
}

// union is how long any of the spans covers.
func union(spans []span) time.Duration {
	sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
	var total time.Duration
	var cur span
	for i, s := range spans {
		switch {
		case i == 0:
			cur = s
		case s.from.After(cur.to):
			total += cur.to.Sub(cur.from)
			cur = s
		case s.to.After(cur.to):
			cur.to = s.to
		}
	}
	if len(spans) > 0 {
		total += cur.to.Sub(cur.from)
	}
	return total
}

// perTask summarises the metered task instances' round trips: the
// unchanged ones when there are any, else all.
func perTask(tasks []event) taskRPCs {
	var metered, unchanged []event
	for _, e := range tasks {
		if e.RPCs == nil {
			continue
		}
		metered = append(metered, e)
		if e.Status == "ok" {
			unchanged = append(unchanged, e)
		}
	}
	use := metered
	if len(unchanged) > 0 {
		use = unchanged
	}
	var t taskRPCs
	var sum int64
	overOps := map[string]string{}
	for _, e := range use {
		n := *e.RPCs
		t.instances++
		sum += n
		t.max = max(t.max, n)
		if n > 1 {
			key := fmt.Sprintf("%s/%s (%s)", e.Play, e.Address, e.Module)
			ops := make([]string, 0, len(e.RPCsByOp))
			for op, k := range e.RPCsByOp {
				ops = append(ops, fmt.Sprintf("%s×%d", op, k))
			}
			slices.Sort(ops)
			overOps[key] = fmt.Sprintf("%d: %s", n, strings.Join(ops, " "))
		}
	}
	if t.instances > 0 {
		t.mean = float64(sum) / float64(t.instances)
	}
	for k, v := range overOps {
		t.over = append(t.over, k+" "+v)
	}
	slices.Sort(t.over)
	return t
}
