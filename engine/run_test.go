package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/transport/local"
)

// fixture is a playbook in a temp dir run against local hosts.
type fixture struct {
	t     *testing.T
	dir   string // where the playbook lives
	root  string // where tasks write
	inv   string // INI inventory source
	vars  []string
	tags  []string
	skip  []string
	limit string
	forks int
	// connect, when set, replaces the local connection.
	connect engine.ConnectorFunc
	// confine, when set, confines the run (playbook.Loader.Confine).
	confine []string
	// secretVars are engine.Inputs.SecretVars.
	secretVars []string
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), root: t.TempDir(), inv: "localhost connection=local\n"}
	for name, src := range files {
		p := filepath.Join(f.dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	}
	return f
}

type recorder struct {
	mu     sync.Mutex
	events []engine.Event
}

func (r *recorder) Event(e engine.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// results returns task_result events, optionally for one host.
func (r *recorder) results(hostName string) []engine.Event {
	var out []engine.Event
	for _, e := range r.events {
		if e.Type == engine.EventTaskResult && (hostName == "" || e.Host == hostName) {
			out = append(out, e)
		}
	}
	return out
}

func (r *recorder) result(t *testing.T, hostName, task string) engine.Event {
	t.Helper()
	for _, e := range r.results(hostName) {
		if e.Task == task {
			return e
		}
	}
	t.Fatalf("no result for task %q on %s", task, hostName)
	return engine.Event{}
}

func (f *fixture) run(mode engine.Mode, hooks ...engine.Hooks) (*engine.Result, *recorder) {
	return f.runCtx(context.Background(), mode, hooks...)
}

func (f *fixture) runCtx(ctx context.Context, mode engine.Mode, hooks ...engine.Hooks) (*engine.Result, *recorder) {
	t := f.t
	t.Helper()
	loader := playbook.NewLoader(all.Schemas(), nil)
	loader.Confine = f.confine
	pb, diags := loader.Load(filepath.Join(f.dir, "play.hcl"))
	require.False(t, diags.HasErrors(), "load: %s", diags)
	inv, diags := inventory.ParseINI("inventory.ini", []byte(f.inv))
	require.False(t, diags.HasErrors(), "inventory: %s", diags)
	var connector engine.Connector = engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) { return local.New(), nil })
	if f.connect != nil {
		connector = f.connect
	}
	rec := &recorder{}
	var h engine.Hooks = rec
	if len(hooks) > 0 {
		h = engine.HooksFunc(func(e engine.Event) {
			rec.Event(e)
			for _, x := range hooks {
				x.Event(e)
			}
		})
	}
	res := engine.Run(ctx, engine.Request{
		Playbook:  pb,
		Inventory: inv,
		Inputs:    engine.Inputs{Vars: append([]string{"root=" + f.root}, f.vars...), SecretVars: f.secretVars},
		Mode:      mode,
		Registry:  all.Schemas(),
		Connector: connector,
		Hooks:     h,
		Forks:     f.forks,
		Tags:      f.tags,
		SkipTags:  f.skip,
		Limit:     f.limit,
		Sources:   loader.Sources(),
	})
	return res, rec
}

const rootVar = `
variable "root" {
  type = string
}
`

