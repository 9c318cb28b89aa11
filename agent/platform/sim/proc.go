package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wsu-project/wsu/host"
)

// Synthetic pids start above Linux's PID_MAX_LIMIT (2^22), so they never
// collide with a real process in the same list. They step by 4 as Windows
// pids do.
const (
	firstSyntheticPID = 1<<22 + 4
	pollInterval      = 20 * time.Millisecond
	// killWait bounds how long Kill waits for a killed process to go.
	killWait = 5 * time.Second
)

// alive reports whether the process still runs; a synthetic one runs until
// it is killed or its service stopped.
func (r procRecord) alive() bool {
	if !r.Real {
		return true
	}
	start, running, err := procStat(r.PID)
	return err == nil && running && start == r.Start
}

func (p *procTable) nextPID() int {
	if p.NextPID < firstSyntheticPID {
		p.NextPID = firstSyntheticPID
	}
	pid := p.NextPID
	p.NextPID += 4
	return pid
}

// remove drops the records for which drop is true and says how many.
func (t *tx) removeProcs(drop func(procRecord) bool) (int, error) {
	p, err := t.processes()
	if err != nil {
		return 0, err
	}
	n := len(p.Procs)
	p.Procs = slices.DeleteFunc(p.Procs, drop)
	if len(p.Procs) != n {
		t.mark(tProcesses)
	}
	return n - len(p.Procs), nil
}

// terminate ends a real process: SIGTERM first when graceful (a service
// stop), SIGKILL once grace has passed, then waits for it to be gone until
// deadline (zero: only ctx bounds the wait). Its group goes too, so a
// service's children do not outlive it.
func terminate(ctx context.Context, r procRecord, graceful bool, grace time.Duration, deadline time.Time) error {
	if !r.alive() {
		return nil
	}
	sig := syscall.SIGKILL
	if graceful {
		sig = syscall.SIGTERM
	}
	if err := signalGroup(r.PID, sig); err != nil {
		return fmt.Errorf("signal pid %d: %w", r.PID, err)
	}
	killAt := time.Now().Add(grace)
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for r.alive() {
		if sig != syscall.SIGKILL && !time.Now().Before(killAt) {
			sig = syscall.SIGKILL
			if err := signalGroup(r.PID, sig); err != nil {
				return fmt.Errorf("signal pid %d: %w", r.PID, err)
			}
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return fmt.Errorf("process %d (%s) did not exit in time", r.PID, r.Image)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	// The leader is gone; sweep what is left of its group.
	_ = signalGroup(r.PID, syscall.SIGKILL)
	return nil
}

// ListProcesses lists the running services' processes and any recorded
// with AddProcess, by pid.
func (h *Host) ListProcesses(ctx context.Context) ([]host.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []host.Process
	err := h.view(func(t *tx) error {
		p, err := t.processes()
		if err != nil {
			return err
		}
		for _, r := range p.Procs {
			if r.alive() {
				out = append(out, host.Process{PID: r.PID, Image: r.Image})
			}
		}
		return nil
	})
	slices.SortFunc(out, func(a, b host.Process) int { return a.PID - b.PID })
	return out, err
}

// Kill terminates by pid, or every process with the image name (ignoring
// case) when pid is 0; real processes are killed for real. A service whose
// process is killed is stopped.
func (h *Host) Kill(ctx context.Context, pid int, image string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if pid <= 0 && image == "" {
		return 0, errors.New("kill: neither pid nor image given")
	}
	match := func(r procRecord) bool {
		if pid > 0 {
			return r.PID == pid
		}
		return strings.EqualFold(r.Image, image)
	}
	var real []procRecord
	n := 0
	err := h.update(func(t *tx) error {
		p, err := t.processes()
		if err != nil {
			return err
		}
		for _, r := range p.Procs {
			if match(r) && r.Real {
				real = append(real, r)
			}
		}
		n, err = t.removeProcs(func(r procRecord) bool { return match(r) && !r.Real })
		return err
	})
	if err != nil {
		return n, fmt.Errorf("kill: %w", err)
	}
	deadline := time.Now().Add(killWait)
	for _, r := range real {
		if !r.alive() {
			continue // exited meanwhile: not ours to count
		}
		if err := terminate(ctx, r, false, 0, deadline); err != nil {
			return n, fmt.Errorf("kill: %w", err)
		}
		n++
	}
	return n, nil
}

// AddProcess records a process, for test harnesses and stand-in binaries
// (e.g. a leftover containerd-shim-runhcs-v1.exe for removal to kill). With
// PID 0 the process is synthetic and gets a pid; otherwise PID must be a
// live Linux process, which Kill will then really kill.
func (h *Host) AddProcess(p host.Process) (host.Process, error) {
	if p.Image == "" {
		return host.Process{}, errors.New("add process: empty image name")
	}
	rec := procRecord{PID: p.PID, Image: p.Image}
	if p.PID > 0 {
		start, running, err := procStat(p.PID)
		if err != nil || !running {
			return host.Process{}, fmt.Errorf("add process: pid %d is not a running process", p.PID)
		}
		rec.Real, rec.Start = true, start
	}
	err := h.update(func(t *tx) error {
		pt, err := t.processes()
		if err != nil {
			return err
		}
		if rec.PID == 0 {
			rec.PID = pt.nextPID()
		} else if slices.ContainsFunc(pt.Procs, func(r procRecord) bool { return r.PID == rec.PID }) {
			return fmt.Errorf("add process: pid %d is already recorded", rec.PID)
		}
		pt.Procs = append(pt.Procs, rec)
		t.mark(tProcesses)
		return nil
	})
	if err != nil {
		return host.Process{}, err
	}
	return host.Process{PID: rec.PID, Image: rec.Image}, nil
}

// Shutdown simulates powering the host off: every process is killed, so
// every service is stopped; files, registry and HNS stay. Test harnesses
// call it in cleanup so that no real child outlives them.
func (h *Host) Shutdown(ctx context.Context) error {
	var real []procRecord
	err := h.update(func(t *tx) error {
		p, err := t.processes()
		if err != nil {
			return err
		}
		for _, r := range p.Procs {
			if r.Real {
				real = append(real, r)
			}
		}
		_, err = t.removeProcs(func(r procRecord) bool { return !r.Real })
		return err
	})
	deadline := time.Now().Add(killWait)
	for _, r := range real {
		err = errors.Join(err, terminate(ctx, r, false, 0, deadline))
	}
	return err
}
