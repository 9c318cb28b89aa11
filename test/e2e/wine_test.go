//go:build linux

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules/all"
	windowsmod "github.com/wsu-project/wsu/modules/windows"
	"github.com/wsu-project/wsu/playbooks"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/payloadtest"
	winetest "github.com/wsu-project/wsu/test/wine"
)

// TestServicesUnderWine runs the stock playbook steps that create the
// node's services (check-runtime's containerd, copy-payload,
// configure-kubelet's kubelet, kube-proxy, csi-proxy; the fixture
// testdata/wine-services.hcl includes them unchanged) through the engine
// against the Windows build of the agent (`wsu-agent.exe agent`) under Wine:
// Wine's real service control manager, registry and files, with the
// Windows build of the service stand-in as every payload binary. It checks
// each service through the Windows agent (binary path, arguments,
// dependencies, start mode, running) and through the stand-ins' own marker
// files (the process the SCM started got exactly those arguments), then
// that a re-run changes nothing and restarts nothing.
//
// What the Wine prefix cannot provide is left out or stood in for:
//   - no cluster: extract-ignition, CSR approval, Ready and the version
//     annotation are not run (the kubelet stand-in here is the generic
//     service stand-in: it starts, but registers no Node);
//   - no network: hybrid-overlay is not run (it waits for the node subnet
//     annotation and its service creates the HNS networks), and Wine has
//     no HNS. kube-proxy's one HNS step, the source VIP endpoint, goes to a
//     simulated host's HNS table (agent/platform/sim) holding the network
//     hybrid-overlay-node would have made; everything else is Wine. Wine's
//     SCM does not enforce dependencies, so kube-proxy starts although
//     hybrid-overlay-node does not exist (Windows would refuse);
//   - Wine cannot set recovery actions: service_recovery = false.
func TestServicesUnderWine(t *testing.T) {
	w := newWineNode(t)
	node := &harness.Host{NodeName: "wine-node", IPv4: "10.0.0.5"}
	want := wantServices(node, "")
	delete(want, "hybrid-overlay-node")

	t0 := time.Now()
	first := w.run(t, node)
	t.Logf("apply under Wine: %s", time.Since(t0).Round(time.Millisecond))
	require.Falsef(t, first.res.Failed(), "apply under Wine failed:\n%s", first.failures())
	assert.NotEmpty(t, first.changed(), "the first run creates the services")

	started := w.checkServices(t, want)
	t.Logf("first run: %d changed tasks; services: %v", len(first.changed()), started)
	// kube-proxy's source VIP is the endpoint made on the overlay network,
	// and its config on Wine's C: drive names it.
	eps, err := w.hns.HNSEndpoints(context.Background())
	require.NoError(t, err)
	require.Len(t, eps, 1)
	assert.Equal(t, "VIPEndpoint", eps[0].Name)
	conf, err := os.ReadFile(w.prefix.LinuxPath(`C:\k\kube-proxy.conf`))
	require.NoError(t, err)
	assert.Contains(t, string(conf), "sourceVip: "+eps[0].IP)
	assert.Contains(t, string(conf), "clusterCIDR: "+w.nodeNet)
	if t.Failed() {
		return
	}

	t0 = time.Now()
	again := w.run(t, node)
	t.Logf("re-run under Wine: %s", time.Since(t0).Round(time.Millisecond))
	require.Falsef(t, again.res.Failed(), "re-run under Wine failed:\n%s", again.failures())
	assert.Empty(t, again.changed(), "a re-run changes nothing")
	for _, r := range again.res.Recap {
		assert.Zerof(t, r.Changed, "%s: changed tasks in the re-run", r.Host)
		if assert.NotNil(t, r.Traffic, "the Windows agent is metered") {
			assert.Zero(t, r.Traffic.BytesSent, "a re-run sends no file content")
		}
	}
	restarted := w.checkServices(t, want)
	assert.Equal(t, started, restarted, "no service was restarted by the re-run (same pids, no new start in the marker files)")
}

// wineNode is a Wine prefix with the Windows agent and a Windows payload.
type wineNode struct {
	prefix   *winetest.Prefix
	agent    string // Linux path of wsu-agent.exe (GOOS=windows)
	payload  string // payload directory (GOOS=windows stand-ins)
	playbook string
	hns      *sim.Host // HNS, which Wine lacks
	nodeNet  string    // the hybrid-overlay network's subnet
	stderr   string    // the agents' stderr, appended
}