func TestApplyIsIdempotent(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "dir" {
    directory { path = "${var.root}/a" }
  }
  task "conf" {
    file {
      path    = "${var.root}/a/conf"
      content = "x = 1\n"
    }
  }
}`})
	res, _ := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, 2, res.Changes)
	res, _ = f.run(engine.ModeApply)
	assert.Equal(t, 0, res.Changes)
	assert.Equal(t, 2, res.Recap[0].OK)
	res, _ = f.run(engine.ModePlan)
	assert.Equal(t, 0, res.Changes)
}

func TestUnknownPropagatesThroughPlan(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "probe" {
    command { argv = ["echo", "hello"] }
  }
  task "save" {
    file {
      path    = "${var.root}/out"
      content = task.probe.stdout
    }
  }
  task "gated" {
    when = task.probe.rc == 0
    print { msg = "ran" }
  }
  task "show" {
    print { msg = "rc is ${task.probe.rc}" }
  }
}`})
	res, rec := f.run(engine.ModePlan)
	require.False(t, res.Failed(), "%v", res.Diagnostics)

	save := rec.result(t, "localhost", "save")
	require.Equal(t, engine.StatusChanged, save.Status)
	require.NotNil(t, save.Change)
	assert.Equal(t, "create", save.Change.Action)
	var sha string
	for _, fld := range save.Change.Fields {
		if fld.Name == "sha256" {
			sha = fld.New
		}
	}
	assert.Equal(t, "(known after apply)", sha)
	assert.Equal(t, engine.StatusDeferred, rec.result(t, "localhost", "gated").Status)
	assert.Equal(t, "(known after apply)", rec.result(t, "localhost", "show").Message)
	_, err := os.Stat(filepath.Join(f.root, "out"))
	assert.True(t, os.IsNotExist(err), "plan must not write")

	res, rec = f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	data, err := os.ReadFile(filepath.Join(f.root, "out"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(data))
	assert.Equal(t, "ran", rec.result(t, "localhost", "gated").Message)
	assert.Equal(t, "rc is 0", rec.result(t, "localhost", "show").Message)
}

func TestHandlers(t *testing.T) {
	src := rootVar + `
play "p" {
  hosts = "all"
  task "one" {
    file {
      path    = "${var.root}/one"
      content = "1"
    }
    notify = ["second", "first"]
  }
  task "two" {
    file {
      path    = "${var.root}/two"
      content = "2"
    }
    notify = ["first"]
  }
  handler "first" {
    command { argv = ["sh", "-c", "echo first >> ${var.root}/log"] }
  }
  handler "second" {
    command { argv = ["sh", "-c", "echo second >> ${var.root}/log"] }
  }
  handler "never" {
    command { argv = ["sh", "-c", "echo never >> ${var.root}/log"] }
  }
}`
	f := newFixture(t, map[string]string{"play.hcl": src})
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	log, err := os.ReadFile(filepath.Join(f.root, "log"))
	require.NoError(t, err)
	// Once each, in definition order, after the tasks; "never" not at all.
	assert.Equal(t, "first\nsecond\n", string(log))
	var order []string
	for _, e := range rec.results("") {
		order = append(order, e.Task)
	}
	assert.Equal(t, []string{"one", "two", "first", "second"}, order)

	// Nothing changed: no handler runs.
	res, rec = f.run(engine.ModeApply)
	require.False(t, res.Failed())
	assert.Len(t, rec.results(""), 2)
	log, _ = os.ReadFile(filepath.Join(f.root, "log"))
	assert.Equal(t, "first\nsecond\n", string(log))
}

func TestForEachAndWhen(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "files" {
    for_each = { a = "alpha", b = "beta" }
    file {
      path    = "${var.root}/${each.key}"
      content = each.value
    }
  }
  task "skipped" {
    when = length(task.files) == 3
    print { msg = "never" }
  }
  task "uses" {
    print { msg = "${task.files["b"].size} ${task.files.a.path}" }
  }
}`})
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	data, _ := os.ReadFile(filepath.Join(f.root, "b"))
	assert.Equal(t, "beta", string(data))
	assert.Equal(t, engine.StatusSkipped, rec.result(t, "localhost", "skipped").Status)
	assert.Equal(t, "4 "+filepath.Join(f.root, "a"), rec.result(t, "localhost", "uses").Message)
	var keys []string
	for _, e := range rec.results("") {
		if e.Task == "files" {
			keys = append(keys, e.Key)
		}
	}
	assert.Equal(t, []string{"a", "b"}, keys)
}

func TestTags(t *testing.T) {
	src := rootVar + `
