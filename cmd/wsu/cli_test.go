package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine/planfile"
)

var update = flag.Bool("update", false, "rewrite golden files")

// wsu runs the CLI in-process and returns exit code, stdout and stderr.
func wsu(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb, env: env}
	root := a.rootCommand()
	root.SetArgs(normalizeArgs(root, args))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		if ee, ok := err.(exitError); ok {
			code = ee.code
		} else {
			code = 1
			errb.WriteString("Error: " + err.Error() + "\n")
		}
	}
	return code, out.String(), errb.String()
}

// copyDir copies a fixture playbook directory into a temp dir.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	require.NoError(t, err)
	return dst
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run `go test ./cmd/wsu -update` to create it")
	assert.Equal(t, string(want), got, "golden file %s differs (go test ./cmd/wsu -update rewrites it)", path)
}

var volatileJSON = regexp.MustCompile(`"(time|duration_ms)":("[^"]*"|\d+),?`)

// TestPlanGolden pins the output, human and JSON, for each fixture under
// testdata/golden: plan on a fresh host, apply --diff, plan again.
func TestPlanGolden(t *testing.T) {
	fixtures, err := filepath.Glob("testdata/golden/*")
	require.NoError(t, err)
	require.NotEmpty(t, fixtures)
	for _, fx := range fixtures {
		t.Run(filepath.Base(fx), func(t *testing.T) {
			root := t.TempDir()
			pb := filepath.Join(fx, "playbook.hcl")
			args := []string{pb, "--local", "--forks", "1", "-var", "root=" + root}
			norm := func(s string) string { return strings.ReplaceAll(s, root, "$ROOT") }

			code, out, errs := wsu(t, nil, append([]string{"plan"}, args...)...)
			require.Equal(t, 0, code, errs)
			golden(t, filepath.Join(fx, "plan.txt"), norm(out))

			_, out, _ = wsu(t, nil, append([]string{"plan", "--output", "json"}, args...)...)
			golden(t, filepath.Join(fx, "plan.jsonl"), norm(volatileJSON.ReplaceAllString(out, "")))
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var ev map[string]any
				require.NoError(t, json.Unmarshal([]byte(line), &ev), "each line is one JSON event")
				assert.Equal(t, "wsu.event/v1", ev["@schema"])
			}

			code, out, errs = wsu(t, nil, append([]string{"apply", "--auto-approve", "--diff"}, args...)...)
			require.Equal(t, 0, code, errs)
			golden(t, filepath.Join(fx, "apply.txt"), norm(out))
			_, out, _ = wsu(t, nil, append([]string{"plan", "-v"}, args...)...)
			golden(t, filepath.Join(fx, "replan.txt"), norm(out))
		})
	}
}

// TestAcceptance is the core issue's acceptance list, through the CLI.
func TestAcceptance(t *testing.T) {
	dir := copyDir(t, "../../examples/demo")
	root := t.TempDir()
	pb := filepath.Join(dir, "site.hcl")
	base := []string{pb, "--local", "-var", "root=" + root}

	code, out, errs := wsu(t, nil, append([]string{"apply", "--auto-approve"}, base...)...)
	require.Equal(t, 0, code, out+errs)
	assert.Regexp(t, `changed=[1-9]`, out)

	code, out, errs = wsu(t, nil, append([]string{"apply", "--auto-approve"}, base...)...)
	require.Equal(t, 0, code, out+errs)
	assert.Regexp(t, `changed=0 `, out, "second apply changes nothing")

	code, out, _ = wsu(t, nil, append([]string{"plan", "-detailed-exitcode"}, base...)...)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "No changes.")

	// One variable changes: exactly the task using it, with a field diff.
	code, out, _ = wsu(t, nil, append([]string{"plan", "-detailed-exitcode", "-var", "cluster_dns=10.96.0.99"}, base...)...)
	assert.Equal(t, 2, code, out)
	changed := regexp.MustCompile(`(?m)^\s+(\+|~|-|-/\+|!) \[localhost\] (task|handler) "([^"]+)"`).FindAllStringSubmatch(out, -1)
	var names []string
	for _, m := range changed {
		names = append(names, m[2]+" "+m[3])
	}
	assert.Equal(t, []string{"task kubelet_config", "handler restart kubelet"}, names, out)
	assert.Regexp(t, `~ sha256: "[0-9a-f]{64}" → "[0-9a-f]{64}"`, out)
	assert.Contains(t, out, "Plan: 2 tasks to change on 1 host.")

	// apply --check is plan under Ansible's name: it shows the same
	// change, writes nothing and exits 0.
	before, err := os.ReadFile(filepath.Join(root, "etc", "kubelet.conf"))
	require.NoError(t, err)
	code, out, _ = wsu(t, nil, append([]string{"apply", "--check", "-var", "cluster_dns=10.96.0.99"}, base...)...)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "Plan: 2 tasks to change on 1 host.")
	after, err := os.ReadFile(filepath.Join(root, "etc", "kubelet.conf"))
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "--check changes nothing")

	// An error: -detailed-exitcode gives 1, not 0 or 2.
	code, out, _ = wsu(t, nil, append([]string{"plan", "-detailed-exitcode", "-var", "cluster_dns=10.96.0.99", "-var", "max_pods=many"}, base...)...)
	assert.Equal(t, 1, code, out)
}