func newWineNode(t *testing.T) *wineNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	w := &wineNode{
		prefix:  winetest.New(t),
		agent:   filepath.Join(dir, "wsu-agent.exe"),
		payload: filepath.Join(dir, "payload"),
		nodeNet: "10.132.3.0/24",
		stderr:  filepath.Join(dir, "agent.stderr"),
	}
	var err error
	w.playbook, err = filepath.Abs(filepath.Join("testdata", "wine-services.hcl"))
	require.NoError(t, err)
	root, err := harness.ModuleRoot()
	require.NoError(t, err)
	build := exec.CommandContext(ctx, "go", "build", "-o", w.agent, "./cmd/wsu-agent")
	build.Dir = root
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the Windows agent: %s", out)
	_, err = payloadtest.Build(ctx, w.payload, payloadtest.Options{GOOS: "windows"})
	require.NoError(t, err)

	// The networks hybrid-overlay-node makes, as its stand-in makes them.
	w.hns, err = sim.New(filepath.Join(dir, "hns"), sim.Options{})
	require.NoError(t, err)
	require.NoError(t, w.hns.AddHNSNetwork(host.HNSNetwork{Name: "BaseOVNKubernetesHybridOverlayNetwork", Type: "Overlay",
		ManagementIP: "10.0.0.5", Subnets: []string{"100.64.0.0/16"}}))
	require.NoError(t, w.hns.AddHNSNetwork(host.HNSNetwork{Name: "OVNKubernetesHybridOverlayNetwork", Type: "Overlay",
		ManagementIP: "10.0.0.5", Subnets: []string{w.nodeNet}}))

	t.Cleanup(func() {
		if t.Failed() {
			if b, _ := os.ReadFile(w.stderr); len(b) > 0 {
				t.Logf("Windows agent stderr:\n%s", tail(string(b), 60))
			}
		}
	})
	return w
}

// wineHost is the Windows agent under Wine as a host.Host, with HNS from
// the simulated host.
type wineHost struct {
	*client.Client
	hns   *sim.Host
	cmd   *exec.Cmd
	stdin interface{ Close() error }
	once  sync.Once
}

func (h *wineHost) HNSNetworks(ctx context.Context) ([]host.HNSNetwork, error) {
	return h.hns.HNSNetworks(ctx)
}

func (h *wineHost) HNSEndpoints(ctx context.Context) ([]host.HNSEndpoint, error) {
	return h.hns.HNSEndpoints(ctx)
}

func (h *wineHost) HNSCreateEndpoint(ctx context.Context, spec host.HNSEndpoint) (host.HNSEndpoint, error) {
	return h.hns.HNSCreateEndpoint(ctx, spec)
}

func (h *wineHost) HNSDeleteEndpoint(ctx context.Context, id string) error {
	return h.hns.HNSDeleteEndpoint(ctx, id)
}

func (h *wineHost) HNSDeleteNetwork(ctx context.Context, id string) error {
	return h.hns.HNSDeleteNetwork(ctx, id)
}

// Close ends the agent's input; the agent exits.
func (h *wineHost) Close() error {
	var err error
	h.once.Do(func() {
		h.Client.Close()
		h.stdin.Close()
		kill := time.AfterFunc(30*time.Second, func() { h.cmd.Process.Kill() })
		defer kill.Stop()
		if werr := h.cmd.Wait(); werr != nil {
			err = fmt.Errorf("the Windows agent did not exit cleanly: %w", werr)
		}
	})
	return err
}

