//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// goals are issue 16's, per host count: one host, a few (stated for 10;
// applied up to 10), or a fleet (stated for 100; applied above 10).
type goals struct {
	// coldWall bounds the whole cold join (0: no goal at this count).
	coldWall time.Duration
	// streamRatio bounds the cold join's copy phase / one ssh stream per
	// host.
	streamRatio float64
	noopWall    time.Duration // no-op re-run
	// maxRSS bounds wsu's peak RSS (0: no goal at this count).
	maxRSS int64
}

func goalsFor(hosts int) goals {
	switch {
	case hosts == 1:
		return goals{streamRatio: 1.1, noopWall: 100 * time.Millisecond}
	case hosts <= 10:
		g := goals{streamRatio: 1.1, noopWall: 250 * time.Millisecond}
		if hosts == 10 {
			g.coldWall = 8 * time.Second
		}
		return g
	}
	return goals{streamRatio: 1.1, noopWall: 3 * time.Second, maxRSS: 150e6}
}

const (
	maxRPCPerUnchangedTask = 1
	minWinRMMBps           = 10
)

// printTable prints one Markdown table of every measurement (medians over
// the runs) with the goals, then the details a MISS needs.
func printTable(w io.Writer, c config, runs []*runResult) {
	if len(runs) == 0 {
		fmt.Fprintln(w, "nothing was measured")
		return
	}
	fleet := ""
	if c.fleet > 0 {
		fleet = fmt.Sprintf(", %d-host fleet: small payload", c.fleet)
	}
	fmt.Fprintf(w, "\nwsu bench: %s payload%s, %d run(s)%s; %s; load average %s\n\n", c.size, fleet, len(runs), medianNote(len(runs)), machine(), loadAverage())
	rows := [][]string{{"scenario", "wall", "start / load / connect / tasks / exit", "CPU", "bytes sent", "agent/host", "RPC/task max/mean", "peak RSS", "floor", "ratio", "goal", "result"}}
	var notes []string
	counts := c.hosts
	if c.fleet > 0 {
		counts = append(slices.Clone(counts), c.fleet)
	}
	for i, n := range counts {
		var hs []*hostsResult
		for _, r := range runs {
			if i < len(r.scenarios) && r.scenarios[i] != nil {
				hs = append(hs, r.scenarios[i])
			}
		}
		if len(hs) == 0 {
			continue
		}
		g := goalsFor(n)
		label := fmt.Sprintf("%s (%s, forks %d)", hostCount(n), mb(hs[0].payloadBytes), hs[0].forks)
		floor := median(hs, func(h *hostsResult) time.Duration { return h.floor })
		stream := median(hs, func(h *hostsResult) time.Duration { return h.stream })
		handshake := median(hs, func(h *hostsResult) time.Duration { return h.handshake })
		floorBytes := medianInt(hs, func(h *hostsResult) int64 { return h.floorBytes })
		var cold []*joinResult
		for _, h := range hs {
			if h.cold != nil {
				cold = append(cold, h.cold)
			}
		}
		if len(cold) > 0 {
			wall := median(cold, func(j *joinResult) time.Duration { return j.wall })
			rss := medianInt(cold, func(j *joinResult) int64 { return j.maxRSS })
			goal, result := "— (whole join)", "info"
			if g.coldWall > 0 {
				goal, result = "≤ "+secs(g.coldWall), pass(wall <= g.coldWall)
			}
			if g.maxRSS > 0 {
				goal, result = fmt.Sprintf("RSS ≤ %s", mb(g.maxRSS)), pass(rss <= g.maxRSS)
			}
			rows = append(rows, []string{"cold join, " + label, secs(wall), splitCell(cold), secs(median(cold, func(j *joinResult) time.Duration { return j.cpu })), mb(medianInt(cold, func(j *joinResult) int64 { return j.bytesSent })),
				mb(medianInt(cold, func(j *joinResult) int64 { return j.agentPerHost })), rpcCell(cold), mb(rss), secs(stream), ratio(wall, stream), goal, result})
			cw := median(cold, func(j *joinResult) time.Duration { return j.copyWall })
			rows = append(rows, []string{"└ copy phase (win_copy tasks)", secs(cw), "", "", mb(medianInt(cold, func(j *joinResult) int64 { return j.copyBytes })),
				"", "", "", secsOr(floor), ratio(cw, floor), "— (per-file floor)", "info"})
			r := cw.Seconds() / stream.Seconds()
			rows = append(rows, []string{"└ copy phase vs one ssh stream", secs(cw), "", "", "", "", "", "", secs(stream), ratio(cw, stream), fmt.Sprintf("≤ %.1f× one stream", g.streamRatio), pass(stream > 0 && r <= g.streamRatio)})
			if n := playNote("cold join, "+label, cold); n != "" {
				notes = append(notes, n)
			}
		}
		for _, which := range []struct {
			name string
			get  func(*hostsResult) *joinResult
		}{
			{"no-op re-run, " + label, func(h *hostsResult) *joinResult { return h.noop }},
			{"no-op re-run again, " + label, func(h *hostsResult) *joinResult { return h.noop2 }},
		} {
			var noop []*joinResult
			for _, h := range hs {
				if j := which.get(h); j != nil {
					noop = append(noop, j)
				}
			}
			if len(noop) == 0 {
				continue
			}
			wall := median(noop, func(j *joinResult) time.Duration { return j.wall })
			sent := medianInt(noop, func(j *joinResult) int64 { return j.bytesSent })
			rss := medianInt(noop, func(j *joinResult) int64 { return j.maxRSS })
			worst := slices.MaxFunc(noop, func(a, b *joinResult) int { return int(a.perTask.max - b.perTask.max) })
			ok := wall <= g.noopWall && worst.perTask.max <= maxRPCPerUnchangedTask && sent == 0
			goal := fmt.Sprintf("≤ %s, ≤ %d RPC/task, 0 B", secs(g.noopWall), maxRPCPerUnchangedTask)
			if g.maxRSS > 0 {
				ok = ok && rss <= g.maxRSS
				goal += ", RSS ≤ " + mb(g.maxRSS)
			}
			rows = append(rows, []string{which.name, secs(wall), splitCell(noop), secs(median(noop, func(j *joinResult) time.Duration { return j.cpu })), mb(sent), mb(medianInt(noop, func(j *joinResult) int64 { return j.agentPerHost })), rpcCell(noop),
				mb(rss), secs(handshake), ratio(wall, handshake), goal, pass(ok)})
			if len(worst.perTask.over) > 0 {
				notes = append(notes, fmt.Sprintf("%s: unchanged tasks over %d RPC (RPCs: ops):\n    %s", which.name, maxRPCPerUnchangedTask, strings.Join(worst.perTask.over, "\n    ")))
			}
		}
		rows = append(rows, []string{"floor: ssh host true, " + label, secs(handshake), "", "", "", "", "", "", "", "", "(the no-op floor)", ""})
		if floor > 0 {
			rows = append(rows, []string{"floor: ssh 'cat > file' per file, " + label, secs(floor), "", "", mb(floorBytes), "", "", "", "", "", "(per-file floor)", ""})
		}
		rows = append(rows, []string{"floor: one ssh stream per host, " + label, secs(stream), "", "", mb(floorBytes), "", "", "", "", "", "(the copy floor)", ""})
	}
	kubeadm, kubeadmNotes := kubeadmRows(runs)
	rows = append(rows, kubeadm...)
	notes = append(notes, kubeadmNotes...)
	rows = append(rows, controllerRows(c, runs)...)
	fleetRows, fleetNotes := controllerFleetRows(c, runs)
	rows = append(rows, fleetRows...)
	notes = append(notes, fleetNotes...)
	var winrm [][]*winrmResult
	for _, r := range runs {
		if len(r.winrm) > 0 {
			winrm = append(winrm, r.winrm)
		}
	}
	if len(winrm) > 0 {
		for k := range winrm[0] {
			var ws []*winrmResult
			for _, run := range winrm {
				if k < len(run) {
					ws = append(ws, run[k])
				}
			}
			wall := median(ws, func(w *winrmResult) time.Duration { return w.wall })
			rate := float64(ws[0].bytes) / 1e6 / wall.Seconds()
			rows = append(rows, []string{"WinRM " + ws[0].name, fmt.Sprintf("%s (%.1f MB/s)", secs(wall), rate), "", "", mb(ws[0].bytes), "", "", "", "", "",
				fmt.Sprintf("≥ %d MB/s", minWinRMMBps), pass(rate >= minWinRMMBps)})
		}
	}
	writeMarkdown(w, rows)
	for _, n := range notes {
		fmt.Fprintln(w, "\n"+n)
	}
}