func TestSavedPlan(t *testing.T) {
	dir := copyDir(t, "../../examples/demo")
	root := t.TempDir()
	pb := filepath.Join(dir, "site.hcl")
	planFile := filepath.Join(t.TempDir(), "join.plan")
	varFile := filepath.Join(dir, "site.vars.hcl")
	require.NoError(t, os.WriteFile(varFile, []byte("max_pods = 110\n"), 0o644))
	args := []string{pb, "--local", "-var", "root=" + root, "-var-file", varFile}

	code, out, errs := wsu(t, nil, append([]string{"plan", "-out", planFile}, args...)...)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "Saved the plan to "+planFile)
	st, err := os.Stat(planFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// A fresh plan applies, exactly as planned.
	code, out, errs = wsu(t, nil, "apply", planFile)
	require.Equal(t, 0, code, out+errs)
	conf, err := os.ReadFile(filepath.Join(root, "etc", "kubelet.conf"))
	require.NoError(t, err)
	assert.Contains(t, string(conf), "maxPods: 110")

	cases := []struct {
		name   string
		change func()
		want   string
	}{
		{"var file", func() { os.WriteFile(varFile, []byte("max_pods = 120\n"), 0o644) }, "file " + varFile + " changed"},
		{"playbook", func() {
			src, _ := os.ReadFile(pb)
			os.WriteFile(pb, append(src, []byte("\n# edited\n")...), 0o644)
		}, "file " + pb + " changed"},
		{"template", func() {
			tpl := filepath.Join(dir, "templates", "kubelet.conf.tftpl")
			src, _ := os.ReadFile(tpl)
			os.WriteFile(tpl, append(src, []byte("# edited\n")...), 0o644)
		}, "file " + filepath.Join(dir, "templates", "kubelet.conf.tftpl") + " changed"},
		{"host state", func() { os.WriteFile(filepath.Join(root, "etc", "kubelet.conf"), []byte("tampered"), 0o644) }, `task["kubelet_config"]: planned no change, now ~ update`},
		{"env var", func() {}, "variable " + pb + ":cluster_dns changed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Plan against the converged host, then disturb one input.
			code, out, errs := wsu(t, nil, append([]string{"plan", "-out", planFile}, args...)...)
			require.Equal(t, 0, code, out+errs)
			tc.change()
			var env []string
			if tc.name == "env var" {
				env = []string{"WSU_VAR_cluster_dns=10.1.1.1"}
			}
			before, _ := os.ReadFile(filepath.Join(root, "etc", "kubelet.conf"))
			code, out, errs = wsu(t, env, "apply", planFile)
			assert.Equal(t, 1, code)
			assert.Contains(t, out+errs, "Saved plan is stale")
			assert.Contains(t, out+errs, tc.want)
			after, _ := os.ReadFile(filepath.Join(root, "etc", "kubelet.conf"))
			assert.Equal(t, string(before), string(after), "a refused plan applies nothing")
			// Restore a converged state for the next case.
			os.WriteFile(varFile, []byte("max_pods = 110\n"), 0o644)
			code, out, errs = wsu(t, nil, append([]string{"apply", "--auto-approve"}, args...)...)
			require.Equal(t, 0, code, out+errs)
		})
	}
}

func TestValidateAndFmt(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.hcl")
	require.NoError(t, os.WriteFile(good, []byte("play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    print { msg = \"hi\" }\n  }\n}\n"), 0o644))
	code, out, _ := wsu(t, nil, "validate", good)
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Success!")

	bad := filepath.Join(dir, "bad.hcl")
	require.NoError(t, os.WriteFile(bad, []byte("play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    fiel { path = \"/x\" }\n  }\n}\n"), 0o644))
	code, _, errs := wsu(t, nil, "validate", "--no-color", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "Unknown module")
	assert.Contains(t, errs, `Did you mean "file"?`)
	assert.Contains(t, errs, "bad.hcl line 4")

	ugly := filepath.Join(dir, "ugly.hcl")
	require.NoError(t, os.WriteFile(ugly, []byte("play \"p\" {\nhosts=\"all\"\n}\n"), 0o644))
	code, out, _ = wsu(t, nil, "fmt", "--check", dir)
	assert.Equal(t, 3, code)
	assert.Contains(t, out, "ugly.hcl")
	assert.NotContains(t, out, "good.hcl")
	code, _, _ = wsu(t, nil, "fmt", dir)
	assert.Equal(t, 0, code)
	code, _, _ = wsu(t, nil, "fmt", "--check", dir)
	assert.Equal(t, 0, code)
	fixed, _ := os.ReadFile(ugly)
	assert.Equal(t, "play \"p\" {\n  hosts = \"all\"\n}\n", string(fixed))
}

