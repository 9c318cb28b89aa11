//go:build linux

// Command bench is `make bench`: wsu against the floor, in one run, on this
// machine only (127.0.0.1). It starts the end-to-end set-up (test/harness:
// a real kube-apiserver and etcd, a real OpenSSH sshd, simulated Windows
// hosts behind it, a payload shaped like the real one) and measures, in
// the same run:
//
//   - a cold `wsu apply join` and a no-op re-run, for each host count, with
//     wall time, payload bytes sent, agent round trips per task and wsu's
//     peak RSS, and the copy phase (the win_copy tasks) on its own;
//   - the floor: the system OpenSSH client's `ssh host 'cat > file'` of
//     the same payload files, sequential per host, hosts in parallel, into
//     the same sshd as the same user;
//   - WinRM upload speed through the WS-Management test endpoint;
//   - the controller (in this process, as in its pod): a BYOH ConfigMap
//     entry to Node Ready on one more fresh host, beside the CLI's cold
//     join, and a drift sweep over every joined host, wall and CPU.
//
// It prints one table with the goals (ratios to the floor, so they hold on a
// noisy machine). Goals are reported, never asserted: the exit code is
// non-zero only when something fails to run, and only with --smoke.
// docs/performance.md says what each number includes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/payloadtest"
)

type config struct {
	hosts []int
	// fleet is the host count of the fleet row set (0: none): a set-up of
	// its own with the small payload, after the others.
	fleet   int
	forks   int // 0: forksFor
	split   bool
	size    string
	runs    int
	smoke   bool
	wsu     string
	profile string
	// memprofile is a directory for a heap profile of every wsu run, taken
	// at its largest heap (wsu's hidden --memprofile).
	memprofile string
	events     string
	verbose    bool
	// controller says which controller rows to measure: full (a
	// ConfigMap entry to Node Ready on one more host, and the drift
	// sweep), sweep (the sweep over the CLI's hosts only), or off.
	controller string
	// nodeOnly measures a node-only join on a kubeadm set-up of its own.
	nodeOnly bool
	// controllerFleet is the host count of the controller fleet set-up (0:
	// none): that many ConfigMap entries joined by the controller, then its
	// steady state.
	controllerFleet int
}

