package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/all"
)

// noop is a module that does nothing, so a benchmark measures only the
// engine: evaluation, scheduling, events.
type noop struct{}

func (noop) Schema() modules.Schema {
	return modules.Schema{
		Name:       "noop",
		Target:     modules.TargetController,
		Attributes: []modules.Attribute{{Name: "value", Type: cty.String, Required: true}},
		Results:    []modules.Attribute{{Name: "value", Type: cty.String}},
	}
}

func (noop) Plan(_ context.Context, req modules.PlanRequest) modules.PlanResponse {
	return modules.PlanResponse{Result: cty.ObjectVal(map[string]cty.Value{"value": req.Config.Get("value")})}
}

func (noop) Apply(_ context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	return modules.ApplyResponse{Result: cty.ObjectVal(map[string]cty.Value{"value": req.Config.Get("value")})}
}

// BenchmarkEngineOverhead runs 50 no-op tasks, each referring to a variable
// and the previous task's result, on 1 and on 100 hosts. ns/op is per run;
// the task-ns metric is per task per host.
func BenchmarkEngineOverhead(b *testing.B) {
	const tasks = 50
	var src strings.Builder
	src.WriteString("variable \"site\" {\n  type = string\n  default = \"lab\"\n}\nplay \"bench\" {\n  hosts = \"all\"\n")
	for i := 0; i < tasks; i++ {
		prev := `"start"`
		if i > 0 {
			prev = fmt.Sprintf("task.t%d.value", i-1)
		}
		fmt.Fprintf(&src, "  task \"t%d\" {\n    noop { value = \"${var.site}-%d-${%s}\" }\n  }\n", i, i, strings.Trim(prev, `"`))
	}
	src.WriteString("}\n")
	reg := modules.NewRegistry(noop{})
	pb, diags := playbook.NewLoader(reg, nil).LoadSource("bench.hcl", []byte(strings.ReplaceAll(src.String(), "${start}", "start")))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	for _, hosts := range []int{1, 100} {
		b.Run(fmt.Sprintf("hosts=%d/tasks=%d", hosts, tasks), func(b *testing.B) {
			inv := inventory.FromList(hostList(hosts))
			b.ReportAllocs()
			for b.Loop() {
				res := engine.Run(context.Background(), engine.Request{
					Playbook: pb, Inventory: inv, Mode: engine.ModeApply, Registry: reg,
					Hooks: engine.HooksFunc(func(engine.Event) {}),
				})
				if res.Failed() {
					b.Fatal(res.Diagnostics, res.Recap)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*hosts*tasks), "task-ns")
		})
	}
}

func hostList(n int) string {
	var names []string
	for i := 0; i < n; i++ {
		names = append(names, fmt.Sprintf("win%03d", i))
	}
	return strings.Join(names, ",") + ","
}

// BenchmarkRerunThroughAgent re-applies a playbook that changes nothing
// (10 directories, 20 files) through a real agent process, the common case
// of a fleet run. Besides time it reports the cost on the wire: rpcs/task
// (goal: at most 1) and bytes-sent (file content per run; goal: 0).
func BenchmarkRerunThroughAgent(b *testing.B) {
	root := b.TempDir()
	src := rootVar + `
play "bench" {
  hosts = "all"
  task "dirs" {
    for_each = toset([for i in range(10) : "d${i}"])
    directory { path = "${var.root}/${each.key}" }
  }
  task "files" {
    for_each = toset([for i in range(20) : "f${i}"])
    file {
      path    = "${var.root}/d${length(each.key) % 10}/${each.key}.conf"
      content = "name = ${each.key}\n"
    }
  }
}`
	pb, diags := playbook.NewLoader(all.Schemas(), nil).LoadSource("bench.hcl", []byte(src))
	if diags.HasErrors() {
		b.Fatal(diags)
	}
	req := engine.Request{
		Playbook: pb, Inventory: inventory.FromList("win01,"), Mode: engine.ModeApply, Registry: all.Schemas(),
		Inputs: engine.Inputs{Vars: []string{"root=" + root}}, Connector: agentConnector(b),
		Hooks: engine.HooksFunc(func(engine.Event) {}),
	}
	if res := engine.Run(context.Background(), req); res.Failed() || res.Changes == 0 {
		b.Fatalf("first run: %v %v", res.Diagnostics, res.Recap)
	}
	var rpcs, sent, tasks int64
	for b.Loop() {
		res := engine.Run(context.Background(), req)
		if res.Failed() || res.Changes != 0 || res.Recap[0].Traffic == nil {
			b.Fatalf("re-run: %v %+v", res.Diagnostics, res.Recap)
		}
		rpcs += res.Recap[0].RPCs
		sent += res.Recap[0].BytesSent
		tasks += int64(res.Recap[0].OK)
	}
	b.ReportMetric(float64(rpcs)/float64(tasks), "rpcs/task")
	b.ReportMetric(float64(sent)/float64(b.N), "bytes-sent/op")
}
