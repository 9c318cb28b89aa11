package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/version"
)

// The acceptance tests of issue 14's "honest outcomes": a run that failed
// never ends in "No changes", a run that checked nothing says so and why,
// an unreachable host counts once, and a stock playbook's name resolves
// explicitly.

func demoArgs(t *testing.T) (pb string, root string) {
	t.Helper()
	dir := copyDir(t, "../../examples/demo")
	return filepath.Join(dir, "site.hcl"), t.TempDir()
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestErrorNeverEndsInNoChanges(t *testing.T) {
	pb, root := demoArgs(t)
	code, out, errs := wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, "--limit", "nosuch")
	assert.Equal(t, 1, code, out+errs)
	assert.NotContains(t, out, "No changes")
	assert.Contains(t, out, `PLAY "layout" (not run: its hosts, serial or max_fail_percentage is invalid)`)
	assert.Contains(t, out, "The plan failed: see the errors above.")

	// A later play's bad serial: the first play ran, the bad one and the
	// ones after it say they did not run.
	dir := t.TempDir()
	three := writeFile(t, dir, "three.hcl", `
play "first" {
  hosts = "all"
  task "hello" {
    print { msg = "hi" }
  }
}
play "second" {
  hosts  = "all"
  serial = "abc"
  task "hello2" {
    print { msg = "hi" }
  }
}
play "third" {
  hosts = "all"
  task "hello3" {
    print { msg = "hi" }
  }
}
`)
	for _, cmd := range [][]string{{"plan"}, {"apply", "--auto-approve"}} {
		code, out, errs = wsu(t, nil, append(cmd, three, "--local")...)
		assert.Equal(t, 1, code, out+errs)
		assert.NotContains(t, out, "No changes")
		assert.Contains(t, out, `PLAY "first" (1 host)`)
		assert.Contains(t, out, `PLAY "second" (not run: its hosts, serial or max_fail_percentage is invalid)`)
		assert.Contains(t, out, "Invalid serial")
		assert.Contains(t, out, `PLAY "third" (not run: an earlier error stopped the run)`)
		assert.NotContains(t, out, "(0 hosts)")
		assert.Regexp(t, `The (plan|run) failed: see the errors above.`, out)
	}

	code, out, _ = wsu(t, nil, "plan", three, "--local", "-o", "json")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, `"type":"play_not_run"`)
	assert.Contains(t, out, `"failed":true`)
}

func TestNothingCheckedIsSaid(t *testing.T) {
	pb, root := demoArgs(t)
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.ini", "")
	children := writeFile(t, dir, "children.ini", "[linux]\nl1\n\n[windows:children]\nnosuch\n")
	group := writeFile(t, dir, "group.hcl", `
play "p" {
  hosts = "windows"
  task "hello" {
    print { msg = "hi" }
  }
}
`)
	for name, args := range map[string][]string{
		"empty inventory":     {pb, "-i", empty, "-var", "root=" + root},
		"undefined :children": {group, "-i", children},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errs := wsu(t, nil, append([]string{"plan"}, args...)...)
			assert.Equal(t, 0, code, out+errs)
			assert.NotContains(t, out, "No changes")
			assert.Contains(t, out, "Nothing was checked: ")
			code, out, _ = wsu(t, nil, append([]string{"plan", "-detailed-exitcode"}, args...)...)
			assert.Equal(t, 1, code, "-detailed-exitcode never reports success for nothing: "+out)
		})
	}
	_, out, _ := wsu(t, nil, "plan", pb, "-i", empty, "-var", "root="+root)
	assert.Contains(t, out, "Nothing was checked: the inventory has no hosts.")
	_, out, _ = wsu(t, nil, "plan", group, "-i", children)
	assert.Contains(t, out, `no play's hosts matched a host of the inventory: hosts = "windows" is a group with no hosts (its children: nosuch;`)

	// An unknown tag is an error, with the nearest tag.
	tagged := writeFile(t, dir, "tagged.hcl", `
play "p" {
  hosts = "all"
  task "hello" {
    tags = ["kubelet"]
    print { msg = "hi" }
  }
}
`)
	code, out, errs := wsu(t, nil, "plan", tagged, "--local", "--tags", "kublet", "-detailed-exitcode")
	assert.Equal(t, 1, code, out+errs)
	assert.Contains(t, errs, "Unknown tag")
	assert.Contains(t, flat(errs), `Did you mean "kubelet"?`)
	assert.Empty(t, out, "no host is touched")
	code, out, errs = wsu(t, nil, "plan", tagged, "--local", "--tags", "kubelet")
	assert.Equal(t, 0, code, out+errs)

	// A playbook without plays, or an empty file, is an error.
	noPlays := writeFile(t, dir, "noplays.hcl", "variable \"x\" {\n  default = 1\n}\n")
	code, _, errs = wsu(t, nil, "plan", noPlays, "--local")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "Nothing to run")
	emptyPB := writeFile(t, dir, "empty.hcl", "\n")
	for _, cmd := range []string{"plan", "validate"} {
		args := []string{cmd, emptyPB}
		if cmd == "plan" {
			args = append(args, "--local")
		}
		code, out, errs = wsu(t, nil, args...)
		assert.Equal(t, 1, code, cmd)
		assert.Contains(t, errs, "Empty playbook", cmd)
		assert.NotContains(t, out, "No changes")
		assert.NotContains(t, out, "Success")
	}
}