func main() {
	var c config
	hosts := flag.String("hosts", "1,10", "host counts to measure, comma-separated")
	flag.StringVar(&c.size, "size", "realistic", "payload: realistic (~300 MB, shaped like the real one) or small (the stand-ins alone, ~70 MB)")
	flag.IntVar(&c.runs, "runs", 1, "measure everything this many times (a fresh set-up each) and report medians")
	flag.BoolVar(&c.smoke, "smoke", false, "a short run for CI (small payload, 1 host unless --hosts is given): fail when anything fails to run")
	flag.StringVar(&c.wsu, "wsu", "", "the wsu binary to measure (default: built from this module)")
	flag.StringVar(&c.profile, "cpuprofile", "", "directory: write a CPU profile of every wsu run there (wsu's hidden --cpuprofile)")
	flag.StringVar(&c.memprofile, "memprofile", "", "directory: write a heap profile of every wsu run there, taken when its heap was largest (wsu's hidden --memprofile)")
	flag.StringVar(&c.events, "events", "", "directory: keep every wsu run's JSON events there")
	flag.BoolVar(&c.verbose, "v", false, "print progress")
	flag.IntVar(&c.fleet, "fleet", 0, "also measure this many hosts (up to 100) in a set-up of their own with the small payload: the fleet rows (make bench-fleet: 100)")
	flag.IntVar(&c.controllerFleet, "controller-fleet", 0, "also measure the controller joining this many hosts (up to 100) listed in one BYOH ConfigMap, then, after one settling interval, its steady state over two 1-minute drift intervals, in a set-up of its own (make bench-fleet: 100)")
	flag.IntVar(&c.forks, "forks", 0, "wsu --forks, and the floors' concurrency (default: the host count, at most 50)")
	flag.BoolVar(&c.nodeOnly, "node-only", true, "also measure a node-only join (bootstrap token, no kubeconfig) on a kubeadm set-up of its own with the hostprocess network")
	flag.BoolVar(&c.split, "split", true, "split the joins' wall time with wsu's hidden --timings (false: for a wsu built before it)")
	flag.StringVar(&c.controller, "controller", "full", "controller rows: full (a ConfigMap entry to Node Ready on one more host, and a drift sweep over the joined hosts), sweep (the sweep only; --smoke's default) or off")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if c.smoke {
		if !set["size"] {
			c.size = "small"
		}
		if !set["hosts"] {
			*hosts = "1"
		}
		if !set["controller"] {
			c.controller = "sweep"
		}
	}
	var err error
	if c.hosts, err = parseHosts(*hosts); err == nil && (c.fleet < 0 || c.fleet > maxHosts || c.controllerFleet < 0 || c.controllerFleet > maxHosts || slices.ContainsFunc(c.hosts, func(n int) bool { return n > maxHosts })) {
		err = fmt.Errorf("at most %d hosts per row set", maxHosts)
	}
	if err == nil && c.size != "realistic" && c.size != "small" {
		err = fmt.Errorf("--size %q: realistic or small", c.size)
	}
	if err == nil && !slices.Contains([]string{"full", "sweep", "off"}, c.controller) {
		err = fmt.Errorf("--controller %q: full, sweep or off", c.controller)
	}
	if err == nil && c.runs < 1 {
		err = errors.New("--runs must be at least 1")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed := bench(ctx, c)
	if failed != nil {
		fmt.Fprintln(os.Stderr, "bench:", failed)
		if c.smoke {
			os.Exit(1)
		}
	}
}

// maxHosts is the most hosts a row set has: simulated hosts are 127.0.10.x
// addresses and processes on this one machine.
const maxHosts = 100

// forksFor is wsu's --forks for n hosts, as a user would set it: one per
// host, at most 50 (the hosts beyond queue).
func (c config) forksFor(n int) int {
	if c.forks > 0 {
		return c.forks
	}
	return min(n, 50)
}

func parseHosts(s string) ([]int, error) {
	var out []int
	if s == "" {
		return nil, nil // --fleet alone
	}
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--hosts %q: a comma-separated list of positive numbers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func (c config) logf(format string, args ...any) {
	if c.verbose {
		fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	}
}

// bench measures every run and prints the table; it returns what failed
// to run, if anything (a missed goal is not a failure).
func bench(ctx context.Context, c config) error {
	wsu := c.wsu
	if wsu == "" {
		dir, err := os.MkdirTemp("", "wsu-bench-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		wsu = filepath.Join(dir, "wsu")
		c.logf("building wsu")
		if err := harness.BuildWSU(ctx, wsu); err != nil {
			return err
		}
	}
	for _, dir := range []string{c.profile, c.memprofile, c.events} {
		if dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
	}
	var sizes map[string]int64
	if c.size == "realistic" {
		sizes = payloadtest.RealisticSizes
	}
	var runs []*runResult
	var errs []error
	for i := 1; i <= c.runs && ctx.Err() == nil; i++ {
		c.logf("run %d of %d", i, c.runs)
		var r *runResult
		if len(c.hosts) > 0 {
			var err error
			if r, err = measureRun(ctx, c, wsu, rowSet{hosts: c.hosts, sizes: sizes, controller: c.controller, winrm: true, perFile: true}, i); err != nil {
				errs = append(errs, fmt.Errorf("run %d: %w", i, err))
			}
		}
		if c.fleet > 0 && ctx.Err() == nil {
			c.logf("run %d: the fleet, %d hosts", i, c.fleet)
			f, err := measureRun(ctx, c, wsu, rowSet{hosts: []int{c.fleet}, controller: "off"}, i)
			if err != nil {
				errs = append(errs, fmt.Errorf("run %d, fleet: %w", i, err))
			}
			r = merge(r, f)
		}
		if c.controllerFleet > 0 && ctx.Err() == nil {
			cf, err := measureControllerFleet(ctx, c, wsu, c.controllerFleet)
			if err != nil {
				errs = append(errs, fmt.Errorf("run %d, controller fleet: %w", i, err))
			}
			if r == nil {
				r = &runResult{}
			}
			r.controllerFleet = cf
		}
		if c.nodeOnly && ctx.Err() == nil {
			n, err := measureNodeOnly(ctx, c, wsu)
			if err != nil {
				errs = append(errs, fmt.Errorf("run %d: %w", i, err))
			}
			if r == nil {
				r = &runResult{}
			}
			r.nodeOnly = n
		}
		if r != nil {
			runs = append(runs, r)
		}
	}
	printTable(os.Stdout, c, runs)
	return errors.Join(append(errs, ctx.Err())...)
}

// merge puts the fleet set-up's results after the others'.
func merge(r, fleet *runResult) *runResult {
	switch {
	case r == nil:
		return fleet
	case fleet != nil:
		r.scenarios = append(r.scenarios, fleet.scenarios...)
	}
	return r
}

// rowSet is what one set-up measures.
type rowSet struct {
	hosts      []int
	sizes      map[string]int64 // nil: the small payload
	controller string
	winrm      bool
	// perFile measures the per-file floor (an ssh connection per file):
	// not for the fleet, where it is 11 connections per host.
	perFile bool
}

// runResult is everything one run measured.
type runResult struct {
	payloadBytes int64
	scenarios    []*hostsResult
	winrm        []*winrmResult
	controller   *controllerResult
	nodeOnly     *nodeOnlyResult
	// controllerFleet is the controller fleet set-up's (--controller-fleet).
	controllerFleet *controllerFleetResult
}

// hostsResult is one host count's measurements.
type hostsResult struct {
	hosts int
	// payloadBytes is one host's payload.
	payloadBytes int64
	forks        int
	cold         *joinResult
	// noop is the first re-run after the join, noop2 the next one: the
	// node's hash cache trusts a file's sum only once it was taken well
	// after the file was written, so the first re-run hashes the payload
	// on the node again.
	noop, noop2 *joinResult
	floor       time.Duration
	// floorBytes is what the floor copied, all hosts together.
	floorBytes int64
	// stream is the one-connection-per-host floor.
	stream time.Duration
	// handshake is `ssh host true` per host at the same concurrency: the
	// floor of a run that connects to every host and does nothing.
	handshake time.Duration
}

// measureRun starts one set-up holding every host count's hosts (each
// count gets its own fresh hosts, selected with --limit) and measures them.
func measureRun(ctx context.Context, c config, wsu string, set rowSet, run int) (*runResult, error) {
	total := 0
	for _, n := range set.hosts {
		total += n
	}
	if total == 0 {
		return nil, nil
	}
	if set.controller == "full" {
		total++ // the controller's fresh host, last
	}
	c.logf("starting the set-up: cluster, sshd, %d simulated hosts", total)
	env, err := harness.Start(ctx, harness.Options{
		Hosts:   total,
		WSU:     wsu,
		Payload: payloadtest.Options{Sizes: set.sizes},
		// The hybrid-overlay stand-in's pretend network reconfiguration
		// (1 s by default) is a test prop, not a cost wsu has.
		HostEnv: []string{"WSU_STANDIN_NETWORK_DELAY=0"},
		Logf:    c.logf,
	})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	r := &runResult{}
	for _, comp := range env.Manifest.Components {
		fi, err := os.Stat(filepath.Join(env.PayloadDir, comp.File))
		if err != nil {
			return nil, err
		}
		r.payloadBytes += fi.Size()
	}

	var errs []error
	var joined []*harness.Host
	next := 0
	for _, n := range set.hosts {
		hosts := env.Hosts[next : next+n]
		next += n
		hr, err := measureHosts(ctx, c, env, hosts, set.perFile, run)
		hr.payloadBytes = r.payloadBytes
		if err != nil {
			errs = append(errs, fmt.Errorf("%d host(s): %w", n, err))
		} else {
			joined = append(joined, hosts...)
		}
		r.scenarios = append(r.scenarios, hr)
	}
	if set.controller != "off" {
		var fresh *harness.Host
		if set.controller == "full" {
			fresh = env.Hosts[total-1]
		}
		cr, err := measureController(ctx, c, env, fresh, joined)
		if err != nil {
			errs = append(errs, fmt.Errorf("controller: %w", err))
		}
		r.controller = cr
	}
	if set.winrm {
		c.logf("WinRM uploads")
		w, err := measureWinRM(ctx, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("winrm: %w", err))
		}
		r.winrm = w
	}
	return r, errors.Join(errs...)
}

// measureHosts: the floors, then a cold join, then a no-op re-run, on
// hosts no earlier measurement touched.
func measureHosts(ctx context.Context, c config, env *harness.Env, hosts []*harness.Host, perFile bool, run int) (*hostsResult, error) {
	hr := &hostsResult{hosts: len(hosts), forks: c.forksFor(len(hosts))}
	c.logf("%d host(s): floor (ssh cat, %d at once)", len(hosts), hr.forks)
	var err error
	if perFile {
		if hr.floor, hr.floorBytes, err = sshCopy(ctx, env, hosts, hr.forks, false); err != nil {
			return hr, fmt.Errorf("floor: %w", err)
		}
	}
	if hr.stream, hr.floorBytes, err = sshCopy(ctx, env, hosts, hr.forks, true); err != nil {
		return hr, fmt.Errorf("floor (one stream): %w", err)
	}
	if hr.handshake, err = sshTrue(ctx, env, hosts, hr.forks); err != nil {
		return hr, fmt.Errorf("floor (ssh true): %w", err)
	}
	limit := make([]string, len(hosts))
	for i, h := range hosts {
		limit[i] = h.Name
	}
	args := []string{"apply", "join", "--auto-approve", "--limit", strings.Join(limit, ","), "--forks", strconv.Itoa(hr.forks)}
	join := func(name string) (*joinResult, error) {
		c.logf("%d host(s): %s", len(hosts), name)
		base := filepath.Join(c.profile, fmt.Sprintf("%s-%dhosts-run%d", name, len(hosts), run))
		a := args
		if c.profile != "" {
			a = append(a[:len(a):len(a)], "--cpuprofile", base+".pprof")
		}
		if c.memprofile != "" {
			a = append(a[:len(a):len(a)], "--memprofile", filepath.Join(c.memprofile, filepath.Base(base)+".heap"))
		}
		events := ""
		if c.events != "" {
			events = filepath.Join(c.events, filepath.Base(base)+".json")
		}
		return runJoin(ctx, env, hosts, a, events, c.split)
	}
	if hr.cold, err = join("cold"); err != nil {
		return hr, fmt.Errorf("cold join: %w", err)
	}
	for _, n := range []struct {
		name string
		res  **joinResult
	}{{"noop", &hr.noop}, {"noop2", &hr.noop2}} {
		if *n.res, err = join(n.name); err != nil {
			return hr, fmt.Errorf("no-op re-run: %w", err)
		}
		if c := (*n.res).changed; c > 0 {
			return hr, fmt.Errorf("no-op re-run changed %d tasks", c)
		}
	}
	return hr, nil
}
