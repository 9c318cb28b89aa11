package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/playbooks"
)

// TestStockPlaybooksValidate: every embedded playbook loads with every
// module, argument and reference resolved.
func TestStockPlaybooksValidate(t *testing.T) {
	entries, err := fs.ReadDir(playbooks.FS, ".")
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".hcl") {
			continue
		}
		n++
		name := strings.TrimSuffix(e.Name(), ".hcl")
		code, out, errs := wsu(t, nil, "validate", "--no-color", name)
		assert.Equal(t, 0, code, "%s:\n%s%s", name, out, errs)
	}
	assert.GreaterOrEqual(t, n, 10)
}

func TestPlaybooksExport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "stock")
	code, out, errs := wsu(t, nil, "playbooks", "export", dir)
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "Exported")
	// The exported copy validates from disk (templates resolve beside it).
	code, _, errs = wsu(t, nil, "validate", "--no-color", filepath.Join(dir, "join.hcl"))
	assert.Equal(t, 0, code, errs)
	_, err := os.Stat(filepath.Join(dir, "templates", "kubelet.conf.tftpl"))
	assert.NoError(t, err)
	// Export refuses to overwrite.
	code, _, errs = wsu(t, nil, "playbooks", "export", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "refuses to overwrite")
}

// TestPlaybookDocsCurrent fails when docs/playbooks.md no longer matches the
// embedded playbooks.
func TestPlaybookDocsCurrent(t *testing.T) {
	code, out, errs := wsu(t, nil, "playbooks", "doc", "--markdown")
	require.Equal(t, 0, code, errs)
	want, err := os.ReadFile("../../docs/playbooks.md")
	require.NoError(t, err)
	assert.Equal(t, string(want), out, "docs/playbooks.md is stale: run `make docs`")
}

func TestPlaybooksDoc(t *testing.T) {
	code, out, errs := wsu(t, nil, "playbooks", "doc", "join")
	require.Equal(t, 0, code, errs)
	assert.True(t, strings.HasPrefix(out, "join (source = \"wsu:join.hcl\")\n"), out)
	assert.Contains(t, out, "  payload_dir                string, required\n")
	assert.Contains(t, out, "include runtime\n     runs ./check-runtime.hcl\n     passes cluster_flavour = var.cluster_flavour\n")
	assert.Contains(t, out, `task "approve csrs": k8s_csr_approve`)

	// The same name forms as `wsu apply` and include sources accept.
	for _, name := range []string{"join.hcl", "wsu:join.hcl"} {
		code, same, _ := wsu(t, nil, "playbooks", "doc", name)
		assert.Equal(t, 0, code)
		assert.Equal(t, out, same, name)
	}

	code, out, _ = wsu(t, nil, "playbooks", "doc", "join", "--markdown")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "## join\n"), out)
	assert.Contains(t, out, "| `payload_dir` | `string` | required |")

	// Without a name: every playbook, each once.
	code, out, _ = wsu(t, nil, "playbooks", "doc")
	assert.Equal(t, 0, code)
	_, list, _ := wsu(t, nil, "playbooks", "list")
	for _, name := range strings.Fields(list) {
		assert.Equal(t, 1, strings.Count(out, name+" (source = \"wsu:"+name+".hcl\")\n"), name)
	}

	code, _, errs = wsu(t, nil, "playbooks", "doc", "jion")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `no stock playbook named "jion"; did you mean "join"?`)
}