func TestUnreachableCountsOnce(t *testing.T) {
	pb, root := demoArgs(t)
	// Nothing listens on port 1; the play's first task has a for_each of 4.
	inv := writeFile(t, t.TempDir(), "inv.ini", "win01 ansible_host=127.0.0.1 ansible_port=1 connect_retry_window=0 ansible_user=x wsu_remote_os=linux\n")
	code, out, errs := wsu(t, nil, "plan", pb, "-i", inv, "-var", "root="+root)
	assert.Equal(t, 1, code, out+errs)
	assert.Equal(t, 1, strings.Count(out, "unreachable [win01]"), out)
	assert.Contains(t, out, "unreachable=1 ")
	assert.NotContains(t, out, "No changes")
}

func TestStockPlaybookResolution(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)

	// No local file: `join` and `wsu:join` are the stock playbook.
	for _, name := range []string{"join", "wsu:join", "wsu:join.hcl"} {
		code, out, errs := wsu(t, nil, "validate", name)
		assert.Equal(t, 0, code, name+": "+errs)
		assert.Contains(t, out, "Success!")
		assert.NotContains(t, errs, "local")
	}
	// A local ./join is used, and the output says so; wsu:join is still stock.
	writeFile(t, dir, "join", "play \"mine\" {\n  hosts = \"all\"\n  task \"t\" {\n    print { msg = \"local\" }\n  }\n}\n")
	code, out, errs := wsu(t, nil, "plan", "join", "--local")
	assert.Equal(t, 0, code, errs)
	assert.Contains(t, errs, "Using the local playbook join")
	assert.Contains(t, flat(errs), "For the stock playbook write wsu:join.")
	assert.Contains(t, out, `PLAY "mine"`)
	code, _, errs = wsu(t, nil, "validate", "wsu:join")
	assert.Equal(t, 0, code, errs)
	assert.NotContains(t, errs, "local")

	// An empty ./join, or a directory, is an error, not the stock playbook.
	writeFile(t, dir, "join", "")
	code, _, errs = wsu(t, nil, "validate", "join")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "Empty playbook")
	require.NoError(t, os.Remove(filepath.Join(dir, "join")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "join"), 0o755))
	code, _, errs = wsu(t, nil, "plan", "join", "--local")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "join is a directory")

	// Misspelt names.
	code, _, errs = wsu(t, nil, "plan", "joni", "--local")
	assert.Equal(t, 1, code)
	assert.Contains(t, flat(errs), `Did you mean "join"`)
	code, _, errs = wsu(t, nil, "validate", "wsu:joni")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "Unknown stock playbook")
	assert.Contains(t, flat(errs), `Did you mean "join"`)
}

// wsu version and wsu --version (-version, -v) print the same, as
// terraform version and terraform -version do.
func TestVersionFlagIsTheVersionCommand(t *testing.T) {
	code, want, errs := wsu(t, nil, "version")
	require.Equal(t, 0, code, errs)
	assert.Equal(t, "wsu "+version.Version+"\n", want)
	for _, flag := range []string{"--version", "-version", "-v"} {
		code, out, errs := wsu(t, nil, flag)
		assert.Equal(t, 0, code, errs)
		assert.Equal(t, want, out, flag)
	}
}

// -f 0, -f -5 and --limit ” are refused, before any host is touched:
// none would run anything ("--limit ”" used to mean every host).
func TestForksAndEmptyLimitRefused(t *testing.T) {
	pb := writeFile(t, t.TempDir(), "p.hcl", `
variable "root" {
  type = string
}
play "p" {
  hosts = "all"
  task "marker" {
    file {
      path    = "${var.root}/marker"
      content = "x\n"
    }
  }
}
`)
	root := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", "0"}, "--forks must be at least 1 (how many hosts to work on at once), not 0"},
		{[]string{"-f", "-5"}, "--forks must be at least 1 (how many hosts to work on at once), not -5"},
		{[]string{"--forks=-1"}, "--forks must be at least 1 (how many hosts to work on at once), not -1"},
		{[]string{"--limit", ""}, `--limit "" selects no host; drop --limit to run on every host of the plays`},
		{[]string{"-l", " , "}, `--limit " , " selects no host`},
	} {
		for _, cmd := range [][]string{{"plan"}, {"apply", "--auto-approve"}} {
			code, out, errs := wsu(t, nil, append(append(cmd, pb, "--local", "-var", "root="+root), tc.args...)...)
			assert.Equal(t, 1, code, "%v %v: %s", cmd, tc.args, out)
			assert.Contains(t, errs, tc.want, "%v %v", cmd, tc.args)
			assert.NotContains(t, out, "No changes", "%v %v", cmd, tc.args)
			assert.NoFileExists(t, filepath.Join(root, "marker"))
		}
	}
}

