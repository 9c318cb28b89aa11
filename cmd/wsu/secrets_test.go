package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine/planfile"
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

// TestDiagnosticsHideSecretsInEveryCommand runs every command that can
// print a diagnostic (validate, --syntax-check, plan, apply, show, fmt)
// over the same inputs: a sensitive value in an HCL or JSON var file, or
// a password in an INI or YAML inventory, each on a line a diagnostic
// points at. No command quotes the line or the value.
func TestDiagnosticsHideSecretsInEveryCommand(t *testing.T) {
	book := `
variable "api_token" {
  type      = string
  sensitive = true
  default   = "short"
  validation {
    condition     = length(var.api_token) < 10
    error_message = "The token is too long."
  }
}
variable "seed" {
  type      = string
  sensitive = true
  default   = "s"
  validation {
    condition     = length(var.seed) < 10
    error_message = "The seed is too long."
  }
}
play "p" {
  hosts = "all"
  task "t" {
    print { msg = "hello" }
  }
}
`
	cases := []struct {
		name  string
		file  string // the input holding the sentinel
		text  string
		input []string // the flags reading it
	}{
		{"hcl-varfile", "sec.wsuvars", "api_token = \"" + sentinel + "\"\n", []string{"--var-file", "sec.wsuvars"}},
		{"hcl-varfile-declared", "sec.wsuvars", "seed = \"" + sentinel + "\"\n", []string{"--var-file", "sec.wsuvars"}},
		{"hcl-varfile-syntax", "sec.wsuvars", "api_token = \"" + sentinel + "\n", []string{"--var-file", "sec.wsuvars"}},
		{"json-varfile", "sec.json", `{"api_token": "` + sentinel + `"}` + "\n", []string{"--var-file", "sec.json"}},
		{"json-varfile-declared", "sec.json", "{\n  \"seed\": \"" + sentinel + "\"\n}\n", []string{"--var-file", "sec.json"}},
		{"ini-inventory", "inv.ini", "[windows]\nlocalhost ansible_connection=local ansible_password= " + sentinel + "\n", []string{"-i", "inv.ini"}},
		{"yaml-inventory", "inv.yml", "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n      ansible_password: [" + sentinel + "\n", []string{"-i", "inv.yml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "book.hcl"), []byte(book), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, c.file), []byte(c.text), 0o644))
			t.Chdir(dir)
			run := c.input
			if c.input[0] != "-i" {
				run = append([]string{"--local"}, run...)
			}
			// ok.hcl takes the same inputs without the length rules, so
			// a plan of a well-formed input is saved, shown and applied.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "ok.hcl"), []byte(strings.ReplaceAll(book, "< 10", "< 100")), 0o644))
			commands := [][]string{
				append([]string{"validate", "book.hcl"}, c.input...),
				append([]string{"plan", "book.hcl", "--syntax-check"}, run...),
				append([]string{"plan", "book.hcl", "-out", "p.plan"}, run...),
				append([]string{"plan", "book.hcl", "-o", "json"}, run...),
				append([]string{"apply", "book.hcl", "--auto-approve"}, run...),
				append([]string{"plan", "ok.hcl", "-out", "ok.plan"}, run...),
				{"show", "ok.plan"},
				{"show", "-o", "json", "ok.plan"},
				{"apply", "ok.plan"},
				{"fmt", "--check", c.file},
			}
			errors, shown := 0, false
			for _, args := range commands {
				code, out, errs := wsu(t, nil, args...)
				assert.NotContains(t, out+errs, sentinel, "%v", args)
				if strings.Contains(out+errs, "not shown: it holds a sensitive value") {
					errors++
				}
				t.Logf("%v: exit %d", args, code)
				if args[0] == "show" && code == 0 {
					shown = true
				}
			}
			if strings.Contains(c.name, "varfile") && !strings.Contains(c.name, "syntax") {
				assert.True(t, shown, "a well-formed input's plan was saved and shown")
			}
			// The error paths were taken: validate, --syntax-check,
			// plan and apply each met the line and hid it.
			assert.GreaterOrEqual(t, errors, 4)
			noLeakInFiles(t, dir, map[string]bool{c.file: true})
		})
	}
}

// TestSavedPlanHashesAreSalted: a saved plan's hashes of a short
// sensitive value cannot be matched by hashing guesses (the plain SHA-256
// a format-1 plan kept), the same value hashes differently in two plans,
// and apply still refuses a changed value and applies the same one.
func TestSavedPlanHashesAreSalted(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	target := filepath.Join(dir, "out.txt")
	require.NoError(t, os.WriteFile("book.hcl", []byte(pwVar+`
play "p" {
  hosts = "all"
  task "t" {
    file {
      path    = "`+target+`"
      content = "pin ${var.pw}"
    }
  }
}
`), 0o644))
	require.NoError(t, os.WriteFile("pin.wsuvars", []byte("pw = \"4711\"\n"), 0o600))
	hashes := func(plan string) map[string]bool {
		p, ok, err := planfile.Load(plan)
		require.NoError(t, err)
		require.True(t, ok)
		out := map[string]bool{}
		for _, h := range p.Sources {
			out[h] = true
		}
		for _, host := range p.Hosts {
			for _, h := range host.Vars {
				out[h] = true
			}
			for _, task := range host.Tasks {
				out[task.Fingerprint] = true
			}
		}
		return out
	}
	for _, name := range []string{"a.plan", "b.plan"} {
		code, out, errs := wsu(t, nil, "plan", "book.hcl", "--local", "--var-file", "pin.wsuvars", "-out", name)
		require.Equal(t, 0, code, out+errs)
	}
	a, b := hashes("a.plan"), hashes("b.plan")
	for h := range a {
		assert.False(t, b[h], "hash %s is the same in two plans of the same inputs", h)
	}
	// A dictionary attack: every 4-digit PIN, as a format-1 plan hashed
	// a variable's value and a var file.
	for n := 0; n <= 9999; n++ {
		pin := fmt.Sprintf("%04d", n)
		for _, text := range []string{fmt.Sprintf("%q", pin), "pw = \"" + pin + "\"\n"} {
			sum := sha256.Sum256([]byte(text + "\x00"))
			require.False(t, a[hex.EncodeToString(sum[:])], "the plan's hash of %q gives the PIN away", text)
		}
	}

	require.NoError(t, os.WriteFile("pin.wsuvars", []byte("pw = \"4712\"\n"), 0o600))
	code, out, errs := wsu(t, nil, "apply", "a.plan")
	assert.Equal(t, 1, code)
	assert.Contains(t, out+errs, "Saved plan is stale")
	assert.NoFileExists(t, target)
	require.NoError(t, os.WriteFile("pin.wsuvars", []byte("pw = \"4711\"\n"), 0o600))
	code, out, errs = wsu(t, nil, "apply", "a.plan")
	require.Equal(t, 0, code, out+errs)
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "pin 4711", string(got))
}
