package windows

import (
	"errors"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

const (
	containerdExe    = `C:\Program Files\containerd\containerd.exe`
	hybridOverlayExe = `C:\k\hybrid-overlay-node.exe`
)

// node is a simulated node's services as the stock playbooks make them:
// kube-proxy needs hybrid-overlay-node, which needs the kubelet, which needs
// containerd. windows-exporter also depends on the kubelet but is stopped;
// csi-proxy depends on nothing. It returns each service's pid.
func node(t *testing.T, h host.Host) map[string]int {
	t.Helper()
	runningService(t, h, "containerd", containerdExe)
	dependentService(t, h, "kubelet", kubeletExe, "containerd")
	dependentService(t, h, "hybrid-overlay-node", hybridOverlayExe, "kubelet")
	dependentService(t, h, "kube-proxy", kubeProxy, "hybrid-overlay-node")
	dependentService(t, h, "windows-exporter", `C:\k\windows-exporter.exe`, "kubelet")
	require.NoError(t, h.StopService(ctx, "windows-exporter", 0))
	runningService(t, h, "csi-proxy", `C:\k\csi-proxy.exe`)
	return pids(t, h)
}

var nodeServices = []string{"containerd", "kubelet", "hybrid-overlay-node", "kube-proxy", "windows-exporter", "csi-proxy"}

func pids(t *testing.T, h host.Host) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, s := range nodeServices {
		out[s] = query(t, h, s).PID // 0: stopped
	}
	return out
}

// restartedOnly checks that exactly the named services run in new
// processes and every other service kept its process (or stayed stopped).
func restartedOnly(t *testing.T, before, after map[string]int, restarted ...string) {
	t.Helper()
	for _, s := range nodeServices {
		if contains(restarted, s) {
			assert.NotZerof(t, after[s], "%s runs again", s)
			assert.NotEqualf(t, before[s], after[s], "%s was restarted", s)
		} else {
			assert.Equalf(t, before[s], after[s], "%s was left alone", s)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// stopStart is the log of stopping services in order and starting them in
// reverse.
func stopStart(services ...string) []string {
	var ops []string
	for _, s := range services {
		ops = append(ops, "stop "+s)
	}
	for i := len(services) - 1; i >= 0; i-- {
		ops = append(ops, "start "+services[i])
	}
	return ops
}

// Restarting a service others depend on stops its running dependents
// first (deepest first) and starts them again after it, in dependency
// order; the plan lists them all. A stopped dependent stays stopped.
func TestServiceRestartWithDependents(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]cty.Value
		// wantStops is the plan's Restarts and the stop order.
		wantStops  []string
		wantFields []string
	}{
		{
			name:      "restart containerd (the handler)",
			attrs:     map[string]cty.Value{"name": cty.StringVal("containerd"), "state": cty.StringVal("restarted")},
			wantStops: []string{"kube-proxy", "hybrid-overlay-node", "kubelet", "containerd"},
		},
		{
			name:      "restart kubelet (the handler)",
			attrs:     map[string]cty.Value{"name": cty.StringVal("kubelet"), "state": cty.StringVal("restarted")},
			wantStops: []string{"kube-proxy", "hybrid-overlay-node", "kubelet"},
		},
		{
			name: "new kubelet arguments",
			attrs: map[string]cty.Value{
				"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe), "args": strs("--v=4"),
				"dependencies": strs("containerd"),
			},
			wantStops:  []string{"kube-proxy", "hybrid-overlay-node", "kubelet"},
			wantFields: []string{"args"},
		},
		{
			name:      "nothing depends on kube-proxy",
			attrs:     map[string]cty.Value{"name": cty.StringVal("kube-proxy"), "state": cty.StringVal("restarted")},
			wantStops: []string{"kube-proxy"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			before := node(t, h)
			f := &fakeHost{Host: h}
			cfg := cfgFor(t, Service{}, tt.attrs)
			pr := plan(t, Service{}, f, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.wantStops, pr.Change.Restarts, "the plan names every service that restarts")
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
			assert.Empty(t, f.ops(), "planning stopped nothing")

			ar := apply(t, Service{}, f, cfg, pr.Change)
			require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			assert.Equal(t, stopStart(tt.wantStops...), f.ops())
			restartedOnly(t, before, pids(t, h), tt.wantStops...)
		})
	}
}

// state = "stopped" stops the running dependents too, and says so; they
// stay stopped, since starting one would start the service again.
func TestServiceStopWithDependents(t *testing.T) {
	h := newHost(t)
	before := node(t, h)
	f := &fakeHost{Host: h}
	cfg := cfgFor(t, Service{}, map[string]cty.Value{"name": cty.StringVal("kubelet"), "state": cty.StringVal("stopped")})
	pr := plan(t, Service{}, f, cfg)
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	require.NotNil(t, pr.Change)
	assert.Empty(t, pr.Change.Restarts, "nothing is started again")
	assert.Equal(t, strs("kube-proxy", "hybrid-overlay-node"), field(t, pr.Change, dependentsField).New)

	pr, _ = converge(t, Service{}, f, cfg)
	assert.Equal(t, []string{"stop kube-proxy", "stop hybrid-overlay-node", "stop kubelet"}, f.ops())
	after := pids(t, h)
	for _, s := range []string{"kube-proxy", "hybrid-overlay-node", "kubelet"} {
		assert.Equalf(t, host.ServiceStopped, query(t, h, s).State, "%s", s)
	}
	assert.Equal(t, before["containerd"], after["containerd"])
	assert.Equal(t, before["csi-proxy"], after["csi-proxy"])
}

// What the fix is for: the SCM (and the simulation) refuses to stop a
// service while a dependent runs.
func TestStopRefusedWhileDependentsRun(t *testing.T) {
	h := newHost(t)
	node(t, h)
	err := route(t, h).StopService(ctx, "containerd", 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), sim.ErrDependentServicesRunning.Error())
	assert.Contains(t, err.Error(), "kubelet")
}

