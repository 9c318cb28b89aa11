package windows

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

const overlay = "OVNKubernetesHybridOverlayNetwork"

// fast keeps waits short: the hooks decide when the condition holds, so no
// test depends on the clock beyond an interval of a few milliseconds.
var fast = map[string]cty.Value{"interval": cty.NumberFloatVal(0.005), "timeout": cty.NumberIntVal(30)}

func waitAttrs(extra map[string]cty.Value) map[string]cty.Value {
	m := map[string]cty.Value{}
	for k, v := range fast {
		m[k] = v
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// listen opens a real TCP listener on 127.0.0.1, closed when the test ends.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

func portOf(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// closedPort is a port nothing listens on (any more).
func closedPort(t *testing.T) int {
	ln := listen(t)
	ln.Close()
	return portOf(ln)
}

func TestWait(t *testing.T) {
	opens := closedPort(t)
	closes := listen(t)
	tests := []struct {
		name         string
		setup        func(t *testing.T, h *sim.Host)
		attrs        map[string]cty.Value
		becomes      func(t *testing.T, h *sim.Host) error // makes the condition hold, on the third probe
		wantSubject  string
		wantObserved string // at plan time
		wantResult   string
	}{
		{
			name:         "service starts",
			setup:        func(t *testing.T, h *sim.Host) { stoppedService(t, h, "kubelet") },
			attrs:        map[string]cty.Value{"service": cty.StringVal("kubelet")},
			becomes:      func(t *testing.T, h *sim.Host) error { return h.StartService(ctx, "kubelet") },
			wantSubject:  "wait for service kubelet to be running",
			wantObserved: "stopped", wantResult: "running",
		},
		{
			name:         "service stops",
			setup:        func(t *testing.T, h *sim.Host) { runningService(t, h, "kubelet", kubeletExe) },
			attrs:        map[string]cty.Value{"service": cty.StringVal("kubelet"), "state": cty.StringVal("stopped")},
			becomes:      func(t *testing.T, h *sim.Host) error { return h.StopService(ctx, "kubelet", 0) },
			wantSubject:  "wait for service kubelet to be stopped",
			wantObserved: "running", wantResult: "stopped",
		},
		{
			name:         "service deleted",
			setup:        func(t *testing.T, h *sim.Host) { stoppedService(t, h, "kubelet") },
			attrs:        map[string]cty.Value{"service": cty.StringVal("kubelet"), "state": cty.StringVal("absent")},
			becomes:      func(t *testing.T, h *sim.Host) error { return h.DeleteService(ctx, "kubelet", 0) },
			wantSubject:  "wait for service kubelet to be deleted",
			wantObserved: "stopped", wantResult: "absent",
		},
		{
			name:  "file appears",
			attrs: map[string]cty.Value{"file": cty.StringVal(`C:\k\kubeconfig`)},
			becomes: func(t *testing.T, h *sim.Host) error {
				writeFile(t, h, `C:\k\kubeconfig`, "x")
				return nil
			},
			wantSubject:  `wait for file C:\k\kubeconfig to exist`,
			wantObserved: "missing", wantResult: "exists",
		},
		{
			name: "network appears",
			setup: func(t *testing.T, h *sim.Host) {
				require.NoError(t, h.AddHNSNetwork(host.HNSNetwork{Name: "nat", Type: "NAT"}))
			},
			attrs: map[string]cty.Value{"hns_network": cty.StringVal(overlay)},
			becomes: func(t *testing.T, h *sim.Host) error {
				return h.AddHNSNetwork(host.HNSNetwork{Name: overlay, Type: "Overlay"})
			},
			wantSubject:  "wait for HNS network " + overlay + " to exist",
			wantObserved: "missing (networks: nat)", wantResult: "exists",
		},
		{
			name:  "port opens",
			attrs: map[string]cty.Value{"port": cty.NumberIntVal(int64(opens))},
			becomes: func(t *testing.T, h *sim.Host) error {
				ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", opens))
				if err == nil {
					t.Cleanup(func() { ln.Close() })
				}
				return err
			},
			wantSubject:  fmt.Sprintf("wait for port 127.0.0.1:%d to be open", opens),
			wantObserved: "closed", wantResult: "open",
		},
		{
			name:         "port closes",
			attrs:        map[string]cty.Value{"port": cty.NumberIntVal(int64(portOf(closes))), "host": cty.StringVal("localhost"), "state": cty.StringVal("closed")},
			becomes:      func(t *testing.T, h *sim.Host) error { return closes.Close() },
			wantSubject:  fmt.Sprintf("wait for port localhost:%d to be closed", portOf(closes)),
			wantObserved: "open", wantResult: "closed",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			f := &fakeHost{Host: h}
			cfg := cfgFor(t, Wait{}, waitAttrs(tt.attrs))
			pr := plan(t, Wait{}, f, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, modules.Run, pr.Change.Action)
			assert.Equal(t, tt.wantSubject, pr.Change.Subject)
			assert.Equal(t, cty.StringVal(tt.wantObserved), field(t, pr.Change, "state").Old)
			assert.Equal(t, cty.StringVal(tt.wantResult), field(t, pr.Change, "state").New)

			f.onProbe = func(n int) error {
				if n == 3 { // plan was probe 1; apply sees "not yet" once
					return tt.becomes(t, h)
				}
				return nil
			}
			ar := apply(t, Wait{}, f, cfg, pr.Change)
			require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			assert.Equal(t, cty.StringVal(tt.wantResult), ar.Result.GetAttr("observed"))
			assert.Equal(t, 3, f.probes)

			again := plan(t, Wait{}, h, cfg)
			assert.Nil(t, again.Change, "second apply: no change")
			assert.Equal(t, cty.NumberIntVal(0), again.Result.GetAttr("waited"))
		})
	}
}

// TestWaitBacksOff: a wait whose interval is an hour still checks soon:
// its gaps start at 100 ms and grow by half, so the condition that holds by the
// third probe ends it (without the backoff it would sleep an hour; the
// context's minute is a bound for a hung test, not a speed goal).
func TestWaitBacksOff(t *testing.T) {
	h := newHost(t)
	stoppedService(t, h, "kubelet")
	f := &fakeHost{Host: h}
	f.onProbe = func(n int) error {
		if n == 3 {
			return h.StartService(ctx, "kubelet")
		}
		return nil
	}
	cfg := cfgFor(t, Wait{}, map[string]cty.Value{"service": cty.StringVal("kubelet"), "timeout": cty.NumberIntVal(7200), "interval": cty.NumberIntVal(3600)})
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ar := Wait{}.Apply(bounded, modules.ApplyRequest{Host: f, Config: cfg, Change: &modules.Change{Action: modules.Run}})
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.Equal(t, cty.StringVal("running"), ar.Result.GetAttr("observed"))
	assert.Equal(t, 3, f.probes)

	// The schedule: 100 ms, growing by half, up to the interval.
	var gaps []time.Duration
	for g := min(firstGap, 2*time.Second); len(gaps) < 10; g = nextGap(g, 2*time.Second) {
		gaps = append(gaps, g)
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{100 * ms, 150 * ms, 225 * ms, 337500 * time.Microsecond, 506250 * time.Microsecond,
		759375 * time.Microsecond, 1139062500 * time.Nanosecond, 1708593750 * time.Nanosecond, 2000 * ms, 2000 * ms}, gaps)
}

func stoppedService(t *testing.T, h host.Host, name string) {
	t.Helper()
	runningService(t, h, name, `C:\k\`+name+".exe")
	require.NoError(t, h.StopService(ctx, name, 0))
}

func TestWaitTimeout(t *testing.T) {
	h := newHost(t)
	stoppedService(t, h, "kubelet")
	cfg := cfgFor(t, Wait{}, map[string]cty.Value{"service": cty.StringVal("kubelet"), "timeout": cty.NumberFloatVal(0.02), "interval": cty.NumberFloatVal(0.005)})
	ar := apply(t, Wait{}, h, cfg, &modules.Change{Action: modules.Run})
	d := requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Timed out waiting for service kubelet to be running", "service")
	assert.Contains(t, d.Detail, "last observed: stopped")
	assert.Equal(t, cty.StringVal("stopped"), ar.Result.GetAttr("observed"))

	// timeout = 0 checks once.
	cfg = cfgFor(t, Wait{}, map[string]cty.Value{"file": cty.StringVal(`C:\k\x`), "timeout": cty.NumberIntVal(0)})
	ar = apply(t, Wait{}, h, cfg, &modules.Change{Action: modules.Run})
	d = requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, `Timed out waiting for file C:\k\x to exist`, "file")
	assert.Contains(t, d.Detail, "last observed: missing")

	// A port's last observation says why it is closed.
	port := closedPort(t)
	cfg = cfgFor(t, Wait{}, map[string]cty.Value{"port": cty.NumberIntVal(int64(port)), "timeout": cty.NumberIntVal(0)})
	ar = apply(t, Wait{}, h, cfg, &modules.Change{Action: modules.Run})
	d = requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, fmt.Sprintf("Timed out waiting for port 127.0.0.1:%d to be open", port), "port")
	assert.Contains(t, d.Detail, "last observed: closed (cannot connect: dial tcp 127.0.0.1:")
	assert.Contains(t, d.Detail, "connection refused")
	assert.Equal(t, cty.StringVal(fmt.Sprintf("closed (cannot connect: dial tcp 127.0.0.1:%d: connect: connection refused)", port)), ar.Result.GetAttr("observed"))
}

// Errors while the node's network is reconfigured are waited through.
func TestWaitThroughErrors(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "hybrid-overlay-node", `C:\k\hybrid-overlay-node.exe`)
	f := &fakeHost{Host: h, queryErrs: 3}
	cfg := cfgFor(t, Wait{}, waitAttrs(map[string]cty.Value{"service": cty.StringVal("hybrid-overlay-node")}))

	pr := plan(t, Wait{}, f, cfg)
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagWarning, "Cannot check service yet", "service")
	require.NotNil(t, pr.Change)

	ar := apply(t, Wait{}, f, cfg, pr.Change)
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.Equal(t, cty.StringVal("running"), ar.Result.GetAttr("observed"))
	assert.Equal(t, 4, f.probes)

	// Errors until the timeout are reported as the last thing seen.
	f = &fakeHost{Host: h, queryErrs: 1 << 30}
	cfg = cfgFor(t, Wait{}, map[string]cty.Value{"service": cty.StringVal("kubelet"), "timeout": cty.NumberFloatVal(0.02), "interval": cty.NumberFloatVal(0.005)})
	ar = apply(t, Wait{}, f, cfg, &modules.Change{Action: modules.Run})
	d := requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Timed out waiting for service kubelet to be running", "service")
	assert.Contains(t, d.Detail, "connection reset by peer")
}

// An operation the platform lacks will never succeed: fail at once.
func TestWaitNotSupported(t *testing.T) {
	f := &fakeHost{Host: newHost(t), hnsErr: host.NotSupported("HNS networks", "wine")}
	cfg := cfgFor(t, Wait{}, waitAttrs(map[string]cty.Value{"hns_network": cty.StringVal(overlay)}))
	pr := plan(t, Wait{}, f, cfg)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Not supported on this platform", "hns_network")
	ar := apply(t, Wait{}, f, cfg, &modules.Change{Action: modules.Run})
	requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Not supported on this platform", "hns_network")
	assert.Equal(t, 2, f.probes, "no retries")
}

func TestWaitCancelled(t *testing.T) {
	h := newHost(t)
	stoppedService(t, h, "kubelet")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := &fakeHost{Host: h, onProbe: func(n int) error {
		if n == 1 {
			go cancel() // while apply waits out its minute-long interval
		}
		return nil
	}}
	cfg := cfgFor(t, Wait{}, map[string]cty.Value{"service": cty.StringVal("kubelet"), "interval": cty.NumberIntVal(60)})
	ar := Wait{}.Apply(cctx, modules.ApplyRequest{Config: cfg, Host: f, Change: &modules.Change{Action: modules.Run}})
	d := requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Stopped waiting for service kubelet to be running", "service")
	assert.Contains(t, d.Detail, "context canceled")
}

func TestWaitUnknown(t *testing.T) {
	h := newHost(t)
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSubject string
	}{
		{"service", map[string]cty.Value{"service": unknownStr}, "wait for service " + knownAfterApply + " to be running"},
		{"state", map[string]cty.Value{"service": cty.StringVal("kubelet"), "state": unknownStr}, "wait for service kubelet to be " + knownAfterApply},
		{"file", map[string]cty.Value{"file": unknownStr}, "wait for file " + knownAfterApply + " to exist"},
		{"network", map[string]cty.Value{"hns_network": unknownStr}, "wait for HNS network " + knownAfterApply + " to exist"},
		{"port", map[string]cty.Value{"port": cty.UnknownVal(cty.Number)}, "wait for port 127.0.0.1:" + knownAfterApply + " to be open"},
		{"port host", map[string]cty.Value{"port": cty.NumberIntVal(6443), "host": unknownStr}, "wait for port " + knownAfterApply + ":6443 to be open"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := plan(t, Wait{}, h, cfgFor(t, Wait{}, tt.attrs))
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.wantSubject, pr.Change.Subject)
			assert.False(t, pr.Result.GetAttr("waited").IsKnown())
		})
	}
}

func TestWaitValidate(t *testing.T) {
	svc := cty.StringVal("kubelet")
	runValidate(t, Wait{}, []validateCase{
		{name: "service", attrs: map[string]cty.Value{"service": svc}},
		{name: "file", attrs: map[string]cty.Value{"file": cty.StringVal(`C:\k\kubeconfig`)}},
		{name: "network", attrs: map[string]cty.Value{"hns_network": cty.StringVal(overlay)}},
		{name: "nothing", attrs: map[string]cty.Value{}, wantSummary: "Nothing to wait for", wantAttr: "service"},
		{name: "two targets", attrs: map[string]cty.Value{"service": svc, "file": cty.StringVal(`C:\k\x`)}, wantSummary: "Conflicting wait targets", wantAttr: "file"},
		{name: "unknown target still counts", attrs: map[string]cty.Value{"service": svc, "hns_network": unknownStr}, wantSummary: "Conflicting wait targets", wantAttr: "hns_network"},
		{name: "port", attrs: map[string]cty.Value{"port": cty.NumberIntVal(10250)}},
		{name: "port closed on a host", attrs: map[string]cty.Value{"port": cty.NumberIntVal(6443), "host": cty.StringVal("api.cluster.example"), "state": cty.StringVal("closed")}},
		{name: "state for a file", attrs: map[string]cty.Value{"file": cty.StringVal(`C:\k\x`), "state": cty.StringVal("running")}, wantSummary: "state without service or port", wantAttr: "state"},
		{name: "service state for a port", attrs: map[string]cty.Value{"port": cty.NumberIntVal(10250), "state": cty.StringVal("running")}, wantSummary: "Invalid state", wantAttr: "state"},
		{name: "port state for a service", attrs: map[string]cty.Value{"service": svc, "state": cty.StringVal("open")}, wantSummary: "Invalid state", wantAttr: "state"},
		{name: "port zero", attrs: map[string]cty.Value{"port": cty.NumberIntVal(0)}, wantSummary: "Invalid port", wantAttr: "port"},
		{name: "port too big", attrs: map[string]cty.Value{"port": cty.NumberIntVal(65536)}, wantSummary: "Invalid port", wantAttr: "port"},
		{name: "fractional port", attrs: map[string]cty.Value{"port": cty.NumberFloatVal(80.5)}, wantSummary: "Invalid port", wantAttr: "port"},
		{name: "host without port", attrs: map[string]cty.Value{"service": svc, "host": cty.StringVal("10.0.0.1")}, wantSummary: "host without port", wantAttr: "host"},
		{name: "empty host", attrs: map[string]cty.Value{"port": cty.NumberIntVal(80), "host": cty.StringVal("")}, wantSummary: "Invalid host", wantAttr: "host"},
		{name: "port and service", attrs: map[string]cty.Value{"service": svc, "port": cty.NumberIntVal(80)}, wantSummary: "Conflicting wait targets", wantAttr: "port"},
		{name: "bad state", attrs: map[string]cty.Value{"service": svc, "state": cty.StringVal("started")}, wantSummary: "Invalid state", wantAttr: "state"},
		{name: "bad service", attrs: map[string]cty.Value{"service": cty.StringVal(`a\b`)}, wantSummary: "Invalid service name", wantAttr: "service"},
		{name: "relative file", attrs: map[string]cty.Value{"file": cty.StringVal("kubeconfig")}, wantSummary: "Invalid Windows path", wantAttr: "file"},
		{name: "empty network", attrs: map[string]cty.Value{"hns_network": cty.StringVal(" ")}, wantSummary: "Empty network name", wantAttr: "hns_network"},
		{name: "zero interval", attrs: map[string]cty.Value{"service": svc, "interval": cty.NumberIntVal(0)}, wantSummary: "Invalid interval", wantAttr: "interval"},
		{name: "negative timeout", attrs: map[string]cty.Value{"service": svc, "timeout": cty.NumberIntVal(-1)}, wantSummary: "Invalid timeout", wantAttr: "timeout"},
	})
}

// A lost connection never comes back by itself: the wait returns at once
// so the engine can reconnect and run it again.
func TestWaitConnectionLost(t *testing.T) {
	f := &fakeHost{Host: newHost(t), hnsErr: fmt.Errorf("hns.networks: %w", host.ErrConnectionLost)}
	cfg := cfgFor(t, Wait{}, map[string]cty.Value{"hns_network": cty.StringVal(overlay), "timeout": cty.NumberIntVal(600), "interval": cty.NumberFloatVal(0.01)})
	ar := apply(t, Wait{}, f, cfg, &modules.Change{Action: modules.Run})
	requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Connection lost while waiting for HNS network "+overlay+" to exist", "hns_network")
	assert.Equal(t, 1, f.probes, "no polling of a dead connection")
}