play "p" {
  hosts = "all"
  task "a" {
    print { msg = "a" }
    tags = ["config"]
  }
  task "b" {
    print { msg = "b" }
    tags = ["payload"]
  }
  task "c" {
    print { msg = "c" }
    tags = ["always"]
  }
  task "d" {
    print { msg = "d" }
  }
}`
	cases := []struct {
		tags, skip []string
		want       []string
	}{
		{nil, nil, []string{"a", "b", "c", "d"}},
		{[]string{"config"}, nil, []string{"a", "c"}},
		{nil, []string{"payload"}, []string{"a", "c", "d"}},
		{[]string{"config"}, []string{"always"}, []string{"a"}},
	}
	for _, tc := range cases {
		f := newFixture(t, map[string]string{"play.hcl": src})
		f.tags, f.skip = tc.tags, tc.skip
		res, rec := f.run(engine.ModeApply)
		require.False(t, res.Failed())
		var got []string
		for _, e := range rec.results("") {
			got = append(got, e.Task)
		}
		assert.Equal(t, tc.want, got, "tags=%v skip=%v", tc.tags, tc.skip)
	}
}

func TestIncludeVarsAndOutputs(t *testing.T) {
	f := newFixture(t, map[string]string{
		"play.hcl": rootVar + `
variable "greeting" {
  type    = string
  default = "hello"
}
include "child" {
  source = "./lib/child.hcl"
  vars = {
    root = var.root
    word = upper(var.greeting)
  }
}
play "after" {
  hosts = "all"
  task "use" {
    print { msg = include.child.written }
  }
}`,
		"lib/child.hcl": `
variable "root" {
  type = string
}
variable "word" {
  type = string
}
play "child" {
  hosts = "all"
  task "write" {
    file {
      path    = "${var.root}/child"
      content = var.word
    }
  }
}
output "written" {
  value = "${task.write.path}:${task.write.size}"
}`,
	})
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	data, _ := os.ReadFile(filepath.Join(f.root, "child"))
	assert.Equal(t, "HELLO", string(data))
	assert.Equal(t, filepath.Join(f.root, "child")+":5", rec.result(t, "localhost", "use").Message)
	assert.Equal(t, `include.child.task["write"]`, rec.result(t, "localhost", "write").Address)
}

const threeHosts = `
[windows]
win01 connection=local
win02 connection=local
win03 connection=local
`

func TestSerialRunsBatchesInOrder(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts  = "windows"
  serial = 1
  task "a" {
    print { msg = host.name }
  }
  task "b" {
    print { msg = host.name }
  }
}`})
	f.inv = threeHosts
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed())
	var seq []string
	for _, e := range rec.results("") {
		seq = append(seq, e.Host+"/"+e.Task)
	}
	assert.Equal(t, []string{"win01/a", "win01/b", "win02/a", "win02/b", "win03/a", "win03/b"}, seq)
	for _, e := range rec.events {
		if e.Type == engine.EventPlayStart {
			assert.Equal(t, [][]string{{"win01"}, {"win02"}, {"win03"}}, e.Batches)
		}
	}
}