// connect starts `wsu-agent.exe agent` under Wine and speaks the agent protocol
// to it over its stdin and stdout, as the SSH and WinRM transports do.
func (w *wineNode) connect(ctx context.Context) (*wineHost, error) {
	cmd := w.prefix.Command(w.agent, "agent")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// A file, not a pipe: what the agent starts under Wine inherits it.
	stderr, err := os.OpenFile(w.stderr, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := client.Dial(dctx, stdout, stdin)
	if err != nil {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("starting the Windows agent under Wine: %w", err)
	}
	return &wineHost{Client: c, hns: w.hns, cmd: cmd, stdin: stdin}, nil
}

type wineRun struct {
	res    *engine.Result
	events []engine.Event
}

func (r *wineRun) changed() []string {
	var out []string
	for _, ev := range r.events {
		if ev.Type == engine.EventTaskResult && ev.Status == engine.StatusChanged {
			out = append(out, ev.Play+"/"+ev.Address)
		}
	}
	return out
}

func (r *wineRun) failures() string {
	var b strings.Builder
	for _, d := range r.res.Diagnostics {
		fmt.Fprintf(&b, "%s\n", d.Error())
	}
	return b.String()
}

// run applies the fixture playbook to the one host, through the engine.
func (w *wineNode) run(t *testing.T, node *harness.Host) *wineRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	loader := playbook.NewLoader(all.Schemas(), playbooks.FS)
	pb, diags := loader.Load(w.playbook)
	require.False(t, diags.HasErrors(), "%v", diags)
	inv, diags := inventory.ParseINI("inventory.ini", []byte("[windows]\nwine-01\n"))
	require.False(t, diags.HasErrors(), "%v", diags)
	var (
		mu  sync.Mutex
		run = &wineRun{}
	)
	run.res = engine.Run(ctx, engine.Request{
		Playbook:  pb,
		Inventory: inv,
		Inputs: engine.Inputs{Vars: []string{
			"payload_dir=" + w.payload,
			"node_name=" + node.NodeName,
			"node_ip=" + node.IPv4,
			"node_subnet=" + w.nodeNet,
		}},
		Mode:     engine.ModeApply,
		Registry: all.Registry(all.Options{Clusters: kube.NewCache(kube.Defaults{})}),
		Connector: engine.ConnectorFunc(func(ctx context.Context, _ engine.Target) (host.Host, error) {
			return w.connect(ctx)
		}),
		Hooks: engine.HooksFunc(func(ev engine.Event) {
			mu.Lock()
			run.events = append(run.events, ev)
			mu.Unlock()
		}),
		Sources: loader.Sources(),
	})
	return run
}

// standinEvent is one line of a Windows service stand-in's marker file.
type standinEvent struct {
	Event string   `json:"event"`
	PID   int      `json:"pid"`
	Args  []string `json:"args"`
}

// checkServices asserts each service as the Windows agent sees it and as
// its stand-in recorded it; it returns, per service, the pid and the number
// of starts its marker file records.
func (w *wineNode) checkServices(t *testing.T, want map[string]host.ServiceConfig) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := w.connect(ctx)
	require.NoError(t, err)
	defer func() { assert.NoError(t, h.Close()) }()

	out := map[string]string{}
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		cfg := want[name]
		info, err := h.QueryService(ctx, name)
		require.NoError(t, err)
		if !assert.Truef(t, info.Exists, "service %s missing", name) {
			continue
		}
		assert.Equalf(t, host.ServiceRunning, info.State, "service %s state", name)
		assert.Equalf(t, cfg.BinaryPath, info.Config.BinaryPath, "service %s binary", name)
		assert.Equalf(t, cfg.Args, info.Config.Args, "service %s arguments", name)
		assert.ElementsMatchf(t, cfg.Dependencies, info.Config.Dependencies, "service %s dependencies", name)
		assert.Equalf(t, host.StartAutomatic, info.Config.StartType, "service %s start mode", name)
		assert.Equalf(t, windowsmod.ManagedDescription, info.Config.Description, "service %s description", name)

		// The process the SCM runs is the stand-in, started with exactly
		// the service's arguments. kubelet and kube-proxy share a binary
		// (kube-log-runner.exe), so its marker file holds both: a service's
		// starts are those with its first argument (its own -log-file).
		events := w.markerEvents(t, cfg.BinaryPath)
		var starts []standinEvent
		for _, e := range events {
			if e.Event == "start" && (len(cfg.Args) == 0 || len(e.Args) > 0 && e.Args[0] == cfg.Args[0]) {
				starts = append(starts, e)
			}
			assert.Falsef(t, strings.HasPrefix(e.Event, "error"), "%s: the stand-in reported %q", name, e.Event)
		}
		if assert.NotEmptyf(t, starts, "%s: the stand-in never started as a service: %v", name, events) {
			last := starts[len(starts)-1]
			assert.Equalf(t, cfg.Args, last.Args, "%s: the arguments the running process got", name)
			assert.Equalf(t, info.PID, last.PID, "%s: the running process is the last one started", name)
		}
		out[name] = fmt.Sprintf("pid %d, %d starts", info.PID, len(starts))
	}
	// hybrid-overlay-node is not part of this playbook.
	info, err := h.QueryService(ctx, "hybrid-overlay-node")
	require.NoError(t, err)
	assert.False(t, info.Exists)
	return out
}

// markerEvents reads <exe>.standin.log beside a service's binary.
func (w *wineNode) markerEvents(t *testing.T, exe string) []standinEvent {
	t.Helper()
	f, err := os.Open(w.prefix.LinuxPath(exe) + ".standin.log")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []standinEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e standinEvent
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), sc.Text())
		out = append(out, e)
	}
	require.NoError(t, sc.Err())
	return out
}
