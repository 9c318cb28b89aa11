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
	hosts   []int
	size    string
	runs    int
	smoke   bool
	wsu     string
	profile string
	events  string
	verbose bool
	// controller says which controller rows to measure: full (a
	// ConfigMap entry to Node Ready on one more host, and the drift
	// sweep), sweep (the sweep over the CLI's hosts only), or off.
	controller string
}

func main() {
	var c config
	hosts := flag.String("hosts", "1,10", "host counts to measure, comma-separated")
	flag.StringVar(&c.size, "size", "realistic", "payload: realistic (~300 MB, shaped like the real one) or small (the stand-ins alone, ~70 MB)")
	flag.IntVar(&c.runs, "runs", 1, "measure everything this many times (a fresh set-up each) and report medians")
	flag.BoolVar(&c.smoke, "smoke", false, "a short run for CI (small payload, 1 host unless --hosts is given): fail when anything fails to run")
	flag.StringVar(&c.wsu, "wsu", "", "the wsu binary to measure (default: built from this module)")
	flag.StringVar(&c.profile, "cpuprofile", "", "directory: write a CPU profile of every wsu run there (wsu's hidden --cpuprofile)")
	flag.StringVar(&c.events, "events", "", "directory: keep every wsu run's JSON events there")
	flag.BoolVar(&c.verbose, "v", false, "print progress")
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
	if c.hosts, err = parseHosts(*hosts); err == nil && c.size != "realistic" && c.size != "small" {
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

func parseHosts(s string) ([]int, error) {
	var out []int
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
	for _, dir := range []string{c.profile, c.events} {
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
		r, err := measureRun(ctx, c, wsu, sizes, i)
		if err != nil {
			errs = append(errs, fmt.Errorf("run %d: %w", i, err))
		}
		if r != nil {
			runs = append(runs, r)
		}
	}
	printTable(os.Stdout, c, runs)
	return errors.Join(append(errs, ctx.Err())...)
}

// runResult is everything one run measured.
type runResult struct {
	payloadBytes int64
	scenarios    []*hostsResult
	winrm        []*winrmResult
	controller   *controllerResult
}

// hostsResult is one host count's measurements.
type hostsResult struct {
	hosts int
	cold  *joinResult
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
}

// measureRun starts one set-up holding every host count's hosts (each
// count gets its own fresh hosts, selected with --limit) and measures them.
func measureRun(ctx context.Context, c config, wsu string, sizes map[string]int64, run int) (*runResult, error) {
	total := 0
	for _, n := range c.hosts {
		total += n
	}
	if c.controller == "full" {
		total++ // the controller's fresh host, last
	}
	c.logf("starting the set-up: cluster, sshd, %d simulated hosts", total)
	env, err := harness.Start(ctx, harness.Options{
		Hosts:   total,
		WSU:     wsu,
		Payload: payloadtest.Options{Sizes: sizes},
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
	for _, n := range c.hosts {
		hosts := env.Hosts[next : next+n]
		next += n
		hr, err := measureHosts(ctx, c, env, hosts, run)
		if err != nil {
			errs = append(errs, fmt.Errorf("%d host(s): %w", n, err))
		} else {
			joined = append(joined, hosts...)
		}
		r.scenarios = append(r.scenarios, hr)
	}
	if c.controller != "off" {
		var fresh *harness.Host
		if c.controller == "full" {
			fresh = env.Hosts[total-1]
		}
		cr, err := measureController(ctx, c, env, fresh, joined)
		if err != nil {
			errs = append(errs, fmt.Errorf("controller: %w", err))
		}
		r.controller = cr
	}
	c.logf("WinRM uploads")
	w, err := measureWinRM(ctx, env)
	if err != nil {
		errs = append(errs, fmt.Errorf("winrm: %w", err))
	}
	r.winrm = w
	return r, errors.Join(errs...)
}

// measureHosts: the floor, then a cold join, then a no-op re-run, on hosts
// no earlier measurement touched.
func measureHosts(ctx context.Context, c config, env *harness.Env, hosts []*harness.Host, run int) (*hostsResult, error) {
	hr := &hostsResult{hosts: len(hosts)}
	c.logf("%d host(s): floor (ssh cat)", len(hosts))
	var err error
	if hr.floor, hr.floorBytes, err = sshCopy(ctx, env, hosts, false); err != nil {
		return hr, fmt.Errorf("floor: %w", err)
	}
	if hr.stream, _, err = sshCopy(ctx, env, hosts, true); err != nil {
		return hr, fmt.Errorf("floor (one stream): %w", err)
	}
	limit := make([]string, len(hosts))
	for i, h := range hosts {
		limit[i] = h.Name
	}
	args := []string{"apply", "join", "--limit", strings.Join(limit, ",")}
	join := func(name string) (*joinResult, error) {
		c.logf("%d host(s): %s", len(hosts), name)
		base := filepath.Join(c.profile, fmt.Sprintf("%s-%dhosts-run%d", name, len(hosts), run))
		a := args
		if c.profile != "" {
			a = append(a[:len(a):len(a)], "--cpuprofile", base+".pprof")
		}
		events := ""
		if c.events != "" {
			events = filepath.Join(c.events, filepath.Base(base)+".json")
		}
		return runJoin(ctx, env, hosts, a, events)
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
