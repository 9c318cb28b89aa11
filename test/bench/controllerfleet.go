//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/payloadtest"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// fleetDriftInterval is the controller's drift interval in the fleet set-up:
// short, so that the steady-state window spans whole intervals in minutes,
// not hours. What is reported is per instance per interval.
const fleetDriftInterval = time.Minute

// fleetSteadyIntervals is how many drift intervals the steady state is
// watched for.
const fleetSteadyIntervals = 2

// controllerFleetResult is what the controller fleet set-up measured: N
// fresh hosts listed in the BYOH ConfigMap at once, through the
// controller's in-process runner, to N joined instances with Ready Nodes;
// then the steady state (nothing to change) over a few drift intervals.
type controllerFleetResult struct {
	hosts int
	join  spent
	// peakRSS is this process's largest resident set (the controller runs
	// in it, with its playbook runs), at the end.
	peakRSS int64
	// The steady state: its window, the controller's CPU in it, and what
	// it did: runs by mode, API requests, instance status writes.
	window         time.Duration
	cpu            time.Duration
	plans, applies int64
	requests       int64
	statusWrites   int64
	// settleWrites are the status writes before the window, until each
	// joined instance's first in-sync plan was recorded.
	settleWrites int64
}

// perInstanceInterval is n per instance per drift interval in the window.
func (r *controllerFleetResult) perInstanceInterval(n int64) float64 {
	intervals := r.window.Seconds() / fleetDriftInterval.Seconds()
	return float64(n) / float64(r.hosts) / intervals
}

// measureControllerFleet starts a set-up of n fresh hosts (small payload)
// and measures the controller joining them all from one ConfigMap, then
// its steady state.
func measureControllerFleet(ctx context.Context, c config, wsu string, n int) (*controllerFleetResult, error) {
	c.logf("controller fleet: starting the set-up, %d simulated hosts", n)
	env, err := harness.Start(ctx, harness.Options{
		Hosts: n, WSU: wsu, Payload: payloadtest.Options{},
		HostEnv: []string{"WSU_STANDIN_NETWORK_DELAY=0"}, Logf: c.logf,
	})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	cl, err := prepareCluster(ctx, env)
	if err != nil {
		return nil, err
	}
	state, err := os.MkdirTemp("", "wsu-bench-controller-fleet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(state)
	runs := &countingRunner{inner: run.InProcess{Agents: agentbin.New(agentbin.Options{Dir: filepath.Dir(env.Agent)})}}
	o := controller.Options{
		Namespace: benchNamespace, ConfigMap: controller.DefaultConfigMap,
		VarFiles: []string{env.VarFile}, StateDir: state,
		AddressHostVars: map[string]map[string]string{},
		Runner:          runs, DriftInterval: fleetDriftInterval,
	}
	entries := map[string]string{}
	var names []string
	for _, h := range env.Hosts {
		if o.AddressHostVars[h.Name], err = env.InstanceHostVars(h); err != nil {
			return nil, err
		}
		entries[h.Name] = "username=" + env.SSHUser
		names = append(names, controller.InstanceName(h.Name))
	}
	reqs := &requestCounter{}
	cfg := rest.CopyConfig(env.Cluster.Config)
	cfg.Wrap(reqs.wrap)
	stop, err := startController(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	defer stop()

	res := &controllerFleetResult{hosts: n}
	c.logf("controller fleet: %d ConfigMap entries to %d Ready Nodes", n, n)
	res.join, err = measure(func() error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.DefaultConfigMap, Namespace: benchNamespace}, Data: entries}
		if err := cl.Create(ctx, cm); err != nil {
			return err
		}
		return waitInstancesFor(ctx, cl, names, joinedReady, 20*time.Minute)
	})
	if err != nil {
		return res, fmt.Errorf("%d ConfigMap entries to Ready Nodes: %w", n, err)
	}

	// Each instance's first drift pass after its join records an in-sync
	// plan where the join's plan (with its changes) was: a real status
	// change, once. The steady state is measured after every instance
	// made it (a loaded machine's passes slip past one interval).
	c.logf("controller fleet: settling, until every instance recorded an in-sync plan")
	reqs.reset()
	if err := waitInstancesFor(ctx, cl, names, inSyncPlanned, (fleetSteadyIntervals+3)*fleetDriftInterval); err != nil {
		return res, fmt.Errorf("settling: %w", err)
	}
	res.settleWrites = reqs.statusWrites.Load()
	c.logf("controller fleet: the steady state, %d drift intervals of %s", fleetSteadyIntervals, fleetDriftInterval)
	reqs.reset()
	runs.reset()
	cpu0, t0 := selfCPU(), time.Now()
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(fleetSteadyIntervals * fleetDriftInterval):
	}
	res.window, res.cpu = time.Since(t0), selfCPU()-cpu0
	res.plans, res.applies = runs.count(engine.ModePlan), runs.count(engine.ModeApply)
	res.requests, res.statusWrites = reqs.total.Load(), reqs.statusWrites.Load()
	res.peakRSS = selfPeakRSS()
	return res, nil
}

// inSyncPlanned is an instance whose recorded plan has nothing to do: its
// first drift pass after the join was made.
func inSyncPlanned(wi *wsuv1.WindowsInstance) bool {
	p := wi.Status.LastPlan
	return joinedReady(wi) && p.Add+p.Change+p.Destroy+p.Run == 0
}

// countingRunner counts the controller's playbook runs by mode.
type countingRunner struct {
	inner run.Runner
	mu    sync.Mutex
	modes map[engine.Mode]int64
}

// Run implements run.Runner.
func (r *countingRunner) Run(ctx context.Context, req run.Request) run.Outcome {
	r.mu.Lock()
	if r.modes == nil {
		r.modes = map[engine.Mode]int64{}
	}
	r.modes[req.Mode]++
	r.mu.Unlock()
	return r.inner.Run(ctx, req)
}

func (r *countingRunner) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.modes = nil
}

func (r *countingRunner) count(m engine.Mode) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.modes[m]
}

// requestCounter counts the controller's API requests (a watch is one)
// and, among them, writes of a WindowsInstance's status.
type requestCounter struct {
	total, statusWrites atomic.Int64
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.total.Add(1)
		if (req.Method == http.MethodPatch || req.Method == http.MethodPut) &&
			strings.Contains(req.URL.Path, "/windowsinstances/") && strings.HasSuffix(req.URL.Path, "/status") {
			c.statusWrites.Add(1)
		}
		return rt.RoundTrip(req)
	})
}

func (c *requestCounter) reset() {
	c.total.Store(0)
	c.statusWrites.Store(0)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// selfPeakRSS is this process's largest resident set so far, in bytes.
func selfPeakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}
