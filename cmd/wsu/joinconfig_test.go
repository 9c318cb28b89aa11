package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// joinToken is the bootstrap token of the join configuration fixtures: in
// any output it leaked.
const (
	joinTokenSecret = "q8w2e7r4t1y9u3i6"
	joinToken       = "k7q2zd." + joinTokenSecret
	joinPin         = "sha256:6e3b1a5c1d8f0b2a9c7e4d3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b"
)

// joinBook declares join's node-only variables (bootstrap_token NOT
// declared sensitive: --join-config makes it so), prints the others and
// writes the token to var.out, which shows it reached the playbook.
const joinBook = `
variable "cluster_flavour" {
  type    = string
  default = "vanilla"
}
variable "api_server_endpoint" {
  type    = string
  default = ""
}
variable "bootstrap_token" {
  type    = string
  default = ""
}
variable "ca_cert_hashes" {
  type    = list(string)
  default = []
}
variable "unsafe_skip_ca_verification" {
  type    = bool
  default = false
}
variable "node_name" {
  type    = string
  default = "from-default"
}
variable "node_ip" {
  type    = string
  default = ""
}
variable "node_labels" {
  type    = list(string)
  default = []
}
variable "extra_kubelet_args" {
  type    = list(string)
  default = []
}
variable "node_taints" {
  type    = list(object({ key = string, value = string, effect = string }))
  default = []
}
variable "out" {
  type = string
}
play "join" {
  hosts = "all"
  task "say" {
    print {
      msg = "flavour=${var.cluster_flavour} name=${var.node_name} endpoint=${var.api_server_endpoint} pins=${join(",", var.ca_cert_hashes)} labels=${join(",", var.node_labels)} args=${join(" ", var.extra_kubelet_args)} taint=${var.node_taints[0].key}=${var.node_taints[0].value}:${var.node_taints[0].effect}"
    }
  }
  task "token" {
    file {
      path    = var.out
      content = var.bootstrap_token
    }
  }
}
`

// joinYAML is a CABPK-style Windows JoinConfiguration.
const joinYAML = `---
apiVersion: kubeadm.k8s.io/v1beta4
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.1.0.4:6443
    caCertHashes:
    - ` + joinPin + `
    token: ` + joinToken + `
kind: JoinConfiguration
nodeRegistration:
  criSocket: npipe:////./pipe/containerd-containerd
  kubeletExtraArgs:
  - name: cloud-provider
    value: external
  - name: node-labels
    value: pool=win,zone=a
  name: capz-win-x7k2p
  taints:
  - effect: NoSchedule
    key: os
    value: windows
`

func joinDir(t *testing.T) (dir, out string) {
	t.Helper()
	dir = t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, "book.hcl", joinBook)
	writeFile(t, dir, "join.yaml", joinYAML)
	return dir, filepath.Join(dir, "token.out")
}

// noToken asserts the token's secret appears in no output.
func noToken(t *testing.T, what ...string) {
	t.Helper()
	for _, s := range what {
		assert.NotContains(t, s, joinTokenSecret)
	}
}

// TestJoinConfigVariables: validate and plan see the file's values as
// join's variables; -var wins over them; the token reaches the playbook
// and no output.
func TestJoinConfigVariables(t *testing.T) {
	dir, out := joinDir(t)
	code, stdout, errs := wsu(t, nil, "validate", "book.hcl", "--join-config", "join.yaml")
	require.Equal(t, 0, code, stdout+errs)
	assert.Contains(t, stdout, "Success!")

	for _, format := range []string{"human", "json"} {
		code, stdout, errs = wsu(t, nil, "plan", "book.hcl", "--local", "--no-color", "-o", format, "--join-config", "join.yaml", "-var", "out="+out)
		require.Equal(t, 0, code, stdout+errs)
		noToken(t, stdout, errs)
	}
	code, stdout, errs = wsu(t, nil, "apply", "book.hcl", "--local", "--no-color", "--auto-approve", "--join-config", "join.yaml", "-var", "out="+out)
	require.Equal(t, 0, code, stdout+errs)
	noToken(t, stdout, errs)
	assert.Contains(t, stdout, "flavour=kubeadm name=capz-win-x7k2p endpoint=10.1.0.4:6443 pins="+joinPin+
		" labels=pool=win,zone=a args=--cloud-provider=external taint=os=windows:NoSchedule")
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, joinToken, string(got), "the token reached the playbook")

	// -var (and -e) win over the file.
	code, stdout, errs = wsu(t, nil, "apply", "--auto-approve", "book.hcl", "--local", "--no-color", "--join-config", "join.yaml", "-var", "out="+out, "-var", "node_name=override-01", "-e", "cluster_flavour=openshift")
	require.Equal(t, 0, code, stdout+errs)
	assert.Contains(t, stdout, "flavour=openshift name=override-01 endpoint=10.1.0.4:6443")
	// The file wins over a var file.
	writeFile(t, dir, "site.hcl", "node_name = \"from-var-file\"\nout = \""+out+"\"\n")
	code, stdout, errs = wsu(t, nil, "apply", "--auto-approve", "book.hcl", "--local", "--no-color", "--join-config", "join.yaml", "-var-file", "site.hcl")
	require.Equal(t, 0, code, stdout+errs)
	assert.Contains(t, stdout, "name=capz-win-x7k2p")
}