// A stop that fails midway starts again what was stopped, in dependency
// order, and reports the error: the node is not left half down.
func TestServiceRestartStopFailsMidway(t *testing.T) {
	h := newHost(t)
	before := node(t, h)
	f := &fakeHost{Host: h, stopErr: map[string]error{"kubelet": errors.New("the service did not respond (ERROR_SERVICE_REQUEST_TIMEOUT)")}}
	cfg := cfgFor(t, Service{}, map[string]cty.Value{"name": cty.StringVal("containerd"), "state": cty.StringVal("restarted")})
	pr := plan(t, Service{}, f, cfg)
	require.NotNil(t, pr.Change)
	ar := apply(t, Service{}, f, cfg, pr.Change)
	d := requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Cannot stop service", "state")
	assert.Contains(t, d.Detail, "ERROR_SERVICE_REQUEST_TIMEOUT")
	assert.Equal(t, []string{
		"stop kube-proxy", "stop hybrid-overlay-node", "stop kubelet",
		"start hybrid-overlay-node", "start kube-proxy",
	}, f.ops())
	restartedOnly(t, before, pids(t, h), "kube-proxy", "hybrid-overlay-node")
}

// A service that will not start again is reported, and its dependents are
// still started (the SCM starts the service with them if it can).
func TestServiceRestartStartFails(t *testing.T) {
	h := newHost(t)
	node(t, h)
	f := &fakeHost{Host: h, startErr: map[string]error{"hybrid-overlay-node": errors.New("the service did not start")}}
	cfg := cfgFor(t, Service{}, map[string]cty.Value{"name": cty.StringVal("kubelet"), "state": cty.StringVal("restarted")})
	pr := plan(t, Service{}, f, cfg)
	require.NotNil(t, pr.Change)
	ar := apply(t, Service{}, f, cfg, pr.Change)
	d := requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Cannot start service hybrid-overlay-node again", "state")
	assert.Contains(t, d.Detail, "did not start")
	assert.Equal(t, stopStart("kube-proxy", "hybrid-overlay-node", "kubelet"), f.ops(), "kube-proxy is still started")
	assert.Equal(t, host.ServiceRunning, query(t, h, "kubelet").State)
}