// TestModuleDocsCurrent fails when docs/modules.md no longer matches the
// module schemas.
func TestModuleDocsCurrent(t *testing.T) {
	code, out, _ := wsu(t, nil, "modules", "--markdown")
	require.Equal(t, 0, code)
	want, err := os.ReadFile("../../docs/modules.md")
	require.NoError(t, err)
	assert.Equal(t, string(want), out, "docs/modules.md is stale: run `make docs`")

	code, out, _ = wsu(t, nil, "modules", "file")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Arguments:")
	code, _, errs := wsu(t, nil, "modules", "fiel")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `did you mean "file"?`)
}

func TestNoInventoryIsAClearError(t *testing.T) {
	code, _, errs := wsu(t, nil, "plan", "--no-color", "../../examples/demo/site.hcl")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "No inventory")
	assert.Contains(t, errs, "--local")
}

// TestInputErrorsAreShown: problems found before any host is touched are
// printed, located, on stderr, with exit code 1.
func TestInputErrorsAreShown(t *testing.T) {
	root := t.TempDir()
	pb := "../../examples/demo/site.hcl"
	badVars := filepath.Join(t.TempDir(), "site.wsuvars")
	require.NoError(t, os.WriteFile(badVars, []byte("max_pods = 10\nclusterdns = \n"), 0o644))
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"-var", "nonsense"}, []string{"Invalid -var option", `The option has no '='`}},
		{[]string{"-var", "clusterdns=1"}, []string{"Value for undeclared variable", `Did you mean "cluster_dns"?`}},
		{[]string{"-var", "max_pods=many"}, []string{"max_pods"}},
		{[]string{"-var-file", "/nonexistent/vars.hcl"}, []string{"Cannot read variables file"}},
		// The bad line of a var file is quoted, as a playbook's would be.
		{[]string{"-var-file", badVars}, []string{"on " + badVars + " line 2", "2: clusterdns = "}},
		{[]string{"--output", "xml"}, []string{"--output must be human, json or yaml"}},
	}
	for _, tc := range cases {
		args := append([]string{"plan", pb, "--local", "--no-color", "-var", "root=" + root}, tc.args...)
		code, out, errs := wsu(t, nil, args...)
		assert.Equal(t, 1, code, "%v", tc.args)
		for _, w := range tc.want {
			// Per-host problems (a value of the wrong type) are part of
			// the run's output; the rest go to stderr.
			assert.Contains(t, out+errs, w, "%v", tc.args)
		}
	}
}

func TestSavedPlanRefusesNewInputs(t *testing.T) {
	root := t.TempDir()
	planFile := filepath.Join(t.TempDir(), "p.plan")
	code, _, errs := wsu(t, nil, "plan", "../../examples/demo/site.hcl", "--local", "-var", "root="+root, "-out", planFile)
	require.Equal(t, 0, code, errs)
	code, _, errs = wsu(t, nil, "apply", planFile, "-var", "max_pods=1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "carries its own inputs; drop --var")
	code, _, errs = wsu(t, nil, "apply", planFile, "--context", "prod")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "carries its own inputs; drop --context")
}

// TestSavedPlanKeepsCluster: --kubeconfig and --context are recorded in a
// saved plan and used by apply, so a plan cannot be applied to another
// cluster by running apply with other flags or none.
func TestSavedPlanKeepsCluster(t *testing.T) {
	root := t.TempDir()
	planFile := filepath.Join(t.TempDir(), "p.plan")
	code, _, errs := wsu(t, nil, "plan", "../../examples/demo/site.hcl", "--local", "-var", "root="+root, "-out", planFile,
		"--kubeconfig", "/etc/wsu/prod.kubeconfig", "--context", "prod")
	require.Equal(t, 0, code, errs)
	saved, isPlan, err := planfile.Load(planFile)
	require.NoError(t, err)
	require.True(t, isPlan)
	assert.Equal(t, "/etc/wsu/prod.kubeconfig", saved.Kubeconfig)
	assert.Equal(t, "prod", saved.KubeContext)
}
