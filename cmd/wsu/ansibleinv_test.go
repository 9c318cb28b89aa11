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
