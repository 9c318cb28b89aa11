package view

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
)

// A plan's results print task by task, hosts in the play's order, however
// the hosts' results arrived; apply prints them as they come.
func TestPlanResultsInTaskThenHostOrder(t *testing.T) {
	changed := func(host string, idx int, task string) engine.Event {
		return engine.Event{Type: engine.EventTaskResult, Host: host, Task: task, Index: idx, Module: "file", Status: engine.StatusChanged,
			Change: &engine.ChangeView{Action: "create", Symbol: "+", Subject: "/" + task}}
	}
	arrivals := []engine.Event{
		changed("win02", 1, "a"), changed("win02", 2, "b"),
		{Type: engine.EventHostFailed, Host: "win02", Diagnostics: []engine.DiagnosticView{{Severity: "error", Summary: "boom"}}},
		changed("win01", 1, "a"), changed("win01", 2, "b"),
	}
	run := func(mode engine.Mode) string {
		var out bytes.Buffer
		h := NewHuman(&out, HumanOptions{})
		h.Event(engine.Event{Type: engine.EventRunStart, Mode: mode})
		h.Event(engine.Event{Type: engine.EventPlayStart, Play: "p", Hosts: []string{"win01", "win02"}, Batches: [][]string{{"win01", "win02"}}})
		for _, e := range arrivals {
			h.Event(e)
		}
		h.Event(engine.Event{Type: engine.EventRecap})
		h.Close()
		return out.String()
	}
	var order []string
	for _, l := range strings.Split(run(engine.ModePlan), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && strings.HasPrefix(f[1], "[") {
			order = append(order, f[1]+f[3])
		} else if strings.Contains(l, "error [") {
			order = append(order, "error"+strings.TrimPrefix(strings.TrimSpace(l), "error "))
		}
	}
	assert.Equal(t, []string{`[win01]"a"`, `[win02]"a"`, `[win01]"b"`, `[win02]"b"`, "error[win02]"}, order)

	apply := run(engine.ModeApply)
	assert.Less(t, strings.Index(apply, "[win02] task \"a\""), strings.Index(apply, "[win01] task \"a\""), "apply prints in arrival order")
}

// Diagnostics print sorted by file, line and column, unlocated ones first.
func TestDiagnosticsSortedByFileAndLine(t *testing.T) {
	at := func(file string, line, col int, summary string) *hcl.Diagnostic {
		return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
			Subject: &hcl.Range{Filename: file, Start: hcl.Pos{Line: line, Column: col}, End: hcl.Pos{Line: line, Column: col + 1}}}
	}
	diags := hcl.Diagnostics{at("b.hcl", 1, 1, "b1"), at("a.hcl", 9, 2, "a9c2"), {Severity: hcl.DiagError, Summary: "general"}, at("a.hcl", 9, 1, "a9c1"), at("a.hcl", 2, 5, "a2")}
	var out bytes.Buffer
	NewHuman(&out, HumanOptions{}).Diagnostics(diags)
	var got []string
	for _, l := range strings.Split(out.String(), "\n") {
		if s, ok := strings.CutPrefix(l, "Error: "); ok {
			got = append(got, s)
		}
	}
	assert.Equal(t, []string{"general", "a2", "a9c1", "a9c2", "b1"}, got)
}

// Huge or binary input is quoted as a bounded, printable excerpt, and at
// most maxDiagnostics diagnostics are shown.
func TestDiagnosticExcerptsAreBounded(t *testing.T) {
	long := "x = [" + strings.Repeat("1, ", 20000) + "oops]\n"
	col := strings.Index(long, "oops")
	bin := "a = \x00\x1b[31mred\xff\n"
	src := map[string][]byte{"long.hcl": []byte("# first\n" + long), "bin.hcl": []byte(bin)}
	diags := hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "Long", Subject: &hcl.Range{Filename: "long.hcl",
			Start: hcl.Pos{Line: 2, Column: col + 1, Byte: 8 + col}, End: hcl.Pos{Line: 2, Column: col + 5, Byte: 8 + col + 4}}},
		{Severity: hcl.DiagError, Summary: "Binary", Subject: &hcl.Range{Filename: "bin.hcl",
			Start: hcl.Pos{Line: 1, Column: 5, Byte: 4}, End: hcl.Pos{Line: 1, Column: 6, Byte: 5}}},
	}
	var out bytes.Buffer
	NewHuman(&out, HumanOptions{Sources: src}).Diagnostics(diags)
	text := out.String()
	assert.Less(t, len(text), 1000, text)
	assert.Contains(t, text, "on long.hcl line 2")
	assert.Contains(t, text, "   2: …1, 1, ")
	assert.Contains(t, text, "oops]")
	assert.Contains(t, text, "on bin.hcl line 1")
	assert.NotContains(t, text, "\x1b", "no control bytes of the input reach the terminal")
	assert.NotContains(t, text, "\x00")

	var many hcl.Diagnostics
	for i := range 50 {
		many = append(many, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: fmt.Sprintf("e%02d", i)})
	}
	many = append(many, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "w"})
	out.Reset()
	NewHuman(&out, HumanOptions{}).Diagnostics(many)
	require.Equal(t, maxDiagnostics, strings.Count(out.String(), "Error: "))
	assert.Contains(t, out.String(), "… and 31 more (30 errors, 1 warning) not shown")
}
