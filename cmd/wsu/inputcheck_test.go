package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The acceptance tests of issue 14's "check every input before touching
// any host".

// twoStage is a playbook whose first play writes a file and whose include,
// run after it, declares a validated variable.
func twoStage(t *testing.T) (pb, marker string) {
	t.Helper()
	dir := t.TempDir()
	marker = filepath.Join(dir, "first-play-ran")
	writeFile(t, dir, "flavour.hcl", flavourPlaybook(`
  default = "vanilla"`))
	pb = writeFile(t, dir, "site.hcl", `
variable "marker" {
  type = string
}
variable "max_pods" {
  type    = number
  default = 250
}
`+firstPlay+`
include "flavour" {
  source = "./flavour.hcl"
}
`)
	return pb, marker
}

// flavourPlaybook declares cluster_flavour, validated, with extra in its
// block, and prints it.
func flavourPlaybook(extra string) string {
	return `
variable "cluster_flavour" {
  type = string` + extra + `
  validation {
    condition     = contains(["vanilla", "openshift"], var.cluster_flavour)
    error_message = "cluster_flavour must be vanilla or openshift."
  }
}
play "second" {
  hosts = "all"
  task "say" {
    print { msg = var.cluster_flavour }
  }
}
`
}

// firstPlay writes var.marker: it ran if the file exists.
const firstPlay = `play "first" {
  hosts = "all"
  task "touch" {
    file {
      path    = var.marker
      content = "x"
    }
  }
}`

func TestInputsCheckedBeforeAnyHost(t *testing.T) {
	pb, marker := twoStage(t)
	dir := filepath.Dir(pb)
	for name, extra := range map[string][]string{
		"-var for an include's variable": {"-var", "cluster_flavour=chocolate"},
		"var file":                       {"-var-file", writeFile(t, dir, "bad.hcl", "cluster_flavour = \"chocolate\"\n")},
		"JSON var file":                  {"-var-file", writeFile(t, dir, "bad.wsuvars.json", `{"cluster_flavour": "chocolate"}`)},
		"inventory value":                {"-i", writeFile(t, dir, "inv.ini", "localhost cluster_flavour=chocolate\n")},
	} {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"apply", "--auto-approve", pb, "--local", "-var", "marker=" + marker}, extra...)
			code, out, errs := wsu(t, nil, args...)
			assert.Equal(t, 1, code, out+errs)
			assert.Contains(t, flat(errs), "cluster_flavour must be vanilla or openshift.")
			assert.Empty(t, out, "no play started")
			assert.NoFileExists(t, marker, "the first play changed nothing")
		})
	}
	// A good JSON var file loads.
	good := writeFile(t, dir, "good.wsuvars.json", `{"cluster_flavour": "openshift", "max_pods": 110}`)
	code, out, errs := wsu(t, nil, "apply", "--auto-approve", pb, "--local", "-var", "marker="+marker, "-var-file", good)
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "openshift")
	assert.FileExists(t, marker)
}

// TestIncludeValueCheckedBeforeAnyHost: a value a parent passes into an
// include's validated variable (issue 31, item 7), from -var through the
// parent's own variable, is checked before the first play runs; one that
// depends on a host (a fact, an inventory value) waits for that host.
func TestIncludeValueCheckedBeforeAnyHost(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "first-play-ran")
	writeFile(t, dir, "flavour.hcl", flavourPlaybook(""))
	pb := writeFile(t, dir, "site.hcl", `
variable "marker" {
  type = string
}
variable "flavour" {
  type    = string
  default = "vanilla"
}
`+firstPlay+`
include "flavour" {
  source = "./flavour.hcl"
  vars = {
    cluster_flavour = lower(var.flavour)
  }
}
`)
	for name, extra := range map[string][]string{
		"-var into the parent": {"-var", "flavour=Chocolate"},
		"var file":             {"-var-file", writeFile(t, dir, "bad.hcl", "flavour = \"chocolate\"\n")},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errs := wsu(t, nil, append([]string{"apply", "--auto-approve", pb, "--local", "-var", "marker=" + marker}, extra...)...)
			assert.Equal(t, 1, code, out+errs)
			assert.Contains(t, flat(errs), "cluster_flavour must be vanilla or openshift.")
			assert.Contains(t, errs, "site.hcl", "located at the include's vars")
			assert.Empty(t, out, "no play started")
			assert.NoFileExists(t, marker, "the first play changed nothing")
		})
	}
	t.Run("an inventory value is the host's, checked when it runs", func(t *testing.T) {
		inv := writeFile(t, dir, "inv.ini", "localhost flavour=OPENSHIFT\n")
		code, out, errs := wsu(t, nil, "apply", "--auto-approve", pb, "--local", "-i", inv, "-var", "marker="+marker)
		require.Equal(t, 0, code, out+errs)
		assert.Contains(t, out, "openshift")
	})
}

