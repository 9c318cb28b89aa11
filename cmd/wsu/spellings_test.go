package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/version"
)

// The acceptance tests of issue 14's "spellings admins type".

func TestExtraVarsAliases(t *testing.T) {
	pb, root := demoArgs(t)
	vars := writeFile(t, t.TempDir(), "v.hcl", "cluster_dns = \"10.96.0.77\"\n")
	for name, args := range map[string][]string{
		"-e key=value pairs": {"-e", "root=" + root + " cluster_dns=10.96.0.77"},
		"--extra-vars JSON":  {"--extra-vars", `{"root": "` + root + `", "cluster_dns": "10.96.0.77", "max_pods": 110}`},
		"-e @file":           {"-e", "root=" + root, "-e", "@" + vars},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errs := wsu(t, nil, append([]string{"plan", pb, "--local"}, args...)...)
			require.Equal(t, 0, code, out+errs)
			assert.Contains(t, out, root+"/etc/kubelet.conf")
			// The kubelet config with the default DNS has this hash.
			assert.NotContains(t, out, "f8c7b37362d597ffa578cb85b72e395562bf98690d161ab8e491852d4a9d2495", "cluster_dns was set")
		})
	}
	code, _, errs := wsu(t, nil, "plan", pb, "--local", "-e", "{not json")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "not a JSON object")
}

func TestOtherToolsFlagSpellings(t *testing.T) {
	pb, root := demoArgs(t)
	// Single-dash long options work...
	code, out, errs := wsu(t, nil, "plan", pb, "-local", "-var", "root="+root, "-no-color", "-detailed-exitcode")
	assert.Equal(t, 2, code, out+errs)
	code, out, errs = wsu(t, nil, "apply", pb, "-local", "-var", "root="+root, "-auto-approve")
	assert.Equal(t, 0, code, out+errs)
	// ...or are told the wsu spelling.
	code, _, errs = wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, "-json")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "did you mean --output json?")
	code, _, errs = wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, "--lmit", "x")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "did you mean --limit?")

	// Global flags before the command.
	code, out, errs = wsu(t, nil, "-v", "plan", pb, "--local", "-var", "root="+root)
	assert.Equal(t, 0, code, errs)
	assert.Contains(t, out, "(no change)", "-v before plan is --verbose")
	code, _, errs = wsu(t, nil, "--no-color", "plan", pb, "--local", "-var", "root="+root)
	assert.Equal(t, 0, code, errs)
	code, out, _ = wsu(t, nil, "-v")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "wsu "+version.Version+"\n", "-v alone is still the version")

	// -o yaml beside -o json: the same events, one document each.
	code, out, errs = wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, "-o", "yaml")
	require.Equal(t, 0, code, errs)
	assert.True(t, strings.HasPrefix(out, "---\n"), out)
	assert.Contains(t, out, "type: run_start")
	assert.Contains(t, out, "type: recap")
	assert.Equal(t, strings.Count(out, "---\n"), strings.Count(out, "'@schema': wsu.event/v1"))
}

// TestTerraformSpellings: Terraform's -target, -parallelism, -input,
// -lock are never read as short letters (-t arget=x): -target and
// -parallelism are told wsu's options, the harmless ones are accepted
// with a note (issue 31).
func TestTerraformSpellings(t *testing.T) {
	pb, root := demoArgs(t)
	for _, c := range []struct{ arg, want string }{
		{"-target=module.x", "did you mean --limit PATTERN (hosts) or --tags TAG (tasks)?"},
		{"-target", "did you mean --limit PATTERN (hosts) or --tags TAG (tasks)?"},
		{"-parallelism=3", "did you mean --forks N?"},
	} {
		code, out, errs := wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, c.arg)
		assert.Equal(t, 1, code, out+errs)
		assert.Contains(t, errs, `unknown option "`+strings.SplitN(c.arg, "=", 2)[0]+`" for "wsu plan"; `+c.want)
		assert.NotContains(t, errs, "Unknown tag")
	}
	code, out, errs := wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, "-input=false", "-lock=false", "-lock-timeout=10s")
	assert.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, root+"/etc/kubelet.conf", "the plan ran")
	for _, opt := range []string{"-input=false", "-lock=false", "-lock-timeout=10s"} {
		assert.Contains(t, errs, "Note: "+opt+" is Terraform's option, ignored: ")
	}
	code, out, errs = wsu(t, nil, "apply", pb, "--local", "-var", "root="+root, "-auto-approve", "-input=false")
	assert.Equal(t, 0, code, out+errs)
	assert.FileExists(t, filepath.Join(root, "etc", "kubelet.conf"))
}

