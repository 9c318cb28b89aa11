package main

import (
	"fmt"
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
}

// TestPlanTextIsDeterministic: three plans of the same playbook on several
// hosts (which run at once) print the same text, results task by task in
// inventory order; a saved plan's file is the same each time too.
func TestPlanTextIsDeterministic(t *testing.T) {
	pb, root := demoArgs(t)
	dir := t.TempDir()
	inv := filepath.Join(dir, "hosts.ini")
	require.NoError(t, os.WriteFile(inv, []byte("[windows]\nwin05\nwin01\nwin04\nwin02\nwin03\n"), 0o644))
	var texts, files []string
	for i := range 3 {
		out := filepath.Join(dir, fmt.Sprintf("plan%d.json", i))
		code, text, errs := wsu(t, nil, "plan", pb, "-i", inv, "--local", "-var", "root="+root, "-out", out)
		require.Equal(t, 0, code, text+errs)
		texts = append(texts, strings.ReplaceAll(text, out, "PLANFILE"))
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		files = append(files, string(data))
	}
	assert.Equal(t, texts[0], texts[1])
	assert.Equal(t, texts[0], texts[2])
	assert.Equal(t, files[0], files[1])
	assert.Equal(t, files[0], files[2])
	// Within the first task, hosts in inventory order (each host's
	// for_each instances together).
	var hosts []string
	first := ""
	for _, m := range regexp.MustCompile(`\[(win0\d)\] task "([^"]+)"`).FindAllStringSubmatch(texts[0], -1) {
		if first == "" {
			first = m[2]
		}
		if m[2] == first && (len(hosts) == 0 || hosts[len(hosts)-1] != m[1]) {
			hosts = append(hosts, m[1])
		}
	}
	assert.Equal(t, []string{"win05", "win01", "win04", "win02", "win03"}, hosts, texts[0])
}