// TestJoinConfigSavedPlan: a saved plan records the file's path, not its
// token; apply reads the file again, and refuses if it changed or if
// --join-config is given again.
func TestJoinConfigSavedPlan(t *testing.T) {
	dir, out := joinDir(t)
	code, stdout, errs := wsu(t, nil, "plan", "book.hcl", "--local", "--join-config", "join.yaml", "-var", "out="+out, "-out", "saved.plan")
	require.Equal(t, 0, code, stdout+errs)
	noToken(t, stdout, errs)
	saved, err := os.ReadFile("saved.plan")
	require.NoError(t, err)
	noToken(t, string(saved))
	assert.Contains(t, string(saved), `"join_config": "join.yaml"`)
	assert.Contains(t, string(saved), `"join.yaml": "`, "the file's hash is a source")
	for _, format := range []string{"human", "json", "yaml"} {
		code, stdout, errs = wsu(t, nil, "show", "saved.plan", "-o", format)
		require.Equal(t, 0, code, stdout+errs)
		noToken(t, stdout, errs)
	}
	assert.Contains(t, stdout, "join.yaml")
	_, stdout, _ = wsu(t, nil, "show", "saved.plan")
	assert.Contains(t, stdout, "  join file:  join.yaml\n")

	code, _, errs = wsu(t, nil, "apply", "saved.plan", "--join-config", "join.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "drop --join-config")

	code, stdout, errs = wsu(t, nil, "apply", "saved.plan")
	require.Equal(t, 0, code, stdout+errs)
	noToken(t, stdout, errs)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, joinToken, string(got))

	// A changed file (a new token) makes the plan stale.
	require.NoError(t, os.Remove(out))
	code, stdout, errs = wsu(t, nil, "plan", "book.hcl", "--local", "--join-config", "join.yaml", "-var", "out="+out, "-out", "saved.plan")
	require.Equal(t, 0, code, stdout+errs)
	writeFile(t, dir, "join.yaml", strings.Replace(joinYAML, joinTokenSecret, "zzzzzzzzzzzzzzzz", 1))
	code, stdout, errs = wsu(t, nil, "apply", "saved.plan")
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout+errs, "file join.yaml changed")
	assert.NoFileExists(t, out)
}

// TestJoinConfigErrorsBeforeAnyHost: a bad file is refused at its line and
// column before the first task, without quoting the token.
func TestJoinConfigErrorsBeforeAnyHost(t *testing.T) {
	dir, out := joinDir(t)
	for name, tc := range map[string]struct {
		yaml string
		want []string
	}{
		"unknown field": {strings.Replace(joinYAML, "  name: capz", "  nmae: capz", 1),
			[]string{"Unknown field", "on join.yaml line 17", `Did you mean "name"?`}},
		"bad token": {strings.Replace(joinYAML, joinToken, "Hunter2."+joinTokenSecret, 1),
			[]string{"Invalid bootstrap token", "on join.yaml line 8"}},
		"file discovery": {strings.Replace(joinYAML, "  bootstrapToken:", "  file:\n    kubeConfigPath: /x\n  bootstrapToken:", 1),
			[]string{"File discovery not supported", "on join.yaml line 5"}},
		"bad criSocket": {strings.Replace(joinYAML, "npipe:////./pipe/containerd-containerd", "unix:///run/containerd/containerd.sock", 1),
			[]string{"Unsupported CRI socket", "on join.yaml line 11"}},
		"YAML syntax on the token's line": {strings.Replace(joinYAML, "token: "+joinToken, "token: "+joinToken+"\n  : [", 1),
			[]string{"Invalid YAML", "on join.yaml line"}},
	} {
		t.Run(name, func(t *testing.T) {
			writeFile(t, dir, "join.yaml", tc.yaml)
			for _, cmd := range [][]string{
				{"validate", "book.hcl", "--no-color", "--join-config", "join.yaml"},
				{"apply", "--auto-approve", "book.hcl", "--local", "--no-color", "--join-config", "join.yaml", "-var", "out=" + out},
				{"plan", "book.hcl", "--local", "--no-color", "-o", "json", "--join-config", "join.yaml", "-var", "out=" + out},
			} {
				code, stdout, errs := wsu(t, nil, cmd...)
				assert.Equal(t, 1, code, "%v", cmd)
				if !slices.Contains(cmd, "json") { // JSON diagnostics carry the range as fields
					for _, w := range tc.want {
						assert.Contains(t, flat(stdout+errs), w, "%v", cmd)
					}
				}
				assert.NotContains(t, stdout, "flavour=", "no task ran")
				noToken(t, stdout, errs)
			}
			assert.NoFileExists(t, out)
		})
	}
	// A playbook that takes none of join's variables.
	writeFile(t, dir, "join.yaml", joinYAML)
	writeFile(t, dir, "other.hcl", "play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    print { msg = \"hi\" }\n  }\n}\n")
	code, stdout, errs := wsu(t, nil, "plan", "other.hcl", "--local", "--no-color", "--join-config", "join.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, flat(stdout+errs), "--join-config join.yaml sets cluster_flavour, api_server_endpoint, bootstrap_token, ca_cert_hashes, unsafe_skip_ca_verification, node_name, node_labels, extra_kubelet_args, node_taints, which no playbook in this run declares")
	noToken(t, stdout, errs)
	// A file that is not there.
	code, stdout, errs = wsu(t, nil, "plan", "book.hcl", "--local", "--join-config", "missing.yaml", "-var", "out="+out)
	assert.Equal(t, 1, code)
	assert.Contains(t, stdout+errs, "Cannot read the join configuration")
}
