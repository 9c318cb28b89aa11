package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/modules/generic"
	"github.com/wsu-project/wsu/transport/local"
)

// gauge records how many calls run at once, and the most that ever did.
// With want set, a call waits (up to ten seconds) until want calls have
// run at once, so the peak reaches want whenever the engine lets that many
// overlap, however loaded the machine; an engine that does not makes each
// call wait out the ten seconds and the peak stays below want.
type gauge struct {
	inflight, peak atomic.Int32
	want           int32
}

func (g *gauge) enter() func() {
	n := g.inflight.Add(1)
	for {
		old := g.peak.Load()
		if n <= old || g.peak.CompareAndSwap(old, n) {
			break
		}
	}
	for deadline := time.Now().Add(10 * time.Second); g.peak.Load() < g.want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return func() { g.inflight.Add(-1) }
}

// slowFiles records how many file checks and writes overlap (gauge).
// A write to a file named in fail fails at once.
type slowFiles struct {
	host.Host
	g    *gauge
	fail string
	// failed, with fail set, is closed by the failing write; every other
	// write waits for it, so it runs while the failure happens.
	failed chan struct{}
	mu     *sync.Mutex
	// written are the base names written, in the order the writes ended.
	written *[]string
}

func (h slowFiles) SHA256(ctx context.Context, path string) (string, error) {
	defer h.g.enter()()
	time.Sleep(20 * time.Millisecond) // a chance to overlap, for a plan to refuse
	return h.Host.SHA256(ctx, path)
}

func (h slowFiles) WriteFile(ctx context.Context, path string, r io.Reader, mode fs.FileMode) error {
	if h.fail != "" && filepath.Base(path) == h.fail {
		close(h.failed)
		return errors.New("disk full")
	}
	defer h.g.enter()()
	if h.failed != nil {
		<-h.failed
	}
	if err := h.Host.WriteFile(ctx, path, r, mode); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.written = append(*h.written, filepath.Base(path))
	return nil
}

const parallelPlaybook = rootVar + `
play "p" {
  hosts = "all"
  task "files" {
    for_each    = toset(["a", "b", "c", "d", "e", "f"])
    parallelism = %d
    file {
      path    = "${var.root}/${each.key}"
      content = "file ${each.key}\n"
    }
  }
  task "after" {
    file {
      path    = "${var.root}/sums"
      content = join(",", [for k, r in task.files : k])
    }
  }
}
`

func parallelFixture(t *testing.T, parallelism int, fail string) (*fixture, *gauge, *[]string) {
	f := newFixture(t, map[string]string{"play.hcl": fmt.Sprintf(parallelPlaybook, parallelism)})
	g := &gauge{}
	written := &[]string{}
	mu := &sync.Mutex{}
	var failed chan struct{}
	if fail != "" {
		failed = make(chan struct{})
	}
	f.connect = func(context.Context, engine.Target) (host.Host, error) {
		return slowFiles{Host: local.New(), g: g, fail: fail, failed: failed, mu: mu, written: written}, nil
	}
	return f, g, written
}

// An apply runs up to parallelism instances of a for_each task at once on
// one host; the task's results, recap and the tasks after it are as when
// they run one after another.
func TestParallelismOverlapsInstancesInApply(t *testing.T) {
	f, g, written := parallelFixture(t, 3, "")
	g.want = 3
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, int32(3), g.peak.Load(), "instances at once")
	assert.ElementsMatch(t, []string{"a", "b", "c", "d", "e", "f", "sums"}, *written)
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		data, err := os.ReadFile(filepath.Join(f.root, k))
		require.NoError(t, err)
		assert.Equal(t, "file "+k+"\n", string(data))
	}
	sums, err := os.ReadFile(filepath.Join(f.root, "sums"))
	require.NoError(t, err)
	assert.Equal(t, "a,b,c,d,e,f", string(sums), "the later task sees every instance's result")
	assert.Equal(t, 7, res.Recap[0].Changed)
	assert.Len(t, rec.results("localhost"), 7)

	// A re-run changes nothing, its checks overlapping too.
	g.peak.Store(0)
	res, _ = f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, 0, res.Recap[0].Changed)
	assert.Equal(t, int32(3), g.peak.Load(), "checks at once in the re-run")
}

// A plan runs the instances one after another, so its events and changes
// come in the same order every time.
func TestParallelismPlanRunsInOrder(t *testing.T) {
	f, g, _ := parallelFixture(t, 3, "")
	res, rec := f.run(engine.ModePlan)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, int32(1), g.peak.Load(), "a plan's checks one at a time")
	var keys []string
	for _, e := range rec.results("localhost") {
		if e.Task == "files" {
			keys = append(keys, e.Key)
		}
	}
	assert.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, keys)
}

// When an instance fails, the instances already running finish and no new
// one starts: the host drops out as it does when they run in order.
func TestParallelismFailureStartsNoMore(t *testing.T) {
	f, _, written := parallelFixture(t, 2, "b")
	res, rec := f.run(engine.ModeApply)
	require.True(t, res.Failed())
	assert.Equal(t, 1, res.Recap[0].Failed)
	assert.Equal(t, []string{"a"}, *written, "a was running when b failed; c to f never started")
	var ran []string
	for _, e := range rec.results("localhost") {
		ran = append(ran, fmt.Sprintf("%s[%s]=%s", e.Task, e.Key, e.Status))
	}
	assert.ElementsMatch(t, []string{"files[a]=changed", "files[b]=failed"}, ran)
}