// controllerRows are the controller's: a ConfigMap entry to Node Ready
// beside the CLI's cold join of one host (when measured), and the drift
// sweep.
func controllerRows(c config, runs []*runResult) [][]string {
	var crs []*controllerResult
	var cli []time.Duration
	for _, r := range runs {
		if r.controller != nil {
			crs = append(crs, r.controller)
		}
		for i, n := range c.hosts {
			if n == 1 && i < len(r.scenarios) && r.scenarios[i] != nil && r.scenarios[i].cold != nil {
				cli = append(cli, r.scenarios[i].cold.wall)
			}
		}
	}
	if len(crs) == 0 {
		return nil
	}
	var rows [][]string
	if joins := filter(crs, func(r *controllerResult) bool { return r.join.wall > 0 }); len(joins) > 0 {
		wall := median(joins, func(r *controllerResult) time.Duration { return r.join.wall })
		floor, rat := "", "—"
		if len(cli) > 0 {
			f := median(cli, func(d time.Duration) time.Duration { return d })
			floor, rat = secs(f), ratio(wall, f)
		}
		rows = append(rows, []string{"controller: ConfigMap entry → Node Ready, 1 host", secs(wall), "", secs(median(joins, func(r *controllerResult) time.Duration { return r.join.cpu })),
			"", "", "", "", floor, rat, "— (floor: the CLI's cold join, 1 host)", "info"})
	}
	if sweeps := filter(crs, func(r *controllerResult) bool { return r.sweep.wall > 0 }); len(sweeps) > 0 {
		rows = append(rows, []string{"controller: drift sweep, " + hostCount(sweeps[0].sweepHosts), secs(median(sweeps, func(r *controllerResult) time.Duration { return r.sweep.wall })), "",
			secs(median(sweeps, func(r *controllerResult) time.Duration { return r.sweep.cpu })), "", "", "", "", "", "", "— (one plan per host)", "info"})
	}
	return rows
}

