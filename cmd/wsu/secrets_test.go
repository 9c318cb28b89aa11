package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sentinel is the secret every leak case hides: found in any output
// channel, it leaked.
const sentinel = "S3NT1N3L-zq9-hunter2"

// pwVar declares the sensitive variable the cases read.
const pwVar = `
variable "pw" {
  type      = string
  sensitive = true
}
`

// leakCase is one error path run with the sentinel secret.
type leakCase struct {
	name  string
	files map[string]string // written into the case's directory; book.hcl is the playbook
	args  []string          // after "plan book.hcl" (or cmd), in the case's directory
	cmd   string            // plan (default) or apply
	env   []string
	// want must appear in the output: the error path was taken.
	want string
}

func playTask(body string) string {
	return pwVar + `
play "p" {
  hosts = "all"
  task "t" {
` + body + `
  }
}
`
}

// leakCases are the review's error paths and more, each through the CLI.
func leakCases() []leakCase {
	local := []string{"--local", "-var", "pw=" + sentinel}
	printArg := func(expr string) string { return playTask(`    print { msg = ` + expr + ` }`) }
	var cases []leakCase
	// Function errors quote their argument: conversion, cidr, time, file
	// and template functions, also on a value derived from the secret.
	for name, expr := range map[string]string{
		"tonumber":     `tonumber(var.pw)`,
		"tobool":       `tobool(var.pw)`,
		"parseint":     `parseint(var.pw, 10)`,
		"cidrhost":     `cidrhost(var.pw, 1)`,
		"cidrsubnet":   `cidrsubnet("10.0.0.0/8", 8, tonumber(var.pw))`,
		"timeadd":      `timeadd(var.pw, "1h")`,
		"formatdate":   `formatdate("YYYY", var.pw)`,
		"file":         `file(var.pw)`,
		"file-derived": `file(lower(var.pw))`,
		"templatefile": `templatefile(var.pw, {})`,
		"base64":       `tonumber(base64encode(var.pw))`,
		"try":          `try(tonumber(var.pw))`,
	} {
		cases = append(cases, leakCase{name: "func-" + name, files: map[string]string{"book.hcl": printArg(expr)}, args: local, want: "hidden because an argument is sensitive"})
	}
	cases = append(cases,
		// A template that fails on a secret it was given.
		leakCase{name: "template-error", files: map[string]string{
			"book.hcl": printArg(`templatefile("t.tpl", { pw = var.pw })`),
			"t.tpl":    "${tonumber(pw)}",
		}, args: local, want: "hidden because an argument is sensitive"},
		// for_each over a sensitive collection: refused, no key shown.
		leakCase{name: "for_each-set", files: map[string]string{"book.hcl": playTask(`    for_each = toset([var.pw])
    print { msg = each.key }`)}, args: local, want: "cannot be used as for_each arguments"},
		leakCase{name: "for_each-key", files: map[string]string{"book.hcl": playTask(`    for_each = { for k in [var.pw] : k => 1 }
    print { msg = each.key }`)}, args: local, want: "cannot be used as for_each arguments"},
		// A command echoes a secret embedded in a longer argument on its
		// stderr, and fails (a real process, on this machine).
		leakCase{name: "command-stderr", cmd: "apply", files: map[string]string{"book.hcl": playTask(`    command { argv = ["sh", "-c", "echo login --token=${var.pw} --verbose >&2; exit 3"] }`)}, args: local, want: "login --token=(sensitive) --verbose"},
		leakCase{name: "command-env-stdin", cmd: "apply", files: map[string]string{"book.hcl": playTask(`    command {
      argv  = ["sh", "-c", "cat >&2; echo \"k=$K\" >&2; exit 4"]
      env   = { K = "x-${var.pw}-y" }
      stdin = "stdin says ${var.pw}"
    }`)}, args: local, want: "(sensitive)k=(sensitive)"},
		// A multi-line secret (a key) comes back with other line endings.
		leakCase{name: "multiline-crlf", cmd: "apply", files: map[string]string{
			"book.hcl": pwVar + `
variable "key" {
  type      = string
  sensitive = true
}
play "p" {
  hosts = "all"
  task "t" {
    command {
      argv = ["sh", "-c", "printf '%s' \"$KEY\" | sed 's/$/\r/' >&2; exit 1"]
      env  = { KEY = var.key }
    }
  }
}
`,
			"vars.hcl": "key = <<EOT\n-----BEGIN KEY-----\n" + sentinel + "\n-----END KEY-----\nEOT\n",
		}, args: []string{"--local", "-var", "pw=x", "-var-file", "vars.hcl"}, want: "exit"},
		// A validation rule's message and condition use the secret.
		leakCase{name: "validation-message", files: map[string]string{"book.hcl": `
variable "pw" {
  type      = string
  sensitive = true
  validation {
    condition     = length(var.pw) < 5
    error_message = "bad password ${var.pw}"
  }
}
play "p" {
  hosts = "all"
  task "t" {
    print { msg = "x" }
  }
}
`}, args: local, want: "the message is hidden"},
		leakCase{name: "validation-condition", files: map[string]string{"book.hcl": `
variable "pw" {
  type      = string
  sensitive = true
  validation {
    condition     = tonumber(var.pw) > 5
    error_message = "must be a number"
  }
}
play "p" {
  hosts = "all"
  task "t" {
    print { msg = "x" }
  }
}
`}, args: local, want: "hidden because an argument is sensitive"},
		// A -var that fails conversion, and -var options that are malformed.
		leakCase{name: "var-type", files: map[string]string{"book.hcl": `
variable "pw" {
  type      = list(string)
  sensitive = true
}
play "p" {
  hosts = "all"
  task "t" {
    print { msg = "x" }
  }
}
`}, args: []string{"--local", "-var", "pw=[\"" + sentinel + "\", {]"}, want: "Error"},
		leakCase{name: "var-no-equals", files: map[string]string{"book.hcl": printArg(`"x"`)}, args: []string{"--local", "-var", sentinel}, want: "has no '='"},
		leakCase{name: "var-bad-name", files: map[string]string{"book.hcl": printArg(`"x"`)}, args: []string{"--local", "-var", "p w=" + sentinel}, want: "not a valid variable name"},
		// An include's output fails on the secret.
		leakCase{name: "output", files: map[string]string{
			"book.hcl": pwVar + `
include "inner" {
  source = "inner.hcl"
  vars   = { pw = var.pw }
}
play "p" {
  hosts = "all"
  task "t" {
    print { msg = include.inner.n }
  }
}
`,
			"inner.hcl": pwVar + `
play "q" {
  hosts = "all"
  task "u" {
    print { msg = "x" }
  }
}
output "n" {
  value = tonumber(var.pw)
}
`,
		}, args: local, want: "hidden because an argument is sensitive"},
		// A handler fails on the secret.
		leakCase{name: "handler", files: map[string]string{"book.hcl": pwVar + `
play "p" {
  hosts = "all"
  task "t" {
    command { argv = ["true"] }
    notify = ["h"]
  }
  handler "h" {
    print { msg = cidrhost(var.pw, 1) }
  }
}
`}, args: local, want: "hidden because an argument is sensitive"},
		// Play vars and until.
		leakCase{name: "play-vars", files: map[string]string{"book.hcl": pwVar + `
play "p" {
  hosts = "all"
  vars = {
    n = tonumber("n${var.pw}")
  }
  task "t" {
    print { msg = "x" }
  }
}
`}, args: local, want: "hidden because an argument is sensitive"},
		// Inventory secrets, by name: in a task's failing expression, and
		// on a line the inventory parser cannot read (a snippet, and a
		// message quoting what it found).
		leakCase{name: "inventory-var", files: map[string]string{
			"book.hcl": playTask(`    print { msg = tonumber(host.vars.ansible_password) }`),
			"inv.ini":  "localhost connection=local ansible_password=" + sentinel + "\n",
		}, args: []string{"-i", "inv.ini", "-var", "pw=x"}, want: "hidden because an argument is sensitive"},
		leakCase{name: "inventory-syntax", files: map[string]string{
			"book.hcl": printArg(`"x"`),
			"inv.ini":  "[all:vars]\nansible_user=admin\n\n[windows]\nlocalhost connection=local ansible_password= " + sentinel + "\n",
		}, args: []string{"-i", "inv.ini"}, want: "not shown: it holds a sensitive value"},
		leakCase{name: "inventory-yaml-key", files: map[string]string{
			"book.hcl": printArg(`"x"`),
			"inv.yml":  "all:\n  vars:\n    ssh_private_key: |\n      -----BEGIN KEY-----\n      " + sentinel + "\n      -----END KEY-----\n  hosts:\n    localhost:\n      - " + sentinel + "x\n",
		}, args: []string{"-i", "inv.yml"}, want: "Error"},
		// Var files: a syntax error on a secret's line, a value of the
		// wrong type, an undeclared secret-named entry.
		leakCase{name: "varfile-syntax", files: map[string]string{
			"book.hcl": printArg(`"x"`),
			"vars.hcl": "pw = \"" + sentinel + "\n",
		}, args: []string{"--local", "-var-file", "vars.hcl"}, want: "not shown: it holds a sensitive value"},
		leakCase{name: "varfile-type", files: map[string]string{
			"book.hcl": pwVar + `
variable "n" {
  type = number
}
play "p" {
  hosts = "all"
  task "t" {
    print { msg = "x" }
  }
}
`,
			"vars.hcl": "pw = \"" + sentinel + "\"\nn = { a = \"" + sentinel + "\" }\n",
		}, args: []string{"--local", "-var-file", "vars.hcl"}, want: "Error"},
		leakCase{name: "varfile-undeclared", files: map[string]string{
			"book.hcl": printArg(`"x"`),
			"vars.hcl": "pw = \"a\"\nadmin_password = \"" + sentinel + "\"\n",
		}, args: []string{"--local", "-var-file", "vars.hcl"}, want: "not shown: it holds a sensitive value"},
		// The environment.
		leakCase{name: "env", files: map[string]string{"book.hcl": printArg(`tonumber("${var.pw}")`)}, args: []string{"--local"}, env: []string{"WSU_VAR_pw=" + sentinel}, want: "hidden because an argument is sensitive"},
	)
	return cases
}