func TestFailureIsolatedAndMaxFail(t *testing.T) {
	src := rootVar + `
play "p" {
  hosts  = "windows"
  serial = 1
  %s
  task "check" {
    assert { that = [host.name != "win01"] }
  }
  task "after" {
    print { msg = "after" }
  }
}
play "second" {
  hosts = "windows"
  task "more" {
    print { msg = "more" }
  }
}`
	// Without max_fail_percentage the failed host drops out, others go on.
	f := newFixture(t, map[string]string{"play.hcl": strings.Replace(src, "%s", "", 1)})
	f.inv = threeHosts
	res, rec := f.run(engine.ModeApply)
	assert.True(t, res.Failed())
	assert.Len(t, rec.results("win01"), 1)
	assert.Len(t, rec.results("win02"), 3)
	assert.Len(t, rec.results("win03"), 3)
	recap := map[string]engine.HostRecap{}
	for _, r := range res.Recap {
		recap[r.Host] = r
	}
	assert.Equal(t, 1, recap["win01"].Failed)
	assert.Equal(t, 3, recap["win03"].OK)

	// With max_fail_percentage = 0 the first failing batch stops the run.
	f = newFixture(t, map[string]string{"play.hcl": strings.Replace(src, "%s", "max_fail_percentage = 0", 1)})
	f.inv = threeHosts
	res, rec = f.run(engine.ModeApply)
	assert.True(t, res.Failed())
	assert.Len(t, rec.results("win02"), 0)
	require.NotEmpty(t, res.Diagnostics)
	assert.Contains(t, res.Diagnostics[0].Summary, "Maximum failure percentage exceeded")
}

func TestUntilRetriesAndIgnoreErrors(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "flaky" {
    command {
      argv = ["sh", "-c", "echo x >> ${var.root}/n; test $(wc -l < ${var.root}/n) -ge 3"]
      expected_exit_codes = [0, 1]
    }
    until   = self.rc == 0
    retries = 5
    delay   = 0
  }
  task "broken" {
    command { argv = ["false"] }
    ignore_errors = true
  }
  task "still" {
    print { msg = "still here" }
  }
}`})
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, 3, rec.result(t, "localhost", "flaky").Attempts)
	// Each failed attempt before the last is a task_retry, its errors as
	// warnings (the task has not failed).
	var retries []int
	for _, e := range rec.events {
		if e.Type == engine.EventTaskRetry {
			assert.Equal(t, "flaky", e.Task)
			require.NotEmpty(t, e.Diagnostics)
			assert.Equal(t, "warning", e.Diagnostics[0].Severity)
			assert.Equal(t, "Condition not met", e.Diagnostics[0].Summary)
			retries = append(retries, e.Attempts)
		}
	}
	assert.Equal(t, []int{1, 2}, retries)
	assert.Equal(t, engine.StatusIgnored, rec.result(t, "localhost", "broken").Status)
	assert.Equal(t, "still here", rec.result(t, "localhost", "still").Message)
	assert.Equal(t, 1, res.Recap[0].Ignored)
}

func TestSensitiveValuesNeverShown(t *testing.T) {
	const secret = "s3cr3t-token-value"
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
variable "token" {
  type      = string
  sensitive = true
}
play "p" {
  hosts = "all"
  task "kubeconfig" {
    file {
      path    = "${var.root}/kubeconfig"
      content = "token: ${var.token}"
    }
  }
  task "echo" {
    print { msg = "the token is ${var.token}" }
  }
  task "cmd" {
    command { argv = ["echo", var.token] }
  }
}`})
	f.vars = []string{"token=" + secret}
	for _, mode := range []engine.Mode{engine.ModePlan, engine.ModeApply} {
		res, rec := f.run(mode)
		require.False(t, res.Failed(), "%v", res.Diagnostics)
		data, err := json.Marshal(rec.events)
		require.NoError(t, err)
		assert.NotContains(t, string(data), secret, "mode %s", mode)
		assert.Equal(t, "(sensitive)", rec.result(t, "localhost", "echo").Message)
	}
	data, _ := os.ReadFile(filepath.Join(f.root, "kubeconfig"))
	assert.Equal(t, "token: "+secret, string(data), "the value itself reaches the host")
}

