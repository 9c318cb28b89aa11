package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAnsibleInventoryPlainVarsAreNotConnection: an Ansible inventory
// whose hosts carry an application's port, user, host and password as
// plain variables connects as its ansible_* variables say (issue 31).
func TestAnsibleInventoryPlainVarsAreNotConnection(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "hosts")
	require.NoError(t, os.WriteFile(inv, []byte("[windows]\n"+
		"win01 ansible_host=127.0.0.1 ansible_port=1 ansible_user=Administrator ansible_password=pw "+
		"port=5432 user=appuser host=db.internal password=dbpw "+
		"connect_retry_window=0s wsu_remote_os=linux wsu_agent_binary=/bin/true\n"), 0o600))
	pb := filepath.Join(dir, "f.hcl")
	require.NoError(t, os.WriteFile(pb, []byte(`
play "p" {
  hosts = "all"
  task "f" {
    file {
      path    = "/tmp/never"
      content = "x"
    }
  }
}
`), 0o644))
	code, out, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", inv)
	assert.Equal(t, 1, code, "nothing listens on port 1")
	text := oneLine(out + errs)
	assert.Contains(t, text, "cannot connect to win01 (Administrator@127.0.0.1:1)")
	assert.NotContains(t, text, "appuser")
	assert.NotContains(t, text, "5432")
	assert.NotContains(t, text, "dbpw")
}

// oneLine is text with its wrapping undone.
func oneLine(text string) string {
	return strings.Join(strings.Fields(text), " ")
}

// TestKubernetesManifestAsInventory: a ConfigMap manifest given as an
// inventory file (kubectl get cm windows-instances -o yaml > cm.yaml) is
// one error saying what it is and the -i k8s:// reference that reads it,
// not an error per key (issue 31).
func TestKubernetesManifestAsInventory(t *testing.T) {
	dir := t.TempDir()
	cm := filepath.Join(dir, "cm.yaml")
	require.NoError(t, os.WriteFile(cm, []byte(`apiVersion: v1
data:
  10.0.0.11: username=Administrator
  10.0.0.12: username=Administrator
kind: ConfigMap
metadata:
  name: windows-instances
  namespace: openshift-windows-machine-config-operator
  resourceVersion: "12345"
`), 0o600))
	for _, cmd := range [][]string{{"plan", "wsu:join", "-i", cm}, {"validate", "wsu:join", "-i", cm}} {
		code, out, errs := wsu(t, nil, append(cmd, "--no-color")...)
		assert.Equal(t, 1, code, out+errs)
		assert.Equal(t, 1, strings.Count(errs, "Error:"), errs)
		assert.Contains(t, errs, "Error: A Kubernetes ConfigMap, not an inventory file")
		assert.Contains(t, errs, "on "+cm+" line 5:")
		assert.Contains(t, oneLine(errs), "give -i k8s://openshift-windows-machine-config-operator/windows-instances")
		assert.NotContains(t, errs, "must be a mapping")
	}

	dep := filepath.Join(dir, "dep.json")
	require.NoError(t, os.WriteFile(dep, []byte(`{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}`), 0o600))
	code, out, errs := wsu(t, nil, "validate", "wsu:join", "-i", dep, "--no-color")
	assert.Equal(t, 1, code, out+errs)
	assert.Equal(t, 1, strings.Count(errs, "Error:"), errs)
	assert.Contains(t, oneLine(errs), "is a Kubernetes Deployment (apps/v1), not an inventory")
}