// TestSecretsNeverPrinted runs every leak case through the CLI, human and
// JSON, plan with -out, and greps every output channel (stdout, stderr,
// the saved plan, any file wsu wrote) for the sentinel.
func TestSecretsNeverPrinted(t *testing.T) {
	for _, c := range leakCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			inputs := map[string]bool{}
			for name, text := range c.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
				inputs[name] = true
			}
			t.Chdir(dir)
			cmd := c.cmd
			if cmd == "" {
				cmd = "plan"
			}
			var all strings.Builder
			for _, format := range []string{"human", "json"} {
				args := append([]string{cmd, "book.hcl", "-o", format}, c.args...)
				if cmd == "plan" {
					args = append(args, "-out", format+".plan")
				}
				if cmd == "apply" {
					args = append(args, "--auto-approve")
				}
				_, out, errs := wsu(t, c.env, args...)
				all.WriteString(out + errs)
				assert.NotContains(t, out, sentinel, "%s stdout", format)
				assert.NotContains(t, errs, sentinel, "%s stderr", format)
			}
			assert.Contains(t, all.String(), c.want, "the error path was taken:\n%s", all.String())
			noLeakInFiles(t, dir, inputs)
		})
	}
}

// noLeakInFiles greps every file under dir but the case's inputs.
func noLeakInFiles(t *testing.T, dir string, inputs map[string]bool) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if inputs[rel] {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		assert.NotContains(t, string(data), sentinel, "file %s", rel)
		return nil
	}))
}