func TestCancelStopsBeforeNextTask(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "one" {
    print { msg = "1" }
  }
  task "two" {
    print { msg = "2" }
  }
  task "three" {
    print { msg = "3" }
  }
}`})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, rec := f.runCtx(ctx, engine.ModeApply, engine.HooksFunc(func(e engine.Event) {
		if e.Type == engine.EventTaskResult && e.Task == "one" {
			cancel()
		}
	}))
	assert.True(t, res.Cancelled)
	assert.True(t, res.Failed())
	assert.Len(t, rec.results(""), 1)
}

func TestLimitAndUnreachable(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "touch" {
    directory { path = "${var.root}/${host.name}" }
  }
}`})
	f.inv = threeHosts
	f.limit = "windows:!win03"
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed())
	assert.Len(t, rec.results(""), 2)
	_, err := os.Stat(filepath.Join(f.root, "win03"))
	assert.True(t, os.IsNotExist(err))
}

func TestLocalsReadVariablesTasksAndOtherLocals(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
variable "name" {
  type    = string
  default = "kubelet"
}
locals {
  conf     = "${var.root}/${var.name}.conf"
  upper    = upper(local.conf)
  reported = "${task.write.size} bytes in ${local.conf}"
}
play "p" {
  hosts = "all"
  task "write" {
    file {
      path    = local.conf
      content = "x"
    }
  }
  task "report" {
    print { msg = local.reported }
  }
  task "upper" {
    print { msg = local.upper }
  }
}`})
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	conf := filepath.Join(f.root, "kubelet.conf")
	assert.Equal(t, "1 bytes in "+conf, rec.result(t, "localhost", "report").Message)
	assert.Equal(t, strings.ToUpper(conf), rec.result(t, "localhost", "upper").Message)
}

// flakyHost is a FAKE: a local host whose connection "drops" on the first
// WriteFile, as a node's does when hybrid-overlay reconfigures its network.
// Real transports produce this too (see transport/ssh); here it isolates the
// engine's reconnect logic.
type flakyHost struct {
	host.Host
	drop *bool
	lost bool
}

func (f *flakyHost) WriteFile(ctx context.Context, path string, r io.Reader, mode fs.FileMode) error {
	if *f.drop {
		*f.drop = false
		f.lost = true
		return fmt.Errorf("writing %s: %w", path, host.ErrConnectionLost)
	}
	return f.Host.WriteFile(ctx, path, r, mode)
}

func (f *flakyHost) Lost() bool { return f.lost }

func TestReconnectAfterLostConnection(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "cni" {
    file {
      path    = "${var.root}/cni.conf"
      content = "overlay"
    }
  }
  task "after" {
    print { msg = "after" }
  }
}`})
	loader := playbook.NewLoader(all.Schemas(), nil)
	loader.Confine = f.confine
	pb, diags := loader.Load(filepath.Join(f.dir, "play.hcl"))
	require.False(t, diags.HasErrors())
	inv, _ := inventory.ParseINI("inv", []byte("win01 reconnect_timeout=10s\n"))
	drop, dials := true, 0
	rec := &recorder{}
	res := engine.Run(context.Background(), engine.Request{
		Playbook: pb, Inventory: inv, Mode: engine.ModeApply, Registry: all.Schemas(), Hooks: rec,
		Inputs: engine.Inputs{Vars: []string{"root=" + f.root}},
		Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) {
			dials++
			return &flakyHost{Host: local.NewPOSIX(), drop: &drop}, nil
		}),
	})
	require.False(t, res.Failed(), "%v %v", res.Diagnostics, rec.results(""))
	assert.Equal(t, 2, dials)
	data, err := os.ReadFile(filepath.Join(f.root, "cni.conf"))
	require.NoError(t, err)
	assert.Equal(t, "overlay", string(data))
	assert.Equal(t, engine.StatusChanged, rec.result(t, "win01", "cni").Status)
	var reconnecting int
	for _, e := range rec.events {
		if e.Type == engine.EventReconnecting {
			reconnecting++
		}
	}
	assert.Equal(t, 1, reconnecting)
}