// controllerFleetRows are the controller fleet set-up's: N ConfigMap
// entries to N Ready Nodes beside the CLI's N-host cold join (when the
// fleet rows measured one of that size), and the steady state; a note
// gives what the steady state cost per instance per drift interval.
func controllerFleetRows(c config, runs []*runResult) ([][]string, []string) {
	var fs []*controllerFleetResult
	var cli []time.Duration
	for _, r := range runs {
		if r.controllerFleet == nil {
			continue
		}
		fs = append(fs, r.controllerFleet)
		for _, sc := range r.scenarios {
			if sc != nil && sc.hosts == r.controllerFleet.hosts && sc.cold != nil {
				cli = append(cli, sc.cold.wall)
			}
		}
	}
	if len(fs) == 0 {
		return nil, nil
	}
	n := fs[0].hosts
	var rows [][]string
	if joins := filter(fs, func(r *controllerFleetResult) bool { return r.join.wall > 0 }); len(joins) > 0 {
		wall := median(joins, func(r *controllerFleetResult) time.Duration { return r.join.wall })
		floor, rat := "", "—"
		if len(cli) > 0 {
			f := median(cli, func(d time.Duration) time.Duration { return d })
			floor, rat = secs(f), ratio(wall, f)
		}
		rss := median(joins, func(r *controllerFleetResult) time.Duration { return time.Duration(r.peakRSS) })
		rows = append(rows, []string{fmt.Sprintf("controller: %d ConfigMap entries → %d Ready Nodes", n, n), secs(wall), "",
			secs(median(joins, func(r *controllerFleetResult) time.Duration { return r.join.cpu })), "", "", "", mb(int64(rss)),
			floor, rat, fmt.Sprintf("— (floor: the CLI's cold join, %s)", hostCount(n)), "info"})
	}
	steady := filter(fs, func(r *controllerFleetResult) bool { return r.window > 0 })
	if len(steady) == 0 {
		return rows, nil
	}
	per := func(f func(r *controllerFleetResult) int64) float64 {
		return medianFloat(steady, func(r *controllerFleetResult) float64 { return r.perInstanceInterval(f(r)) })
	}
	rows = append(rows, []string{fmt.Sprintf("controller: steady state, %d instances, %d × %s drift interval", n, fleetSteadyIntervals, fleetDriftInterval),
		secs(median(steady, func(r *controllerFleetResult) time.Duration { return r.window })), "",
		secs(median(steady, func(r *controllerFleetResult) time.Duration { return r.cpu })), "", "", "", "", "", "",
		"— (one plan per instance per interval, no status write in sync)", "info"})
	note := fmt.Sprintf("controller steady state, per instance per drift interval (%s, nothing to change): %.2f plans, %.2f applies, %.1f API requests, %.2f status writes; CPU %.1f ms; settling before it: %.2f status writes per instance (until each recorded its first in-sync plan after the join)",
		fleetDriftInterval, per(func(r *controllerFleetResult) int64 { return r.plans }), per(func(r *controllerFleetResult) int64 { return r.applies }),
		per(func(r *controllerFleetResult) int64 { return r.requests }), per(func(r *controllerFleetResult) int64 { return r.statusWrites }),
		per(func(r *controllerFleetResult) int64 { return r.cpu.Milliseconds() }),
		medianFloat(steady, func(r *controllerFleetResult) float64 { return float64(r.settleWrites) / float64(r.hosts) }))
	return rows, []string{note}
}