// With -o json (or yaml) an error in the arguments is an event on stdout,
// where the program reading the run looks, as every other error is.
func TestFlagErrorsFollowOutputFormat(t *testing.T) {
	pb := writeFile(t, t.TempDir(), "p.hcl", `
play "p" {
  hosts = "all"
  task "hello" {
    print { msg = "hi" }
  }
}
`)
	for _, args := range [][]string{
		{"plan", pb, "--local", "--bogus", "-o", "json"},
		{"plan", pb, "--local", "-o", "json", "-f", "0"},
		{"plan", pb, "--local", "--output=json", "--limit="},
		{"apply", pb, "--local", "-ojson", "-target=x"},
	} {
		var out, errb bytes.Buffer
		code := Execute(context.Background(), args, strings.NewReader(""), &out, &errb)
		assert.Equal(t, 1, code, "%v", args)
		assert.Empty(t, errb.String(), "%v: the error is on stdout", args)
		var ev struct {
			Schema      string `json:"@schema"`
			Type        string
			Diagnostics []struct{ Severity, Summary string }
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &ev), "%v: one JSON event: %s", args, out.String())
		assert.Equal(t, "wsu.event/v1", ev.Schema)
		assert.Equal(t, "diagnostic", ev.Type)
		require.Len(t, ev.Diagnostics, 1)
		assert.Equal(t, "error", ev.Diagnostics[0].Severity)
		assert.NotEmpty(t, ev.Diagnostics[0].Summary)
	}

	var out, errb bytes.Buffer
	code := Execute(context.Background(), []string{"plan", pb, "--local", "--bogus", "-o", "yaml"}, strings.NewReader(""), &out, &errb)
	assert.Equal(t, 1, code)
	assert.Contains(t, out.String(), "---\n'@schema': wsu.event/v1\n")
	assert.Contains(t, out.String(), "did you mean --forks?")

	// Human output: the error stays text on stderr.
	out.Reset()
	errb.Reset()
	code = Execute(context.Background(), []string{"plan", pb, "--local", "--bogus"}, strings.NewReader(""), &out, &errb)
	assert.Equal(t, 1, code)
	assert.Empty(t, out.String())
	assert.Contains(t, errb.String(), `Error: unknown option "bogus" for "wsu plan"; did you mean --forks?`)
}

// --list-hosts and --list-tasks honour -o json (and yaml): one
// play_outline event per play, not Ansible's text.
func TestListHonoursOutputFormat(t *testing.T) {
	pb := writeFile(t, t.TempDir(), "p.hcl", `
play "first" {
  hosts = "all"
  task "hello" {
    tags = ["greet"]
    print { msg = "hi" }
  }
  task "bye" {
    print { msg = "bye" }
  }
}
`)
	code, out, errs := wsu(t, nil, "plan", pb, "--local", "--list-hosts", "--list-tasks", "-o", "json")
	require.Equal(t, 0, code, out+errs)
	assert.NotContains(t, out, "playbook: ")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, out)
	var ev struct {
		Schema string `json:"@schema"`
		Type   string
		Play   string
		Hosts  []string
		Count  int
		Tasks  []struct {
			Address, Module string
			Tags            []string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &ev), lines[0])
	assert.Equal(t, "wsu.event/v1", ev.Schema)
	assert.Equal(t, "play_outline", ev.Type)
	assert.Equal(t, "first", ev.Play)
	assert.Equal(t, []string{"localhost"}, ev.Hosts)
	assert.Equal(t, 2, ev.Count)
	require.Len(t, ev.Tasks, 2)
	assert.Equal(t, `task["hello"]`, ev.Tasks[0].Address)
	assert.Equal(t, "print", ev.Tasks[0].Module)
	assert.Equal(t, []string{"greet"}, ev.Tasks[0].Tags)

	code, out, errs = wsu(t, nil, "apply", pb, "--local", "--list-tasks", "-o", "yaml", "--tags", "greet")
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "---\n'@schema': wsu.event/v1\n")
	assert.Contains(t, out, "type: play_outline")
	assert.Contains(t, out, `address: task["hello"]`)
	assert.NotContains(t, out, "bye")
	assert.NotContains(t, out, "hosts:", "--list-tasks alone lists no hosts")
}

// After every host failed, the later plays are said not to have run, and
// why, not listed as plays of 0 hosts.
func TestNoZeroHostPlaysAfterEveryHostFailed(t *testing.T) {
	pb := writeFile(t, t.TempDir(), "p.hcl", `
play "one" {
  hosts = "all"
  task "boom" {
    command { argv = ["false"] }
  }
}
play "two" {
  hosts = "all"
  task "hello" {
    print { msg = "hi" }
  }
}
`)
	code, out, errs := wsu(t, nil, "apply", pb, "--local", "--auto-approve")
	assert.Equal(t, 1, code, errs)
	assert.NotContains(t, out, "(0 hosts)")
	assert.Contains(t, out, `PLAY "two" (not run: every host of the play failed or was unreachable earlier)`)

	code, out, _ = wsu(t, nil, "apply", pb, "--local", "--auto-approve", "-o", "json")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, `"type":"play_not_run","time":`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, `"play":"two"`) {
			assert.NotContains(t, line, `"play_start"`, line)
		}
	}
}
