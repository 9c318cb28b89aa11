package windows

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
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
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
)

var ctx = context.Background()

// blockRange is where test configs pretend their module block is.
var blockRange = moduletest.BlockRange

// The shared helpers, under the names this package's tests use.
var (
	cfgFor      = moduletest.Config
	field       = moduletest.Field
	fieldNames  = moduletest.FieldNames
	action      = moduletest.Action
	requireDiag = moduletest.RequireDiag
	strs        = moduletest.Strs
)

// newHost is the simulated Windows host the suite runs against.
func newHost(t *testing.T) *sim.Host {
	t.Helper()
	h, err := sim.New(t.TempDir(), sim.Options{})
	if err != nil && strings.Contains(err.Error(), "Linux only") {
		t.Skip(err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, h.Shutdown(context.Background())) })
	return h
}

// viaAgent routes every module call through the real agent protocol (an
// agent serving the sim over pipes, driven by agent/client). The suite runs
// both ways: directly, and again in a child test process started by
// TestModuleSuiteThroughAgent with WSU_TEST_VIA_AGENT=1.
var viaAgent = os.Getenv("WSU_TEST_VIA_AGENT") == "1"

var agents sync.Map // *sim.Host -> host.Host (the agent client)

// route returns the host module calls go to. Test set-up keeps calling the
// sim directly (AddHNSNetwork and friends are not part of the Host API).
func route(t *testing.T, h host.Host) host.Host {
	if !viaAgent {
		return h
	}
	switch x := h.(type) {
	case *sim.Host:
		if c, ok := agents.Load(x); ok {
			return c.(host.Host)
		}
		c := agenttest.Start(t, x, agenttest.Options{}).Client
		agents.Store(x, c)
		t.Cleanup(func() { agents.Delete(x) })
		return c
	case *fakeHost:
		x.Host = route(t, x.Host) // the fake stays in front of the agent
		return x
	}
	return h
}

func plan(t *testing.T, m modules.Module, h host.Host, cfg modules.Config) modules.PlanResponse {
	t.Helper()
	return moduletest.Plan(t, m, modules.PlanRequest{Config: cfg, Host: route(t, h)})
}

func apply(t *testing.T, m modules.Module, h host.Host, cfg modules.Config, change *modules.Change) modules.ApplyResponse {
	t.Helper()
	return moduletest.Apply(t, m, modules.ApplyRequest{Config: cfg, Host: route(t, h), Change: change})
}

// converge is moduletest.Converge on h (through the agent when the suite
// runs that way).
func converge(t *testing.T, m modules.Module, h host.Host, cfg modules.Config) (modules.PlanResponse, modules.ApplyResponse) {
	t.Helper()
	return moduletest.Converge(t, m, route(t, h), cfg)
}

// validateCase is one row of the Validate tables every module has.
type validateCase struct {
	name        string
	attrs       map[string]cty.Value
	wantSummary string // "" for valid
	wantAttr    string
}

// runValidate checks Validate, and that a bad config never reaches Plan
// (the engine's promise, kept by moduletest.Plan).
func runValidate(t *testing.T, m modules.Module, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, m, tt.attrs)
			diags := m.(modules.Validator).Validate(modules.ValidateRequest{Config: cfg})
			if tt.wantSummary == "" {
				assert.False(t, diags.HasErrors(), "%v", diags)
				return
			}
			requireDiag(t, diags, cfg, hcl.DiagError, tt.wantSummary, tt.wantAttr)
			resp := plan(t, m, nil, cfg)
			assert.Nil(t, resp.Change)
			requireDiag(t, resp.Diagnostics, cfg, hcl.DiagError, tt.wantSummary, tt.wantAttr)
		})
	}
}

func nums(ns ...int64) cty.Value {
	if len(ns) == 0 {
		return cty.ListValEmpty(cty.Number)
	}
	vals := make([]cty.Value, len(ns))
	for i, n := range ns {
		vals[i] = cty.NumberIntVal(n)
	}
	return cty.ListVal(vals)
}

var unknownStr = cty.UnknownVal(cty.String)

// writeFile writes through the host, parents first, as a playbook would.
func writeFile(t *testing.T, h host.Host, path, content string) {
	t.Helper()
	require.NoError(t, h.MkdirAll(ctx, parentDir(path), 0o755))
	require.NoError(t, h.WriteFile(ctx, path, strings.NewReader(content), 0o644))
}

func readFile(t *testing.T, h host.Host, path string) string {
	t.Helper()
	b, err := h.ReadFile(ctx, path, 0)
	require.NoError(t, err)
	return string(b)
}

// runningService installs and starts a service whose binary is a stand-in
// the simulation runs without executing anything.
func runningService(t *testing.T, h host.Host, name, binary string, args ...string) host.ServiceInfo {
	t.Helper()
	writeFile(t, h, binary, "MZ stand-in for "+name)
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{
		Name: name, DisplayName: name, Description: ManagedDescription, BinaryPath: binary, Args: args, StartType: host.StartAutomatic,
	}))
	require.NoError(t, h.StartService(ctx, name))
	info, err := h.QueryService(ctx, name)
	require.NoError(t, err)
	require.Equal(t, host.ServiceRunning, info.State)
	return info
}

// dependentService is runningService for a service depending on others
// (started after them, as the SCM would).
func dependentService(t *testing.T, h host.Host, name, binary string, deps ...string) host.ServiceInfo {
	t.Helper()
	writeFile(t, h, binary, "MZ stand-in for "+name)
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{
		Name: name, DisplayName: name, Description: ManagedDescription, BinaryPath: binary, StartType: host.StartAutomatic, Dependencies: deps,
	}))
	require.NoError(t, h.StartService(ctx, name))
	return query(t, h, name)
}