// splitCell is the median of each phase of the runs' wall time.
func splitCell(js []*joinResult) string {
	js = filter(js, func(j *joinResult) bool { return j.split != nil })
	if len(js) == 0 {
		return ""
	}
	parts := []func(*phases) time.Duration{
		func(p *phases) time.Duration { return p.start },
		func(p *phases) time.Duration { return p.load },
		func(p *phases) time.Duration { return p.connect },
		func(p *phases) time.Duration { return p.tasks },
		func(p *phases) time.Duration { return p.exit },
	}
	cells := make([]string, len(parts))
	for i, part := range parts {
		cells[i] = secs(median(js, func(j *joinResult) time.Duration { return part(j.split) }))
	}
	return strings.Join(cells, " / ")
}

// loadAverage is /proc/loadavg's 1, 5 and 15 minute figures when the table
// is printed: other work on the machine slows every row.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func hostCount(n int) string {
	if n == 1 {
		return "1 host"
	}
	return fmt.Sprintf("%d hosts", n)
}

func filter[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}

func medianNote(runs int) string {
	if runs > 1 {
		return ", medians"
	}
	return ""
}

func rpcCell(js []*joinResult) string {
	worst := slices.MaxFunc(js, func(a, b *joinResult) int { return int(a.perTask.max - b.perTask.max) })
	mean := medianFloat(js, func(j *joinResult) float64 { return j.perTask.mean })
	return fmt.Sprintf("%d / %.2f", worst.perTask.max, mean)
}

func pass(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a.Seconds()/b.Seconds())
}

// secsOr is secs, or "—" for a floor not measured.
func secsOr(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	return secs(d)
}

func secs(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// mb prints bytes in MB (10^6), as the goals' MB/s.
func mb(n int64) string {
	switch {
	case n == 0:
		return "0 B"
	case n < 1e6:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

func median[T any](xs []T, f func(T) time.Duration) time.Duration {
	return time.Duration(medianInt(xs, func(x T) int64 { return int64(f(x)) }))
}

func medianInt[T any](xs []T, f func(T) int64) int64 {
	v := make([]int64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

func medianFloat[T any](xs []T, f func(T) float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

func writeMarkdown(w io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range r {
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", width[i]-len([]rune(c))))
		}
		fmt.Fprintln(w, b.String())
	}
	line(rows[0])
	sep := make([]string, len(width))
	for i, n := range width {
		sep[i] = strings.Repeat("-", n)
	}
	line(sep)
	for _, r := range rows[1:] {
		line(r)
	}
}

// machine names the CPU, for reading numbers from elsewhere.
func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	return fmt.Sprintf("%d CPUs (%s), %s", runtime.NumCPU(), model, runtime.Version())
}