// Each instance reports its own traffic when instances share the
// connection: here through a real agent process, every file's event counts
// exactly its own content sent.
func TestParallelismTrafficPerInstance(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
locals {
  kib = join("", [for i in range(100) : "0123456789"]) # 1000 bytes
}

play "p" {
  hosts = "all"
  task "files" {
    for_each    = { small = 1, medium = 300, large = 1000, empty = 0 }
    parallelism = 4
    file {
      path    = "${var.root}/${each.key}"
      content = join("", [for i in range(each.value) : local.kib])
    }
  }
}
`})
	f.connect = agentConnector(t).Connect
	res, rec := f.run(engine.ModeApply)
	for _, e := range rec.results("localhost") {
		require.NotEqual(t, engine.StatusFailed, e.Status, "%s: %+v", e.Address, e.Diagnostics)
	}
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	want := map[string]int64{"small": 1000, "medium": 300000, "large": 1000000, "empty": 0}
	var total int64
	for _, e := range rec.results("localhost") {
		require.NotNil(t, e.Traffic, "%s is metered", e.Address)
		assert.Equal(t, want[e.Key], e.Traffic.BytesSent, "%s sent its own content", e.Address)
		assert.Greater(t, e.Traffic.RPCs, int64(0), "%s", e.Address)
		total += e.Traffic.BytesSent
	}
	assert.Equal(t, int64(1301000), total)
	assert.Len(t, rec.results("localhost"), 4)
}

// parallelism is a constant whole number on a task with for_each, checked
// when the playbook loads, with its location.
func TestParallelismInvalid(t *testing.T) {
	cases := map[string]struct{ task, want string }{
		"no for_each": {`parallelism = 2
    file {
      path    = "/tmp/x"
      content = ""
    }`, "this task has no for_each"},
		"zero":       {`for_each = toset(["a"])` + "\n    parallelism = 0\n    file {\n      path = each.key\n      content = \"\"\n    }", "from 1 to 16, not 0"},
		"too many":   {`for_each = toset(["a"])` + "\n    parallelism = 17\n    file {\n      path = each.key\n      content = \"\"\n    }", "from 1 to 16, not 17"},
		"fraction":   {`for_each = toset(["a"])` + "\n    parallelism = 1.5\n    file {\n      path = each.key\n      content = \"\"\n    }", "not 1.5"},
		"expression": {`for_each = toset(["a"])` + "\n    parallelism = var.root\n    file {\n      path = each.key\n      content = \"\"\n    }", "not an expression"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			src := rootVar + "play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    " + c.task + "\n  }\n}\n"
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "play.hcl"), []byte(src), 0o644))
			_, diags := playbook.NewLoader(all.Schemas(), nil).Load(filepath.Join(dir, "play.hcl"))
			require.True(t, diags.HasErrors())
			d := diags[0]
			assert.Equal(t, "Invalid parallelism", d.Summary)
			assert.Contains(t, d.Detail, c.want)
			line := 1 + strings.Count(src[:strings.Index(src, "parallelism =")], "\n")
			require.NotNil(t, d.Subject)
			assert.Equal(t, line, d.Subject.Start.Line, "the diagnostic points at the value")
			assert.Equal(t, 19, d.Subject.Start.Column)
		})
	}
}

// restarter plans a change for each key; with restart set the change stops
// and starts a service (Change.Restarts), and its apply records whether any
// other call ran meanwhile.
type restarter struct {
	g          *gauge
	violations *atomic.Int32
}

func (restarter) Schema() modules.Schema {
	return modules.Schema{Name: "restarter", Target: modules.TargetHost, Attributes: []modules.Attribute{
		{Name: "name", Type: cty.String, Required: true},
		{Name: "restart", Type: cty.Bool, Required: true},
	}}
}

func (m restarter) Plan(_ context.Context, req modules.PlanRequest) modules.PlanResponse {
	defer m.g.enter()()
	time.Sleep(10 * time.Millisecond)
	ch := &modules.Change{Action: modules.Update, Subject: req.Config.Get("name").AsString()}
	if req.Config.Get("restart").True() {
		ch.Restarts = []string{"kubelet"}
	}
	return modules.PlanResponse{Result: cty.EmptyObjectVal, Change: ch}
}

func (m restarter) Apply(_ context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	defer m.g.enter()()
	alone := func() {
		if len(req.Change.Restarts) > 0 && m.g.inflight.Load() != 1 {
			m.violations.Add(1)
		}
	}
	alone()
	time.Sleep(30 * time.Millisecond)
	alone()
	return modules.ApplyResponse{Result: cty.EmptyObjectVal}
}

// A change that restarts services is applied alone on the host, planned
// again once nothing else runs; the other instances still overlap.
func TestParallelismRestartsRunAlone(t *testing.T) {
	g := &gauge{want: 2}
	var violations atomic.Int32
	reg := modules.NewRegistry(append(generic.Modules(), restarter{g: g, violations: &violations})...)
	pb, diags := playbook.NewLoader(reg, nil).LoadSource("r.hcl", []byte(`
play "p" {
  hosts = "all"
  task "swap" {
    for_each    = { a = false, b = true, c = false, d = false, e = true, f = false }
    parallelism = 3
    restarter {
      name    = each.key
      restart = each.value
    }
  }
}`))
	require.False(t, diags.HasErrors(), diags.Error())
	rec := &recorder{}
	res := engine.Run(context.Background(), engine.Request{Playbook: pb, Inventory: inventory.FromList("win01,"),
		Mode: engine.ModeApply, Registry: reg, Hooks: rec,
		Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) { return local.New(), nil })})
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, 6, res.Recap[0].Changed)
	assert.Equal(t, int32(0), violations.Load(), "a restart overlapped another call")
	assert.GreaterOrEqual(t, g.peak.Load(), int32(2), "the other instances overlap")
}
