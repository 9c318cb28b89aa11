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