// TestSerialIncludeRunsWholePlaybookPerBatch: an upgrade runs every play of
// the included playbook on one host before the next host starts.
func TestSerialIncludeRunsWholePlaybookPerBatch(t *testing.T) {
	f := newFixture(t, map[string]string{
		"play.hcl": rootVar + `
include "upgrade" {
  source = "./node.hcl"
  hosts  = "windows"
  serial = 1
  max_fail_percentage = 0
}`,
		"node.hcl": `
play "drain" {
  hosts = "all"
  task "cordon" {
    print { msg = "cordon" }
  }
}
play "upgrade" {
  hosts = "windows"
  task "copy" {
    assert { that = [host.name != "win02"] }
  }
}`,
	})
	f.inv = threeHosts
	res, rec := f.run(engine.ModeApply)
	assert.True(t, res.Failed(), "win02 fails")
	var seq []string
	for _, e := range rec.results("") {
		seq = append(seq, e.Host+"/"+e.Task)
	}
	// win03 never starts: the failed batch stopped the upgrade.
	assert.Equal(t, []string{"win01/cordon", "win01/copy", "win02/cordon", "win02/copy"}, seq)
	require.NotEmpty(t, res.Diagnostics)
	assert.Contains(t, res.Diagnostics[len(res.Diagnostics)-1].Summary, "Maximum failure percentage exceeded")
}

// TestFactsBeforeFirstHostTask: a play whose first tasks only read the
// facts (an assert, a local) sees them, as Ansible gathers facts first.
func TestFactsBeforeFirstHostTask(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
locals {
  os = host.facts.os
}
play "p" {
  hosts = "all"
  task "check" {
    assert {
      that = [host.facts.os != ""]
    }
  }
  task "show" {
    print { msg = "os=${local.os}" }
  }
}`})
	res, rec := f.run(engine.ModePlan)
	require.False(t, res.Failed(), "%v %v", res.Diagnostics, rec.results(""))
	assert.Equal(t, engine.StatusOK, rec.result(t, "localhost", "check").Status)
	assert.NotContains(t, rec.result(t, "localhost", "show").Message, "os=\n")
}

// TestNoConnectForControllerOnlyPlay: a local reading the facts does not
// make every play of its playbook connect; a play whose tasks never read
// it runs on the controller alone (the site example's preflight), so an
// unreachable host fails there on the task's own terms.
func TestNoConnectForControllerOnlyPlay(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
locals {
  name = lower(host.facts.hostname)
}
play "preflight" {
  hosts = "all"
  task "settings" {
    assert {
      that = [var.root != ""]
    }
  }
}
play "join" {
  hosts = "all"
  task "show" {
    print { msg = local.name }
  }
}`})
	connects := 0
	f.connect = func(context.Context, engine.Target) (host.Host, error) {
		connects++
		return nil, errors.New("no route to host")
	}
	res, rec := f.run(engine.ModePlan)
	assert.True(t, res.Failed())
	assert.Equal(t, engine.StatusOK, rec.result(t, "localhost", "settings").Status)
	assert.Equal(t, 1, connects, "only the play reading local.name connects")
	require.Len(t, res.Recap, 1)
	assert.True(t, res.Recap[0].Unreachable > 0, "%+v", res.Recap[0])
}

// TestFactsForOutputsWhenTagsSkipEverything: an include's output read from
// the facts is still there for the next include's vars when --tags
// selects none of the include's tasks (none of them would have connected).
func TestFactsForOutputsWhenTagsSkipEverything(t *testing.T) {
	f := newFixture(t, map[string]string{
		"play.hcl": rootVar + `
include "a" {
  source = "./a.hcl"
}
include "b" {
  source = "./b.hcl"
  vars   = { name = include.a.name }
}`,
		"a.hcl": `
locals {
  name = lower(host.facts.hostname)
}
play "a" {
  hosts = "all"
  task "t" {
    print { msg = local.name }
  }
}
output "name" {
  value = local.name
}`,
		"b.hcl": `
variable "name" {
  type = string
}
play "b" {
  hosts = "all"
  task "t" {
    tags = ["late"]
    print { msg = var.name }
  }
}`,
	})
	f.tags = []string{"late"}
	res, rec := f.run(engine.ModePlan)
	require.False(t, res.Failed(), "%v %v", res.Diagnostics, rec.events)
}

