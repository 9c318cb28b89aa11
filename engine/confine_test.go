package engine_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules/all"
)

// The token a confined run must not read: a file outside its roots, as
// the controller pod's ServiceAccount token is outside a site playbook's
// directory.
const podToken = "eyJhbGciOiJSUzI1NiJ9.pod-token"

func confinedFixture(t *testing.T, task string) (*fixture, string) {
	t.Helper()
	secretDir := t.TempDir()
	token := filepath.Join(secretDir, "token")
	require.NoError(t, os.WriteFile(token, []byte(podToken), 0o600))
	f := newFixture(t, map[string]string{
		"play.hcl": rootVar + `
variable "token" {
  type = string
}

play "steal" {
  hosts = "all"

` + task + `
}
`,
		"templates/motd.txt": "welcome",
	})
	f.vars = append(f.vars, "token="+token)
	require.NoError(t, os.Symlink(token, filepath.Join(f.dir, "templates", "link")))
	f.confine = []string{f.dir}
	return f, token
}

// TestConfinedRunReadsOnlyItsRoots: a run confined to its playbook's
// directory (a site playbook from a ConfigMap in the controller) reads
// its own files, and no file outside them: not by path, home directory,
// "..", a symbolic link, fileexists or a module's local source. Each
// refusal is located at the expression and never quotes the file.
func TestConfinedRunReadsOnlyItsRoots(t *testing.T) {
	t.Parallel()
	// A constant path is refused when the playbook is loaded, before any
	// host is touched; one from a variable when the task runs.
	refused := map[string]struct {
		task, summary string
		line          int
		atLoad        bool
	}{
		"absolute path":  {`  task "t" {` + "\n    print {\n      msg = file(var.token)\n    }\n  }", "Error in function call", 15, false},
		"dot-dot":        {`  task "t" {` + "\n    print {\n      msg = file(\"../${basename(dirname(var.token))}/token\")\n    }\n  }", "Error in function call", 15, false},
		"symbolic link":  {`  task "t" {` + "\n    print {\n      msg = file(\"templates/link\")\n    }\n  }", "Error in function call", 15, true},
		"home directory": {`  task "t" {` + "\n    print {\n      msg = file(\"~/.kube/config\")\n    }\n  }", "Error in function call", 15, true},
		"fileexists":     {`  task "t" {` + "\n    print {\n      msg = tostring(fileexists(var.token))\n    }\n  }", "Error in function call", 15, false},
		"templatefile":   {`  task "t" {` + "\n    print {\n      msg = templatefile(var.token, {})\n    }\n  }", "Error in function call", 15, false},
		"module source":  {`  task "t" {` + "\n    win_copy {\n      src  = var.token\n      dest = \"C:\\\\k\\\\token\"\n    }\n  }", "File outside the directories this run may read", 15, false},
	}
	for name, c := range refused {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, _ := confinedFixture(t, c.task)
			if c.atLoad {
				loader := playbook.NewLoader(all.Schemas(), nil)
				loader.Confine = f.confine
				_, diags := loader.Load(filepath.Join(f.dir, "play.hcl"))
				require.True(t, diags.HasErrors())
				assert.Equal(t, c.summary, diags[0].Summary)
				assert.Contains(t, diags[0].Detail, "a playbook from a ConfigMap reads only its own files and the payload")
				assert.NotContains(t, diags[0].Detail, podToken)
				require.NotNil(t, diags[0].Subject)
				assert.Equal(t, c.line, diags[0].Subject.Start.Line)
				return
			}
			res, rec := f.run(engine.ModeApply)
			ev := rec.result(t, "localhost", "t")
			require.Equal(t, engine.StatusFailed, ev.Status)
			require.NotEmpty(t, ev.Diagnostics)
			d := ev.Diagnostics[0]
			assert.Equal(t, c.summary, d.Summary)
			assert.Contains(t, d.Detail, "a playbook from a ConfigMap reads only its own files and the payload")
			require.NotNil(t, d.Range)
			assert.Equal(t, c.line, d.Range.Line)
			assert.Equal(t, filepath.Join(f.dir, "play.hcl"), d.Range.Filename)
			assert.NotContains(t, d.Detail, podToken)
			assert.NotContains(t, ev.Message, podToken)
			assert.True(t, res.Failed())
		})
	}

	t.Run("own files", func(t *testing.T) {
		t.Parallel()
		f, _ := confinedFixture(t, `  task "t" {`+"\n    print {\n      msg = \"${file(\"templates/motd.txt\")} ${fileexists(\"templates/motd.txt\")}\"\n    }\n  }")
		res, rec := f.run(engine.ModeApply)
		require.False(t, res.Failed(), "%v", res.Diagnostics)
		assert.Equal(t, "welcome true", rec.result(t, "localhost", "t").Message)
	})
	t.Run("unconfined reads anywhere", func(t *testing.T) {
		t.Parallel()
		f, _ := confinedFixture(t, `  task "t" {`+"\n    print {\n      msg = file(var.token)\n    }\n  }")
		f.confine = nil
		res, rec := f.run(engine.ModeApply)
		require.False(t, res.Failed(), "%v", res.Diagnostics)
		assert.Equal(t, podToken, rec.result(t, "localhost", "t").Message)
	})
}

