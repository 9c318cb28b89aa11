package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine/planfile"
)

// The tests of issue 14's "What admins read": content diffs, output order,
// wsu show, damaged saved plans, bounded excerpts and the README's
// promises.

// TestLocalHostIsInWindowsGroup: `wsu apply join --local` (README) finds
// its host, since the stock plays target the group windows.
func TestLocalHostIsInWindowsGroup(t *testing.T) {
	code, out, errs := wsu(t, nil, "plan", "join", "--local", "--list-hosts")
	require.Equal(t, 0, code, out+errs)
	assert.Regexp(t, `play "[^"]+" \(1 host\)\n    localhost\n`, out)
	assert.NotContains(t, out, "(0 hosts)")
}

// TestReadmePlaybookValidates: the sample playbook in the README is one
// wsu accepts, and its handler restarts the service with win_service.
func TestReadmePlaybookValidates(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)A playbook:\n\n```hcl\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "README has a sample playbook")
	sample := string(m[1])
	assert.Contains(t, sample, `state = "restarted"`)
	dir := t.TempDir()
	pb := filepath.Join(dir, "site.hcl")
	require.NoError(t, os.WriteFile(pb, m[1], 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubelet.conf.tftpl"), []byte("clusterDNS: ${cluster_dns}\n"), 0o644))
	code, out, errs := wsu(t, nil, "validate", pb)
	require.Equal(t, 0, code, out+errs)
	code, out, errs = wsu(t, nil, "fmt", "--check", pb)
	assert.Equal(t, 0, code, "the README sample is formatted: "+out+errs)
}

// TestReadmeFirstStep: the README's first command needs no cluster and no
// Windows host: it plans the demo site playbook on this machine.
func TestReadmeFirstStep(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^wsu (plan +examples/demo/site\.hcl --local -var root=(\S+)) `).FindSubmatch(readme)
	require.NotNil(t, m, "README's first step plans examples/demo/site.hcl with --local")
	args := strings.Fields(strings.Replace(string(m[1]), string(m[2]), t.TempDir(), 1))
	args[1] = "../../" + args[1]
	code, out, errs := wsu(t, nil, args...)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "Plan: ")
}

// TestPlanTextIsDeterministic: three plans of the same playbook on several
// hosts (which run at once) print the same text, results task by task in
// inventory order; a saved plan's file is the same each time too, but for
// its salt and the hashes it keys (each plan has its own).
func TestPlanTextIsDeterministic(t *testing.T) {
	// Keyed hashes differ with each plan's salt, and so does the checksum
	// over them: the rest must be the same.
	hexHash := regexp.MustCompile(`"(sha256:)?[0-9a-f]{64}"`)
	pb, root := demoArgs(t)
	dir := t.TempDir()
	inv := filepath.Join(dir, "hosts.ini")
	require.NoError(t, os.WriteFile(inv, []byte("[windows]\nwin05\nwin01\nwin04\nwin02\nwin03\n"), 0o644))
	var texts, files []string
	for i := range 3 {
		out := filepath.Join(dir, fmt.Sprintf("plan%d.json", i))
		code, text, errs := wsu(t, nil, "plan", pb, "-i", inv, "--local", "-var", "root="+root, "-out", out)
		require.Equal(t, 0, code, text+errs)
		texts = append(texts, strings.ReplaceAll(text, out, "PLANFILE"))
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		files = append(files, hexHash.ReplaceAllString(string(data), `"HASH"`))
	}
	assert.Equal(t, texts[0], texts[1])
	assert.Equal(t, texts[0], texts[2])
	assert.Equal(t, files[0], files[1])
	assert.Equal(t, files[0], files[2])
	// Within the first task, hosts in inventory order (each host's
	// for_each instances together).
	var hosts []string
	first := ""
	for _, m := range regexp.MustCompile(`\[(win0\d)\] task "([^"]+)"`).FindAllStringSubmatch(texts[0], -1) {
		if first == "" {
			first = m[2]
		}
		if m[2] == first && (len(hosts) == 0 || hosts[len(hosts)-1] != m[1]) {
			hosts = append(hosts, m[1])
		}
	}
	assert.Equal(t, []string{"win05", "win01", "win04", "win02", "win03"}, hosts, texts[0])
}

// diffPlaybook writes one text file from a variable, one from a sensitive
// variable and one binary file.
const diffPlaybook = `variable "root" {
  type = string
}
variable "text" {
  type = string
}
variable "token" {
  type      = string
  sensitive = true
}
play "p" {
  hosts = "all"
  task "conf" {
    file {
      path    = "${var.root}/app.conf"
      content = var.text
    }
  }
  task "secret" {
    file {
      path    = "${var.root}/token"
      content = "token: ${var.token}\n"
    }
  }
  task "blob" {
    file {
      path    = "${var.root}/blob"
      content = "\u0000\u0001${var.text}"
    }
  }
}
`

