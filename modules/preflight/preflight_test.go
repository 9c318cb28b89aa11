package preflight

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/agenttest"
	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
	"github.com/wsu-project/wsu/modules/windows"
	"github.com/wsu-project/wsu/test/kubetest"
)

var ctx = context.Background()

var testCluster *kubetest.Cluster

func TestMain(m *testing.M) {
	code := m.Run()
	if testCluster != nil {
		if err := testCluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

func cluster(t *testing.T) *kubetest.Cluster {
	t.Helper()
	if testCluster == nil {
		c, err := kubetest.New(ctx, func(string, ...any) {})
		require.NoError(t, err)
		testCluster = c
	}
	return testCluster
}

// fixture is a fresh simulated host and a payload file of 64 KiB.
type fixture struct {
	sim     *sim.Host
	payload string
}

// agent reaches the host through the real agent protocol, as a run does
// (so sys.time and fs.free cross the wire). Its facts come with the
// agent's hello: start it after the test's set-up.
func (f fixture) agent(t *testing.T) host.Host {
	return agenttest.Start(t, f.sim, agenttest.Options{}).Client
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	s, err := sim.New(t.TempDir(), sim.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Shutdown(context.Background())) })
	p := filepath.Join(t.TempDir(), "kubelet.exe")
	require.NoError(t, os.WriteFile(p, make([]byte, 64<<10), 0o644))
	return fixture{sim: s, payload: p}
}

func (f fixture) config(t *testing.T, kubeconfig string, over map[string]cty.Value) modules.Config {
	attrs := map[string]cty.Value{
		"kubeconfig": cty.StringVal(kubeconfig),
		"node_name":  cty.StringVal("win-01"),
		"services":   cty.ListVal([]cty.Value{cty.StringVal("kubelet"), cty.StringVal("containerd")}),
		"payload":    cty.MapVal(map[string]cty.Value{`C:\k\kubelet.exe`: cty.StringVal(f.payload)}),
	}
	for k, v := range over {
		attrs[k] = v
	}
	return moduletest.Config(t, Preflight{}, attrs)
}