// TestSavedPlanKeepsNoSensitiveVar: a plan made with a sensitive -var does
// not store it; apply takes it again, and refuses without it, with
// another -var, or with a different value.
func TestSavedPlanKeepsNoSensitiveVar(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	book := pwVar + `
variable "path" {
  type = string
}
play "p" {
  hosts = "all"
  task "t" {
    file {
      path    = var.path
      content = "token ${var.pw}"
    }
  }
}
`
	require.NoError(t, os.WriteFile("book.hcl", []byte(book), 0o644))
	target := filepath.Join(dir, "out.txt")
	code, out, errs := wsu(t, nil, "plan", "book.hcl", "--local", "-var", "pw="+sentinel, "-var", "path="+target, "-out", "saved.plan")
	require.Equal(t, 0, code, out+errs)
	assert.NotContains(t, out+errs, sentinel)
	noLeakInFiles(t, dir, map[string]bool{"book.hcl": true})
	saved, err := os.ReadFile("saved.plan")
	require.NoError(t, err)
	assert.Contains(t, string(saved), `"sensitive_vars"`)
	assert.Contains(t, string(saved), "path="+target, "other -var options are kept")

	code, out, errs = wsu(t, nil, "apply", "saved.plan")
	assert.Equal(t, 1, code)
	assert.Contains(t, out+errs, "Sensitive variable not given")
	code, out, errs = wsu(t, nil, "apply", "saved.plan", "-var", "path=/elsewhere")
	assert.Equal(t, 1, code)
	assert.Contains(t, out+errs, "Input given with a saved plan")
	code, out, errs = wsu(t, nil, "apply", "saved.plan", "-var", "pw=another-value")
	assert.Equal(t, 1, code)
	assert.Contains(t, out+errs, "Saved plan is stale")
	assert.NoFileExists(t, target)

	code, out, errs = wsu(t, []string{"WSU_VAR_pw=" + sentinel}, "apply", "saved.plan")
	require.Equal(t, 0, code, out+errs)
	assert.NotContains(t, out+errs, sentinel)
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "token "+sentinel, string(got))
}