// TestSerialPercentageAndPlayVars: serial as a percentage of the play's
// hosts (rounded down, at least one), and play vars, which each host
// evaluates for itself.
func TestSerialPercentageAndPlayVars(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts  = "windows"
  serial = "70%"
  vars = {
    greeting = "hello ${host.name}"
  }
  task "a" {
    print { msg = var.greeting }
  }
}`})
	f.inv = threeHosts
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	for _, e := range rec.events {
		if e.Type == engine.EventPlayStart {
			assert.Equal(t, [][]string{{"win01", "win02"}, {"win03"}}, e.Batches, "70% of 3 hosts: batches of 2")
		}
	}
	for _, h := range []string{"win01", "win02", "win03"} {
		assert.Equal(t, "hello "+h, rec.result(t, h, "a").Message)
	}
}

// TestHandlersNotRunOnFailedHost: a host that fails after a task notified
// a handler does not run it; a healthy host that was notified does.
func TestHandlersNotRunOnFailedHost(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "windows"
  task "change" {
    file {
      path    = "${var.root}/${host.name}"
      content = "x"
    }
    notify = ["restart"]
  }
  task "check" {
    assert { that = [host.name != "win02"] }
  }
  handler "restart" {
    print { msg = "restarted ${host.name}" }
  }
}`})
	f.inv = threeHosts
	res, rec := f.run(engine.ModeApply)
	require.True(t, res.Failed())
	ran := map[string]bool{}
	for _, e := range rec.results("") {
		if e.Handler && e.Status == engine.StatusOK {
			ran[e.Host] = true
		}
	}
	assert.Equal(t, map[string]bool{"win01": true, "win03": true}, ran)
}

// TestUnknownForEachDefers: a for_each over values known only after apply
// defers the task in plan (and its dependants plan on), rather than failing.
func TestUnknownForEachDefers(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "list" {
    command { argv = ["echo", "a b"] }
  }
  task "each" {
    for_each = toset(split(" ", task.list.stdout))
    print { msg = each.key }
  }
  task "after" {
    print { msg = "still planned" }
  }
}`})
	res, rec := f.run(engine.ModePlan)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, engine.StatusDeferred, rec.result(t, "localhost", "each").Status)
	assert.Contains(t, rec.result(t, "localhost", "each").Message, "known only after apply")
	assert.Equal(t, "still planned", rec.result(t, "localhost", "after").Message)
}

// A local that reads only variables is evaluated once per run for the
// hosts whose variables are the same: the second host, run after the first
// rewrote the file the local reads, still gets what the first read (one
// value for the run, as Terraform evaluates a module's locals once); a
// host whose variable differs evaluates its own.
func TestLocalsSharedAcrossHostsWithSameVariables(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rootVar + `
variable "name" {
  type    = string
  default = "input"
}
locals {
  content = file("${var.root}/${var.name}.txt")
}
play "p" {
  hosts  = "all"
  serial = 1
  task "read" {
    print { msg = local.content }
  }
  task "rewrite" {
    file {
      path    = "${var.root}/${var.name}.txt"
      content = "rewritten"
    }
  }
}`})
	require.NoError(t, os.WriteFile(filepath.Join(f.root, "input.txt"), []byte("first"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.root, "other.txt"), []byte("other"), 0o644))
	f.inv = "a connection=local\nb connection=local\nc connection=local name=other\n"
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, "first", rec.result(t, "a", "read").Message)
	assert.Equal(t, "first", rec.result(t, "b", "read").Message, "the value a's scope evaluated")
	assert.Equal(t, "other", rec.result(t, "c", "read").Message, "c's own variables, its own value")
}
