package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/limits"
)

// limitsPlaybook takes typed variables from outside and writes a file:
// refusing an input must leave the file unwritten.
const limitsPlaybook = `variable "root" {
  type = string
}
variable "items" {
  type    = map(any)
  default = {}
}
variable "nums" {
  type    = list(number)
  default = []
}
play "p" {
  hosts = "all"
  task "touch" {
    file {
      path    = "${var.root}/touched"
      content = "${length(var.items)} ${length(var.nums)}"
    }
  }
}
`

func deepList(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }

// deepAny is the review's slow map(any) value: many keys, each a deep
// object, which cty unifies in time quadratic in the depth.
func deepAny() string {
	var b strings.Builder
	b.WriteString("{")
	for i := range 300 {
		fmt.Fprintf(&b, "k%d = %s%d%s\n", i, strings.Repeat("{a=", 90), i, strings.Repeat("}", 90))
	}
	b.WriteString("}")
	return b.String()
}

// TestDeepOrHugeInputIsRefusedBeforeAnythingRuns feeds each entry point
// input beyond the limits — what used to overflow the stack (a fatal
// error) or take tens of seconds — and checks wsu refuses it with a
// located error, quickly, for plan, apply and validate, and touches
// nothing.
func TestDeepOrHugeInputIsRefusedBeforeAnythingRuns(t *testing.T) {
	deep := deepList(30000) // ~60 KB; the review's were ~200 KB
	// The deep value sits on the line after "locals {" below the playbook.
	pbLine := fmt.Sprint(strings.Count(limitsPlaybook, "\n") + 2)
	tests := []struct {
		name    string
		files   map[string]string // written under the playbook directory
		args    []string
		env     []string
		summary string
		where   string // file name and line of the located error
	}{
		{name: "playbook", files: map[string]string{"site.hcl": limitsPlaybook + "locals {\n  x = " + deep + "\n}\n"},
			summary: "Input nested too deeply", where: "on site.hcl line " + pbLine},
		{name: "included playbook", files: map[string]string{
			"site.hcl": limitsPlaybook + "include \"inc\" {\n  source = \"./inc.hcl\"\n}\n",
			"inc.hcl":  "locals {\n  x = " + deep + "\n}\n"},
			summary: "Input nested too deeply", where: "on inc.hcl line 2"},
		{name: "var file", files: map[string]string{"site.hcl": limitsPlaybook, "vars.hcl": "nums = " + deep + "\n"},
			args: []string{"-var-file", "vars.hcl"}, summary: "Input nested too deeply", where: "on vars.hcl line 1"},
		{name: "typed -var", files: map[string]string{"site.hcl": limitsPlaybook},
			args: []string{"-var", "nums=" + deep}, summary: "Input nested too deeply", where: "on <value for var.nums> line 1"},
		{name: "WSU_VAR_", files: map[string]string{"site.hcl": limitsPlaybook},
			env: []string{"WSU_VAR_nums=" + deep}, summary: "Input nested too deeply", where: "on <value for var.nums> line 1"},
		{name: "map(any) -var", files: map[string]string{"site.hcl": limitsPlaybook},
			args: []string{"-var", "items=" + deepAny()}, summary: "Value beyond limits", where: `"items" from -var`},
		{name: "map(any) var file", files: map[string]string{"site.hcl": limitsPlaybook, "vars.hcl": "items = " + deepAny() + "\n"},
			args: []string{"-var-file", "vars.hcl"}, summary: "Value beyond limits", where: "on vars.hcl line 1"},
		{name: "HCL inventory", files: map[string]string{"site.hcl": limitsPlaybook,
			"inv.hcl": "group \"all\" {\n  vars = { x = " + deep + " }\n}\n"},
			args: []string{"-i", "inv.hcl"}, summary: "Input nested too deeply", where: "on inv.hcl line 2"},
		{name: "YAML inventory", files: map[string]string{"site.hcl": limitsPlaybook,
			"inv.yml": "all:\n  vars:\n    x: " + deep + "\n"},
			args: []string{"-i", "inv.yml"}, summary: "Input nested too deeply", where: "on inv.yml line 3"},
		{name: "INI inventory value", files: map[string]string{"site.hcl": limitsPlaybook,
			"inv.ini": "[all]\nlocalhost ansible_connection=local\n[all:vars]\nnums=" + deep + "\n"},
			args: []string{"-i", "inv.ini"}, summary: "Input nested too deeply", where: "on inv.ini line 4"},
		{name: "huge playbook", files: map[string]string{"site.hcl": limitsPlaybook + "# " + strings.Repeat("x", limits.MaxFileSize) + "\n"},
			summary: "larger than", where: "site.hcl"},
		{name: "long expression", files: map[string]string{"site.hcl": limitsPlaybook + "locals {\n  x = 1" + strings.Repeat("+1", 50000) + "\n}\n"},
			summary: "Expression too long", where: "on site.hcl line " + pbLine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
			}
			root := t.TempDir()
			t.Chdir(dir)
			for _, cmd := range []string{"validate", "plan", "apply"} {
				args := []string{cmd, "site.hcl"}
				if cmd != "validate" {
					if !strings.Contains(strings.Join(tt.args, " "), "-i ") {
						args = append(args, "--local")
					}
					args = append(args, "-var", "root="+root)
				}
				if cmd == "apply" {
					args = append(args, "--auto-approve")
				}
				if cmd == "validate" && len(tt.args)+len(tt.env) > 0 {
					continue // validate takes no inventory or variables
				}
				start := time.Now()
				code, out, errs := wsu(t, tt.env, append(args, tt.args...)...)
				took := time.Since(start)
				all := errs + out
				assert.NotEqual(t, 0, code, "%s: refused", cmd)
				assert.True(t, strings.Contains(all, tt.summary), "%s: %q in %s", cmd, tt.summary, short(all))
				assert.True(t, strings.Contains(all, tt.where), "%s: located at %q in %s", cmd, tt.where, short(all))
				assert.NoFileExists(t, filepath.Join(root, "touched"), "%s touched nothing", cmd)
				t.Logf("%s refused in %s", cmd, took.Round(time.Millisecond))
			}
		})
	}
}

// short keeps the head of each line of output: the errors quote the
// offending line, tens of kilobytes here.
func short(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if len(l) > 120 {
			lines[i] = l[:120] + "..."
		}
	}
	return strings.Join(lines, "\n")
}