// TestFileChangesShowContentDiff: a text file's change is a unified diff
// of its content in plan and apply --diff; a sensitive one shows none, a
// binary one a note; large files are compared by hash alone.
func TestFileChangesShowContentDiff(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	pb := writeFile(t, dir, "site.hcl", diffPlaybook)
	old := "a\nb\nc\nd\ne\nf\ng\n"
	require.NoError(t, os.WriteFile(filepath.Join(root, "app.conf"), []byte(old), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "token"), []byte("token: old-secret-value\n"), 0o600))
	args := func(text string) []string {
		return []string{pb, "--local", "-var", "root=" + root, "-var", "text=" + text, "-var", "token=new-secret-value"}
	}
	code, out, errs := wsu(t, nil, append([]string{"plan"}, args("a\nb\nc\nD\ne\nf\ng\n")...)...)
	require.Equal(t, 0, code, out+errs)
	conf := filepath.Join(root, "app.conf")
	assert.Contains(t, out, "--- "+conf+"\n")
	assert.Contains(t, out, "+++ "+conf+"\n")
	assert.Contains(t, out, "@@ -1,7 +1,7 @@\n")
	assert.Regexp(t, `(?m)^\s+ c\n\s+-d\n\s+\+D\n\s+ e$`, out)
	assert.Contains(t, out, "(binary content: compare by sha256)")
	assert.NotContains(t, out, "secret-value")
	assert.NotContains(t, out, "+++ "+filepath.Join(root, "token"), "a file from a sensitive value shows no diff")

	// JSON carries the same diff.
	code, out, errs = wsu(t, nil, append([]string{"plan", "-o", "json"}, args("a\nb\nc\nD\ne\nf\ng\n")...)...)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, `"diff":"--- `+conf)
	assert.NotContains(t, out, "secret-value")

	// apply --diff shows it as it applies; apply alone does not.
	code, out, errs = wsu(t, nil, append([]string{"apply", "--auto-approve"}, args("one\n")...)...)
	require.Equal(t, 0, code, out+errs)
	assert.NotContains(t, out, "@@")
	code, out, errs = wsu(t, nil, append([]string{"apply", "--auto-approve", "--diff"}, args("two\n")...)...)
	require.Equal(t, 0, code, out+errs)
	assert.Regexp(t, `(?m)^\s+-one\n\s+\+two$`, out)

	// Larger than the bound: no diff, a note.
	big := strings.Repeat("line\n", 20000)
	code, out, errs = wsu(t, nil, append([]string{"plan"}, args(big)...)...)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "(no content diff: larger than 64 KiB; compare by sha256)")
	assert.Less(t, len(out), 10000, "the content is not echoed")
}

// TestShowSavedPlan: wsu show prints a saved plan for review, human and
// JSON, with the content diff the plan showed and no secret.
func TestShowSavedPlan(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	pb := writeFile(t, dir, "site.hcl", diffPlaybook)
	require.NoError(t, os.WriteFile(filepath.Join(root, "app.conf"), []byte("old\n"), 0o644))
	planFile := filepath.Join(dir, "site.plan")
	code, out, errs := wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, "-var", "text=new\n", "-var", "token=new-secret-value", "-out", planFile)
	require.Equal(t, 0, code, out+errs)

	code, out, errs = wsu(t, nil, "show", planFile)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "Saved plan "+planFile)
	assert.Contains(t, out, "playbook:   "+pb)
	assert.Contains(t, out, "give again: token (sensitive")
	assert.Contains(t, out, "HOST localhost")
	assert.Regexp(t, `~ \[localhost\] task\["conf"\] \(file\) `+regexp.QuoteMeta(filepath.Join(root, "app.conf")), out)
	assert.Regexp(t, `(?m)^\s+-old\n\s+\+new$`, out)
	assert.Contains(t, out, "Plan: 3 tasks to change on 1 host.")
	assert.NotContains(t, out, "secret-value")

	code, out, errs = wsu(t, nil, "show", "-o", "json", planFile)
	require.Equal(t, 0, code, out+errs)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.EqualValues(t, planfile.FormatVersion, doc["format_version"])
	assert.Contains(t, out, `"diff": "--- `)
	assert.NotContains(t, out, "secret-value")

	code, _, errs = wsu(t, nil, "show", pb)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "is not a saved plan")
}