// Replacing the binary of a service others depend on: the plan lists the
// running dependents as restarted too, apply stops them first and starts
// them after the service, also when the write fails.
func TestCopyServiceWithDependents(t *testing.T) {
	tests := []struct {
		name      string
		dest      string
		service   cty.Value // null: detected from the file name
		writeErr  error
		wantStops []string
	}{
		{name: "kubelet", dest: kubeletExe, service: cty.StringVal("kubelet"),
			wantStops: []string{"kube-proxy", "hybrid-overlay-node", "kubelet"}},
		{name: "kubelet detected", dest: kubeletExe, service: cty.NullVal(cty.String),
			wantStops: []string{"kube-proxy", "hybrid-overlay-node", "kubelet"}},
		{name: "containerd", dest: containerdExe, service: cty.StringVal("containerd"),
			wantStops: []string{"kube-proxy", "hybrid-overlay-node", "kubelet", "containerd"}},
		{name: "hybrid-overlay-node", dest: hybridOverlayExe, service: cty.StringVal("hybrid-overlay-node"),
			wantStops: []string{"kube-proxy", "hybrid-overlay-node"}},
		{name: "write fails", dest: containerdExe, service: cty.StringVal("containerd"), writeErr: errors.New("disk full"),
			wantStops: []string{"kube-proxy", "hybrid-overlay-node", "kubelet", "containerd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			before := node(t, h)
			old := readFile(t, h, tt.dest)
			f := &fakeHost{Host: h, writeErr: tt.writeErr}
			cfg := cfgFor(t, Copy{}, map[string]cty.Value{
				"src": cty.StringVal(localSrc(t, "new "+tt.name)), "dest": cty.StringVal(tt.dest), "service": tt.service,
			})
			pr := plan(t, Copy{}, f, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.wantStops, pr.Change.Restarts, "the plan names every service that restarts")
			assert.Empty(t, f.ops(), "planning stopped nothing")

			ar := apply(t, Copy{}, f, cfg, pr.Change)
			n := len(tt.wantStops)
			want := stopStart(tt.wantStops...)
			want = append(want[:n:n], append([]string{"write " + tt.dest}, want[n:]...)...)
			assert.Equal(t, want, f.ops())
			restartedOnly(t, before, pids(t, h), tt.wantStops...)
			if tt.writeErr != nil {
				requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Cannot write file", "dest")
				assert.Equal(t, old, readFile(t, h, tt.dest), "old binary kept")
				return
			}
			require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			assert.Equal(t, "new "+tt.name, readFile(t, h, tt.dest))
			assert.Nil(t, plan(t, Copy{}, h, cfg).Change, "second plan: no change")
		})
	}
}

// A service known only at apply ("(known after apply)" in the plan) is
// stopped with its dependents all the same.
func TestCopyUnknownServiceWithDependents(t *testing.T) {
	h := newHost(t)
	before := node(t, h)
	f := &fakeHost{Host: h}
	cfg := cfgFor(t, Copy{}, map[string]cty.Value{
		"src": cty.StringVal(localSrc(t, "new kubelet")), "dest": cty.StringVal(kubeletExe), "service": cty.StringVal("kubelet"),
	})
	ar := apply(t, Copy{}, f, cfg, &modules.Change{Action: modules.Update, Subject: kubeletExe, Restarts: []string{knownAfterApply}})
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	stops := []string{"kube-proxy", "hybrid-overlay-node", "kubelet"}
	want := append(stopStart(stops...)[:3:3], append([]string{"write " + kubeletExe}, stopStart(stops...)[3:]...)...)
	assert.Equal(t, want, f.ops())
	restartedOnly(t, before, pids(t, h), stops...)
}