func TestBadVarSyntaxMessages(t *testing.T) {
	pb, marker := twoStage(t)
	code, _, errs := wsu(t, nil, "plan", pb, "--local", "-var", "marker="+marker, "-var", "max_pods")
	assert.Equal(t, 1, code)
	assert.Contains(t, flat(errs), `Invalid -var option The option has no '='; write -var NAME=VALUE`)
	assert.NotContains(t, errs, "<-var")
	assert.NotContains(t, errs, "line 1")

	code, _, errs = wsu(t, nil, "plan", pb, "--local", "-var", "marker="+marker, "-var", "max_pods=abc")
	assert.Equal(t, 1, code)
	assert.Contains(t, flat(errs), `-var max_pods=abc: variable "max_pods" is a number, and "abc" is not a number.`)
	assert.NotContains(t, errs, "Variables not allowed")
	assert.NotContains(t, errs, "<value for")
}

func TestStaticInventoryErrorsBeforeAnyPlay(t *testing.T) {
	pb, marker := twoStage(t)
	dir := filepath.Dir(pb)
	for name, ini := range map[string]string{
		"port":       "localhost connection=local\nwin01 ansible_port=abc\n",
		"connection": "localhost connection=local\nwin01 connection=telnet\n",
	} {
		t.Run(name, func(t *testing.T) {
			inv := writeFile(t, dir, name+".ini", ini)
			code, out, errs := wsu(t, nil, "apply", "--auto-approve", pb, "-i", inv, "-var", "marker="+marker)
			assert.Equal(t, 1, code)
			assert.Contains(t, errs, "Invalid host settings")
			assert.Contains(t, errs, "win01")
			assert.Empty(t, out, "no play started")
			assert.NoFileExists(t, marker)
		})
	}
}

func TestValidateChecksRolloutAndInputs(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ play, want string }{
		"serial":              {`serial = "abc"`, "Invalid serial"},
		"max_fail_percentage": {`max_fail_percentage = "x"`, "Invalid max_fail_percentage"},
		"max over 100":        {`max_fail_percentage = 150`, "Invalid max_fail_percentage"},
	} {
		t.Run(name, func(t *testing.T) {
			pb := writeFile(t, dir, "p.hcl", "play \"p\" {\n  hosts = \"all\"\n  "+tc.play+"\n  task \"t\" {\n    print { msg = \"hi\" }\n  }\n}\n")
			code, out, errs := wsu(t, nil, "validate", pb)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, errs, tc.want)
		})
	}
	bad := writeFile(t, dir, "hosts.hcl", "play \"p\" {\n  hosts = 5\n  task \"t\" {\n    print { msg = \"hi\" }\n  }\n}\n")
	code, _, errs := wsu(t, nil, "validate", bad)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "Invalid hosts")

	// With a site's inputs: values, hosts and patterns are checked too.
	pb, marker := twoStage(t)
	code, out, errs := wsu(t, nil, "validate", pb, "-var", "marker="+marker, "-var", "cluster_flavour=openshift")
	assert.Equal(t, 0, code, errs)
	assert.Contains(t, out, "Success!")
	code, _, errs = wsu(t, nil, "validate", pb, "-var", "cluster_flavour=chocolate")
	assert.Equal(t, 1, code)
	assert.Contains(t, flat(errs), "cluster_flavour must be vanilla or openshift.")
	code, _, errs = wsu(t, nil, "validate", pb, "-var-file", writeFile(t, dir, "v.wsuvars.json", `{"max_pods": "many"}`))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "max_pods")
	inv := writeFile(t, dir, "inv.ini", "[linux]\nl1 ansible_port=abc\n")
	code, _, errs = wsu(t, nil, "validate", pb, "-i", inv)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "ansible_port")
	windows := writeFile(t, dir, "w.hcl", "play \"p\" {\n  hosts = \"windows\"\n  task \"t\" {\n    print { msg = \"hi\" }\n  }\n}\n")
	code, _, errs = wsu(t, nil, "validate", windows, "-i", writeFile(t, dir, "l.ini", "[linux]\nl1\n"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "Invalid hosts pattern")
	code, _, errs = wsu(t, nil, "validate", windows)
	assert.Equal(t, 0, code, "without -i a pattern is not matched: "+errs)
}