// Each problem fails the check with one error, at the argument it
// concerns, in plan; a clean host passes every check.
func TestPreflight(t *testing.T) {
	c := cluster(t)
	m := Preflight{Cache: kube.NewCache(kube.Defaults{})}
	service := func(desc string) func(t *testing.T, f fixture) {
		return func(t *testing.T, f fixture) {
			require.NoError(t, f.sim.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\Program Files\kubelet.exe`, Description: desc, StartType: host.StartAutomatic}))
		}
	}
	tests := []struct {
		name        string
		setup       func(t *testing.T, f fixture)
		over        map[string]cty.Value
		wantSummary string // "" passes
		wantAttr    string
		wantDetail  string
		// wantInstalled: the services reported as wsu's, already there.
		wantInstalled []string
		// wantServices is in the services check's finding.
		wantServices string
		// wantWMCO: the host is one WMCO configured, adopted.
		wantWMCO bool
	}{
		{name: "clean host"},
		{name: "wsu's own kubelet (a re-run)", setup: service(windows.ManagedDescription), wantInstalled: []string{"kubelet"}},
		{name: "upper-case node name", over: map[string]cty.Value{"node_name": cty.StringVal("WIN-01")},
			wantSummary: "Invalid node name", wantAttr: "node_name", wantDetail: "upper-case"},
		{name: "underscore in node name", over: map[string]cty.Value{"node_name": cty.StringVal("win_01")},
			wantSummary: "Invalid node name", wantAttr: "node_name", wantDetail: "RFC 1123"},
		{name: "node name of 64 characters", over: map[string]cty.Value{"node_name": cty.StringVal(strings.Repeat("w", 64))},
			wantSummary: "Invalid node name", wantAttr: "node_name", wantDetail: "64 characters"},
		{name: "Windows Server 2016", setup: func(t *testing.T, f fixture) { require.NoError(t, f.sim.SetBuild("14393")) },
			wantSummary: "Windows build not supported", wantAttr: "min_build", wantDetail: "build 14393"},
		{name: "someone else's kubelet", setup: service("Kubernetes node agent"),
			wantSummary: "Service kubelet is not wsu's", wantAttr: "services", wantDetail: `C:\Program Files\kubelet.exe`},
		{name: "someone else's kubelet, adopted on purpose", setup: service("Kubernetes node agent"),
			over:         map[string]cty.Value{"adopt": cty.ListVal([]cty.Value{cty.StringVal("kubelet")})},
			wantServices: `adopting kubelet (binary C:\Program Files\kubelet.exe)`},
		{name: "adopting the kubelet does not adopt containerd", setup: func(t *testing.T, f fixture) {
			require.NoError(t, f.sim.CreateService(ctx, host.ServiceConfig{Name: "containerd", BinaryPath: `C:\Program Files\containerd\containerd.exe`, StartType: host.StartAutomatic}))
		}, over: map[string]cty.Value{"adopt": cty.ListVal([]cty.Value{cty.StringVal("kubelet")})},
			wantSummary: "Service containerd is not wsu's", wantAttr: "services", wantDetail: `containerd.exe`},
		{name: "WMCO's kubelet and containerd, adopted", setup: wmcoServices,
			over:         map[string]cty.Value{"adopt_wmco": cty.True},
			wantServices: `adopting WMCO's containerd (binary C:\k\containerd\containerd.exe), WMCO's kubelet (binary C:\k\kube-log-runner.exe)`, wantWMCO: true},
		{name: "WMCO's kubelet, adopt_wmco off", setup: service("OpenShift managed kubelet"),
			wantSummary: "Service kubelet is not wsu's", wantAttr: "services", wantDetail: "WMCO created it: set adopt_wmco = true"},
		{name: "adopt_wmco does not adopt another tool's kubelet", setup: service("Kubernetes node agent"),
			over:        map[string]cty.Value{"adopt_wmco": cty.True},
			wantSummary: "Service kubelet is not wsu's", wantAttr: "services", wantDetail: `C:\Program Files\kubelet.exe`},
		{name: "disk too full for the payload", setup: func(t *testing.T, f fixture) { require.NoError(t, f.sim.SetDiskFree(16<<10)) },
			wantSummary: "Not enough free disk space", wantAttr: "disk_path", wantDetail: "16.0 KiB free"},
		{name: "reserve beyond the free space", over: map[string]cty.Value{"disk_reserve": cty.NumberIntVal(1 << 62)},
			wantSummary: "Not enough free disk space", wantAttr: "disk_path"},
		{name: "payload already there needs no space", setup: func(t *testing.T, f fixture) {
			require.NoError(t, f.sim.MkdirAll(ctx, `C:\k`, 0o755))
			require.NoError(t, f.sim.WriteFile(ctx, `C:\k\kubelet.exe`, strings.NewReader(string(make([]byte, 64<<10))), 0o755))
			require.NoError(t, f.sim.SetDiskFree(16<<10))
		}},
		{name: "clock two minutes behind", setup: func(t *testing.T, f fixture) { require.NoError(t, f.sim.SetClockOffset(-2*time.Minute)) },
			wantSummary: "Host clock off the API server's", wantAttr: "max_clock_skew", wantDetail: "behind"},
		{name: "clock a minute ahead", setup: func(t *testing.T, f fixture) { require.NoError(t, f.sim.SetClockOffset(time.Minute)) },
			wantSummary: "Host clock off the API server's", wantAttr: "max_clock_skew", wantDetail: "ahead of"},
		{name: "clock 2s off is within the default skew", setup: func(t *testing.T, f fixture) { require.NoError(t, f.sim.SetClockOffset(2*time.Second)) }},
		{name: "API server unreachable from the node", over: map[string]cty.Value{"api_server": cty.StringVal("https://127.0.0.1:1")},
			wantSummary: "API server unreachable from the node", wantAttr: "api_server", wantDetail: "127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.setup != nil {
				tt.setup(t, f)
			}
			cfg := f.config(t, c.Kubeconfig, tt.over)
			resp := moduletest.Plan(t, m, modules.PlanRequest{Config: cfg, Host: f.agent(t)})
			assert.Nil(t, resp.Change, "a preflight never changes anything")
			if tt.wantSummary == "" {
				require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
				checks := resp.Result.GetAttr("checks").AsValueMap()
				assert.Len(t, checks, 6, "every check passed: %v", checks)
				assert.Contains(t, resp.Result.GetAttr("summary").AsString(), "6 checks passed")
				var installed []string
				for _, v := range resp.Result.GetAttr("installed").AsValueSlice() {
					installed = append(installed, v.AsString())
				}
				assert.Equal(t, tt.wantInstalled, installed, "the services wsu installed before")
				assert.Contains(t, checks["services"].AsString(), tt.wantServices)
				assert.Equal(t, tt.wantWMCO, resp.Result.GetAttr("wmco").True(), "a host WMCO configured")
				return
			}
			require.Len(t, resp.Diagnostics, 1, "one error per problem: %v", resp.Diagnostics)
			d := moduletest.RequireError(t, resp.Diagnostics, cfg, tt.wantSummary, tt.wantAttr)
			assert.Contains(t, d.Detail, tt.wantDetail)
			assert.Len(t, resp.Result.GetAttr("checks").AsValueMap(), 5, "the other checks still ran and passed")
		})
	}
}

// wmcoServices creates the kubelet and containerd services as WMCO does:
// its binaries under C:\k, its description marker.
func wmcoServices(t *testing.T, f fixture) {
	for _, c := range []host.ServiceConfig{
		{Name: "containerd", BinaryPath: `C:\k\containerd\containerd.exe`, Description: "OpenShift managed containerd"},
		{Name: "kubelet", BinaryPath: `C:\k\kube-log-runner.exe`, Description: "OpenShift managed kubelet", Dependencies: []string{"containerd"}},
	} {
		c.StartType = host.StartAutomatic
		require.NoError(t, f.sim.CreateService(ctx, c))
	}
}

// Several problems: each is its own error.
func TestPreflightReportsEveryProblem(t *testing.T) {
	c := cluster(t)
	f := newFixture(t)
	require.NoError(t, f.sim.SetBuild("9600"))
	require.NoError(t, f.sim.SetClockOffset(10*time.Minute))
	cfg := f.config(t, c.Kubeconfig, map[string]cty.Value{"node_name": cty.StringVal("Bad_Name")})
	resp := moduletest.Plan(t, Preflight{Cache: kube.NewCache(kube.Defaults{})}, modules.PlanRequest{Config: cfg, Host: f.agent(t)})
	var summaries []string
	for _, d := range resp.Diagnostics {
		assert.Equal(t, hcl.DiagError, d.Severity)
		summaries = append(summaries, d.Summary)
	}
	assert.Equal(t, []string{"Invalid node name", "Windows build not supported", "Host clock off the API server's"}, summaries,
		"told in the checks' order, though they ran side by side")
}

// meeting holds each call of a check's first read until every other
// check has made its own first read: run one after another, the checks
// would wait on each other forever (here: until the deadline).
type meeting struct {
	host.Host
	arrived chan string
	all     chan struct{}
	seen    sync.Map
}

func (m *meeting) meet(ctx context.Context, what string) error {
	if _, dup := m.seen.LoadOrStore(what, true); !dup {
		m.arrived <- what
	}
	select {
	case <-m.all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s waited for the other checks: %w", what, ctx.Err())
	}
}

func (m *meeting) QueryService(ctx context.Context, name string) (host.ServiceInfo, error) {
	if err := m.meet(ctx, "services"); err != nil {
		return host.ServiceInfo{}, err
	}
	return m.Host.QueryService(ctx, name)
}

func (m *meeting) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	if err := m.meet(ctx, "stat "+path); err != nil {
		return host.FileInfo{}, err
	}
	return m.Host.Stat(ctx, path)
}

func (m *meeting) DialTCP(ctx context.Context, addr string, timeout time.Duration) error {
	if err := m.meet(ctx, "dial"); err != nil {
		return err
	}
	return m.Host.DialTCP(ctx, addr, timeout)
}

func (m *meeting) SystemTime(ctx context.Context) (time.Time, error) {
	if err := m.meet(ctx, "clock"); err != nil {
		return time.Time{}, err
	}
	return m.Host.SystemTime(ctx)
}

// The checks, and the payload's stats within the disk check, run side by
// side: the services, both payload files' stats, the API server's dial
// and the clock are all asked before any is answered.
func TestPreflightChecksSideBySide(t *testing.T) {
	c := cluster(t)
	f := newFixture(t)
	second := filepath.Join(t.TempDir(), "kube-proxy.exe")
	require.NoError(t, os.WriteFile(second, []byte("kube-proxy"), 0o644))
	cfg := f.config(t, c.Kubeconfig, map[string]cty.Value{"payload": cty.MapVal(map[string]cty.Value{
		`C:\k\kubelet.exe`: cty.StringVal(f.payload), `C:\k\kube-proxy.exe`: cty.StringVal(second)})})
	want := []string{"services", `stat C:\k\kubelet.exe`, `stat C:\k\kube-proxy.exe`, "dial", "clock"}
	m := &meeting{Host: f.agent(t), arrived: make(chan string, len(want)), all: make(chan struct{})}
	go func() {
		var got []string
		for range want {
			got = append(got, <-m.arrived)
		}
		assert.ElementsMatch(t, want, got)
		close(m.all)
	}()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp := Preflight{Cache: kube.NewCache(kube.Defaults{})}.Plan(tctx, modules.PlanRequest{Config: cfg, Host: m})
	require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
	assert.Contains(t, resp.Result.GetAttr("summary").AsString(), "6 checks passed")
}

func TestPreflightValidate(t *testing.T) {
	for _, tt := range []struct {
		attr string
		v    cty.Value
	}{
		{"max_clock_skew", cty.NumberIntVal(-1)},
		{"disk_reserve", cty.NumberIntVal(-5)},
		{"api_server", cty.StringVal("not a url")},
	} {
		cfg := moduletest.Config(t, Preflight{}, map[string]cty.Value{"node_name": cty.StringVal("n"), tt.attr: tt.v})
		diags := Preflight{}.Validate(modules.ValidateRequest{Config: cfg})
		moduletest.RequireError(t, diags, cfg, "Invalid "+tt.attr, tt.attr)
	}
}

// On a kubeadm cluster (the test bed publishes cluster-info) the address
// nodes use is cluster-info's server.
func TestNodeAPIURL(t *testing.T) {
	c := cluster(t)
	cl, err := kube.NewCache(kube.Defaults{}).Get(c.Kubeconfig, "")
	require.NoError(t, err)
	u, err := kube.NodeAPIURL(ctx, cl)
	require.NoError(t, err)
	assert.Equal(t, cl.Config.Host, u, "the test bed's cluster-info names the server wsu uses, or it has none")
	off, unc, err := kube.ClockOffset(ctx, cl)
	require.NoError(t, err)
	assert.Less(t, off.Abs(), unc+time.Second, "the API server runs on this machine's clock")
}
