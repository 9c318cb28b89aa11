package playbooks_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/playbooks"
)

// TestStockPlaybooksWithinLimits holds the stock playbooks to the nesting
// and size limits a playbook on disk is checked against when it is loaded:
// the loader skips that check for the binary's own playbooks (a second
// lexing of every file), so this test is what keeps them inside.
func TestStockPlaybooksWithinLimits(t *testing.T) {
	names, err := fs.Glob(playbooks.FS, "*.hcl")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, name := range names {
		src, err := fs.ReadFile(playbooks.FS, name)
		require.NoError(t, err)
		diags := limits.CheckConfig(src, name, hcl.InitialPos)
		assert.False(t, diags.HasErrors(), "%s: %s", name, diags.Error())
	}
	// The check is not vacuous: a playbook nested past the limit fails it.
	deep := "locals {\n  x = " + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + "\n}\n"
	assert.True(t, limits.CheckConfig([]byte(deep), "deep.hcl", hcl.InitialPos).HasErrors())
}