func TestListHostsTasksAndSyntaxCheck(t *testing.T) {
	pb, root := demoArgs(t)
	code, out, errs := wsu(t, nil, "plan", pb, "--local", "-var", "root="+root, "--list-hosts")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "play \"layout\" (1 host)\n    localhost\n")
	assert.NotContains(t, out, "RECAP", "nothing ran")
	code, out, errs = wsu(t, nil, "apply", pb, "--local", "-var", "root="+root, "--list-tasks")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, `task["kubelet_config"] (file)`)
	assert.NoFileExists(t, filepath.Join(root, "etc", "kubelet.conf"), "--list-tasks applies nothing")

	code, out, errs = wsu(t, nil, "apply", pb, "--syntax-check")
	assert.Equal(t, 0, code, errs)
	assert.Contains(t, out, "Success! The playbook is valid.")
	code, _, errs = wsu(t, nil, "apply", pb, "--syntax-check", "-e", "max_pods=many")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "max_pods")
	entries, _ := os.ReadDir(root)
	assert.Empty(t, entries, "nothing was touched")
}

func TestBadContextListsContexts(t *testing.T) {
	pb, root := demoArgs(t)
	kc := writeFile(t, t.TempDir(), "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: x}
contexts:
- name: prod
  context: {cluster: c, user: u}
- name: staging
  context: {cluster: c, user: u}
current-context: prod
`)
	code, out, errs := wsu(t, nil, "plan", pb, "-var", "root="+root, "-i", "k8s://ns/windows-instances", "--kubeconfig", kc, "--context", "prd")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, flat(errs), `context "prd" does not exist (its contexts: prod, staging)`)
}

// --start-at-task as Ansible: the run starts at the first task so named
// (or so addressed); plays before it say they were skipped, its own play
// says how many tasks before it were; an unknown name is refused with the
// nearest one before any host is touched.
func TestStartAtTask(t *testing.T) {
	dir := t.TempDir()
	pb := writeFile(t, dir, "p.hcl", `
variable "root" {
  type = string
}
play "prepare" {
  hosts = "all"
  task "install runtime" {
    file {
      path    = "${var.root}/runtime"
      content = "x"
    }
  }
}
play "join" {
  hosts = "all"
  task "configure kubelet" {
    file {
      path    = "${var.root}/kubelet"
      content = "x"
    }
  }
  task "wait for node" {
    file {
      path    = "${var.root}/node"
      content = "x"
    }
  }
}
`)
	root := t.TempDir()
	args := []string{"apply", "--auto-approve", pb, "--local", "-var", "root=" + root}
	code, out, errs := wsu(t, nil, append(args, "--start-at-task", "wait for node")...)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, `PLAY "prepare" (skipped: before --start-at-task "wait for node")`)
	assert.Contains(t, out, `PLAY "join" (1 host; starting at task "wait for node" (--start-at-task): the 1 task before it skipped)`)
	assert.FileExists(t, filepath.Join(root, "node"))
	assert.NoFileExists(t, filepath.Join(root, "runtime"))
	assert.NoFileExists(t, filepath.Join(root, "kubelet"))
	assert.Contains(t, out, "changed=1 ")

	// By address, as --list-tasks prints it; the list starts there too.
	code, out, errs = wsu(t, nil, append(args, "--start-at-task", `task["configure kubelet"]`, "--list-tasks")...)
	require.Equal(t, 0, code, out+errs)
	assert.NotContains(t, out, `task["install runtime"]`)
	assert.Contains(t, out, `task["configure kubelet"] (file)`)
	code, out, errs = wsu(t, nil, "plan", pb, "--local", "-var", "root="+t.TempDir(), "--start-at-task", `task["configure kubelet"]`, "-o", "json")
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, `"type":"play_not_run","time":`)
	assert.Contains(t, out, `"play":"prepare","message":"skipped: before --start-at-task \"task[\\\"configure kubelet\\\"]\""`)
	assert.NotContains(t, out, `"task":"install runtime"`)

	// Unknown: an error naming the nearest, nothing run.
	fresh := t.TempDir()
	code, out, errs = wsu(t, nil, "apply", "--auto-approve", pb, "--local", "-var", "root="+fresh, "--start-at-task", "wait for nodes")
	assert.Equal(t, 1, code, out+errs)
	assert.Contains(t, flat(errs), `Unknown task`)
	assert.Contains(t, flat(errs), `--start-at-task wait for nodes: no task of the playbook is named so, nothing was run. Did you mean "wait for node"?`)
	assert.NotContains(t, out, "PLAY")
	entries, _ := os.ReadDir(fresh)
	assert.Empty(t, entries, "no host was touched")
}