func query(t *testing.T, h host.Host, name string) host.ServiceInfo {
	t.Helper()
	info, err := h.QueryService(ctx, name)
	require.NoError(t, err)
	return info
}

// fakeHost is a FAKE: the simulated host with chosen operations replaced,
// for faults and timings the simulation cannot produce on its own (a
// platform without recovery actions, a failing write, a service that
// starts while a wait polls). Every call is logged so tests can check the
// order of operations.
type fakeHost struct {
	host.Host

	mu          sync.Mutex
	log         []string
	recoveryErr error             // SetServiceRecovery fails with it
	writeErr    error             // WriteFile fails with it
	registryErr error             // RegistryGet fails with it
	facts       *host.Facts       // replaces the host's facts
	queryErrs   int               // this many probes fail before the real ones
	onProbe     func(n int) error // called before probe n (1-based) of QueryService, Stat, HNSNetworks or DialTCP
	probes      int               // probes so far
	hnsErr      error             // HNSNetworks fails with it
	removeErr   error             // Remove fails with it
	afterList   func(n int)       // called after listing n (1-based) of ReadDir returns
	lists       int               // ReadDir calls so far
	stopErr     map[string]error  // StopService of that service fails with it
	startErr    map[string]error  // StartService of that service fails with it
}

func (f *fakeHost) record(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, op)
}

func (f *fakeHost) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

// probe runs the hook and the scripted failures of polled operations.
func (f *fakeHost) probe() error {
	f.mu.Lock()
	f.probes++
	n, hook, fail := f.probes, f.onProbe, f.probes <= f.queryErrs
	f.mu.Unlock()
	if hook != nil {
		if err := hook(n); err != nil {
			return err
		}
	}
	if fail {
		return errConnectionReset
	}
	return nil
}

// errConnectionReset is what a probe sees while the node's network is
// being reconfigured.
var errConnectionReset = errors.New("read tcp 10.0.0.5:22: connection reset by peer")

func (f *fakeHost) Facts(ctx context.Context) (host.Facts, error) {
	if f.facts != nil {
		return *f.facts, nil
	}
	return f.Host.Facts(ctx)
}

func (f *fakeHost) DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	if err := f.probe(); err != nil {
		return err
	}
	return f.Host.DialTCP(ctx, address, timeout)
}

func (f *fakeHost) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	if err := f.probe(); err != nil {
		return host.FileInfo{}, err
	}
	return f.Host.Stat(ctx, path)
}

func (f *fakeHost) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	f.record("write " + path)
	if f.writeErr != nil {
		return f.writeErr
	}
	return f.Host.WriteFile(ctx, path, content, mode)
}

func (f *fakeHost) Remove(ctx context.Context, path string, recursive bool) error {
	f.record(fmt.Sprintf("remove %s recursive=%t", path, recursive))
	if f.removeErr != nil {
		return f.removeErr
	}
	return f.Host.Remove(ctx, path, recursive)
}

func (f *fakeHost) ReadDir(ctx context.Context, path string, limit int) ([]host.DirEntry, error) {
	f.record(fmt.Sprintf("list %s limit=%d", path, limit))
	ents, err := f.Host.ReadDir(ctx, path, limit)
	f.mu.Lock()
	f.lists++
	n, hook := f.lists, f.afterList
	f.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return ents, err
}

func (f *fakeHost) QueryService(ctx context.Context, name string) (host.ServiceInfo, error) {
	if err := f.probe(); err != nil {
		return host.ServiceInfo{}, err
	}
	return f.Host.QueryService(ctx, name)
}

func (f *fakeHost) SetServiceRecovery(ctx context.Context, name string, r host.ServiceRecovery) error {
	f.record("recovery " + name)
	if f.recoveryErr != nil {
		return f.recoveryErr
	}
	return f.Host.SetServiceRecovery(ctx, name, r)
}

func (f *fakeHost) StartService(ctx context.Context, name string) error {
	f.record("start " + name)
	if err := f.startErr[name]; err != nil {
		return err
	}
	return f.Host.StartService(ctx, name)
}

func (f *fakeHost) StopService(ctx context.Context, name string, timeout time.Duration) error {
	f.record("stop " + name)
	if err := f.stopErr[name]; err != nil {
		return err
	}
	return f.Host.StopService(ctx, name, timeout)
}

func (f *fakeHost) RegistryGet(ctx context.Context, key, name string) (host.RegistryValue, error) {
	if f.registryErr != nil {
		return host.RegistryValue{}, f.registryErr
	}
	return f.Host.RegistryGet(ctx, key, name)
}

func (f *fakeHost) HNSNetworks(ctx context.Context) ([]host.HNSNetwork, error) {
	if err := f.probe(); err != nil {
		return nil, err
	}
	if f.hnsErr != nil {
		return nil, f.hnsErr
	}
	return f.Host.HNSNetworks(ctx)
}

// TestModuleSuiteThroughAgent runs this package's whole suite again in a
// child process with every module call crossing the agent protocol.
func TestModuleSuiteThroughAgent(t *testing.T) {
	if viaAgent {
		return // this is the child
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^Test", "-test.count=1")
	cmd.Env = append(os.Environ(), "WSU_TEST_VIA_AGENT=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the suite through the agent protocol failed:\n%s", out)
	assert.Contains(t, string(out), "PASS")
}