// TestDamagedSavedPlans: a plan cut short, of another format, from another
// wsu version or applied from another directory gets a plan error (or a
// warning), never a playbook parse error.
func TestDamagedSavedPlans(t *testing.T) {
	pb, root := demoArgs(t)
	dir := filepath.Dir(pb)
	t.Chdir(dir)
	planFile := filepath.Join(dir, "site.plan")
	code, out, errs := wsu(t, nil, "plan", "site.hcl", "--local", "-var", "root="+root, "-out", planFile)
	require.Equal(t, 0, code, out+errs)
	good, err := os.ReadFile(planFile)
	require.NoError(t, err)

	write := func(data string) string {
		p := filepath.Join(t.TempDir(), "bad.plan")
		require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
		return p
	}
	for _, tc := range []struct{ name, data, want string }{
		{"truncated", string(good[:len(good)/2]), "is a damaged saved plan (it ends early: cut short?)"},
		{"garbled", strings.Replace(string(good), `"hosts"`, `"hosts" ::`, 1), "is a damaged saved plan (invalid JSON at byte"},
		{"wrong format", strings.Replace(string(good), fmt.Sprintf(`"format_version": %d`, planfile.FormatVersion), `"format_version": 7`, 1), fmt.Sprintf("is a plan in format 7; this wsu reads format %d", planfile.FormatVersion)},
		// Format 1 kept unsalted hashes: refused, not compared.
		{"format 1", strings.Replace(string(good), fmt.Sprintf(`"format_version": %d`, planfile.FormatVersion), `"format_version": 1`, 1), fmt.Sprintf("is a plan in format 1; this wsu reads format %d: plan again with this wsu", planfile.FormatVersion)},
		{"no salt", regexp.MustCompile(`"salt": "[0-9a-f]*"`).ReplaceAllString(string(good), `"salt": ""`), "is a damaged saved plan (no salt of 32 bytes in hex)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := write(tc.data)
			for _, cmd := range []string{"apply", "show"} {
				code, out, errs := wsu(t, nil, cmd, p)
				assert.Equal(t, 1, code)
				assert.Contains(t, errs, tc.want, out)
				assert.NotContains(t, out+errs, "Argument or block definition required", "not read as a playbook")
			}
		})
	}

	t.Run("other version", func(t *testing.T) {
		saved, _, err := planfile.Load(planFile)
		require.NoError(t, err)
		saved.WSUVersion = "0.0.1-old"
		p := filepath.Join(t.TempDir(), "old.plan")
		require.NoError(t, planfile.Save(p, saved))
		code, out, errs := wsu(t, nil, "apply", p)
		require.Equal(t, 0, code, out+errs)
		assert.Contains(t, errs, "Saved plan from another wsu version")
	})

	t.Run("other directory", func(t *testing.T) {
		code, out, errs = wsu(t, nil, "plan", "site.hcl", "--local", "-var", "root="+root, "-out", planFile)
		require.Equal(t, 0, code, out+errs)
		t.Chdir(t.TempDir())
		code, out, errs := wsu(t, nil, "apply", planFile)
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "this plan was made in "+dir, out)
		assert.Contains(t, errs, "cd "+dir)
	})
}

// TestEditedPlanRefused: a saved plan whose shown text was edited to say
// "no change" is refused by show and by apply (its checksum); one edited
// and re-sealed by a forger is still refused by apply, which compares
// what the plan shows with what it plans now. Nothing is changed.
func TestEditedPlanRefused(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	pb := writeFile(t, dir, "p.hcl", `
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
	marker := filepath.Join(root, "marker")
	planFile := filepath.Join(dir, "p.plan")
	code, out, errs := wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, "-out", planFile)
	require.Equal(t, 0, code, out+errs)
	good, err := os.ReadFile(planFile)
	require.NoError(t, err)

	// The shown text edited: the task reads as unchanged, its change gone.
	var doc map[string]any
	require.NoError(t, json.Unmarshal(good, &doc))
	task := doc["hosts"].(map[string]any)["localhost"].(map[string]any)["tasks"].([]any)[0].(map[string]any)
	require.Equal(t, "changed", task["status"])
	task["status"], task["summary"] = "ok", ""
	delete(task, "change")
	delete(task, "module")
	edited, err := json.MarshalIndent(doc, "", "  ")
	require.NoError(t, err)
	editedFile := filepath.Join(dir, "edited.plan")
	require.NoError(t, os.WriteFile(editedFile, edited, 0o600))
	for _, cmd := range [][]string{{"show"}, {"apply"}, {"show", "-o", "json"}} {
		code, out, errs := wsu(t, nil, append(cmd, editedFile)...)
		assert.Equal(t, 1, code, "%v: %s", cmd, out)
		assert.Contains(t, errs, editedFile+" was changed after wsu saved it (its checksum does not match its content)", cmd)
		assert.NotContains(t, out, "No changes", cmd)
		assert.NoFileExists(t, marker)
	}

	// Edited and re-sealed (the checksum recomputed): show has only the
	// file to go by, but apply plans again and refuses.
	saved, _, err := planfile.Load(planFile)
	require.NoError(t, err)
	st := &saved.Hosts["localhost"].Tasks[0]
	st.Status, st.Summary, st.Module, st.Change = "ok", "", "", nil
	forged := filepath.Join(dir, "forged.plan")
	require.NoError(t, planfile.Save(forged, saved))
	code, out, errs = wsu(t, nil, "show", forged)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "No changes", "the forgery as show sees it")
	code, out, errs = wsu(t, nil, "apply", forged)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out+errs, "Saved plan is stale")
	assert.Contains(t, out+errs, `host localhost: task["marker"]: the saved plan shows ok, but the plan now is changed: + create`)
	assert.Contains(t, out+errs, marker+" (the file was edited?)")
	assert.NoFileExists(t, marker)

	// The plan as saved still applies.
	code, out, errs = wsu(t, nil, "apply", planFile)
	require.Equal(t, 0, code, out+errs)
	assert.FileExists(t, marker)
}