// TestConfinedIncludes: a confined playbook includes files inside its
// roots and stock playbooks, and is refused, at the source, one outside.
func TestConfinedIncludes(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "x.hcl"), []byte("# outside\n"), 0o600))
	dir := t.TempDir()
	src := "include \"x\" {\n  source = \"" + filepath.Join(outside, "x.hcl") + "\"\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "play.hcl"), []byte(src), 0o600))
	loader := playbook.NewLoader(all.Schemas(), nil)
	loader.Confine = []string{dir}
	_, diags := loader.Load(filepath.Join(dir, "play.hcl"))
	require.True(t, diags.HasErrors())
	assert.Equal(t, "Playbook outside the directories this run may read", diags[0].Summary)
	require.NotNil(t, diags[0].Subject)
	assert.Equal(t, 2, diags[0].Subject.Start.Line)
	assert.Equal(t, 12, diags[0].Subject.Start.Column)

	// The playbook itself outside: refused before it is read.
	loader = playbook.NewLoader(all.Schemas(), nil)
	loader.Confine = []string{dir}
	_, diags = loader.Load(filepath.Join(outside, "x.hcl"))
	require.True(t, diags.HasErrors())
	assert.Equal(t, "Playbook outside the directories this run may read", diags[0].Summary)

	// Unconfined, the same include loads.
	loader = playbook.NewLoader(all.Schemas(), nil)
	_, diags = loader.Load(filepath.Join(dir, "play.hcl"))
	assert.False(t, diags.HasErrors(), "%s", diags)
}

// TestSecretVarsAreSensitive: a -var the caller names a secret
// (engine.Inputs.SecretVars, the controller's varsFrom Secret values) is
// sensitive though its variable is not declared so: no message, failure
// or diagnostic shows it. The same value given as a plain -var shows.
func TestSecretVarsAreSensitive(t *testing.T) {
	t.Parallel()
	const value = "from-a-secret-7f3a9c"
	run := func(secret bool) (*engine.Result, *recorder) {
		f := newFixture(t, map[string]string{"play.hcl": rootVar + `
variable "motd" {
  type = string
}

play "p" {
  hosts = "all"

  task "show" {
    print {
      msg = "motd: ${var.motd}"
    }
  }
  task "check" {
    assert {
      that         = [var.motd == "x"]
      fail_message = "not x: ${var.motd}"
    }
  }
}
`})
		f.vars = append(f.vars, "motd="+value)
		if secret {
			f.secretVars = []string{"motd"}
		}
		return f.run(engine.ModeApply)
	}

	res, rec := run(true)
	require.True(t, res.Failed())
	all, err := json.Marshal(rec.events)
	require.NoError(t, err)
	assert.NotContains(t, string(all), value, "no event shows the secret")
	diags, err := json.Marshal(res.Diagnostics)
	require.NoError(t, err)
	assert.NotContains(t, string(diags), value)
	assert.Contains(t, string(all), "(sensitive)")

	_, rec = run(false)
	assert.Equal(t, "motd: "+value, rec.result(t, "localhost", "show").Message, "the control: a plain -var shows")
}
