package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of issue 14's "What admins read": content diffs, output order,
// wsu show, damaged saved plans, bounded excerpts and the README's
// promises.

// TestLocalHostIsInWindowsGroup: `wsu apply join --local` (README) finds
// its host, since the stock plays target the group windows.
func TestLocalHostIsInWindowsGroup(t *testing.T) {
	code, out, errs := wsu(t, nil, "plan", "join", "--local", "--list-hosts")
	require.Equal(t, 0, code, out+errs)
	assert.Regexp(t, `play "[^"]+" \(1 host\)\n    localhost\n`, out)
	assert.NotContains(t, out, "(0 hosts)")
}

// TestReadmePlaybookValidates: the sample playbook in the README is one
// wsu accepts, and its handler restarts the service with win_service.
func TestReadmePlaybookValidates(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)A playbook:\n\n```hcl\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "README has a sample playbook")
	sample := string(m[1])
	assert.Contains(t, sample, `state = "restarted"`)
	dir := t.TempDir()
	pb := filepath.Join(dir, "site.hcl")
	require.NoError(t, os.WriteFile(pb, m[1], 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubelet.conf.tftpl"), []byte("clusterDNS: ${cluster_dns}\n"), 0o644))
	code, out, errs := wsu(t, nil, "validate", pb)
	require.Equal(t, 0, code, out+errs)
	code, out, errs = wsu(t, nil, "fmt", "--check", pb)
	assert.Equal(t, 0, code, "the README sample is formatted: "+out+errs)
	_ = strings.TrimSpace
}
