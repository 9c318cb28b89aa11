package doc

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/playbooks"
)

var update = flag.Bool("update", false, "rewrite golden files")

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run `go test ./playbooks/doc -update` to create it")
	assert.Equal(t, string(want), got, "golden file %s differs (go test ./playbooks/doc -update rewrites it)", path)
}

// TestGolden pins both renderings of a fixture that uses every construct
// the reference shows: header paragraphs and commands, every variable
// flag, play placement and vars, task controls, notes, handlers, includes
// with and without vars, outputs, and text that needs escaping.
func TestGolden(t *testing.T) {
	pbs, err := Load(os.DirFS("testdata/fixture"), all.Schemas())
	require.NoError(t, err)
	require.Len(t, pbs, 2)
	golden(t, "testdata/fixture.md", Markdown(pbs))
	golden(t, "testdata/main.txt", Text(pbs[0]))
	golden(t, "testdata/list.txt", List(pbs))
}

func TestStructure(t *testing.T) {
	pbs, err := Load(os.DirFS("testdata/fixture"), all.Schemas())
	require.NoError(t, err)
	main, step := pbs[0], pbs[1]

	assert.Equal(t, "Lay out an application, then hand over to step.", main.Summary())
	assert.Equal(t, "main: lay out an application, then hand over to step. The\nsecond sentence is not part of the summary.\n\n  wsu apply main -i inventory.ini\n\nA last paragraph.", main.Header)

	play := main.Items[0]
	assert.Equal(t, "Plays run in file order.", play.Comment)
	assert.Equal(t, "One directory per key.\n\nTwo paragraphs of comment.", play.Tasks[0].Comment)
	assert.Empty(t, play.Tasks[1].Comment, "a comment after code on a line is not a note")
	assert.Equal(t, "/etc/a|b`c`.conf", play.Tasks[1].Target)
	assert.Equal(t, []Pair{{"when", `var.labels["a"] == "b" || length(var.labels) > 100000000000000000000000…`}, {"notify", "restart"}}, play.Tasks[1].Controls)

	inc := main.Items[1]
	assert.Equal(t, "step", inc.Target)
	assert.Equal(t, []Pair{{"dir", "var.root"}}, inc.Passes)
	assert.Equal(t, []string{"greeting"}, inc.Unpassed)
	assert.Equal(t, []IncludedBy{{"main", "step"}, {"main", "batched"}}, step.IncludedBy)

	assert.True(t, main.Variables[0].Required)
	assert.Equal(t, []string{"root must be absolute."}, main.Variables[0].Checks)
	assert.Equal(t, `{ a = "b" }`, main.Variables[2].Default)
	assert.Equal(t, "any", main.Variables[3].Type)
}

// TestStockVariablesDescribed: the reference is only as good as the
// descriptions; every stock variable has one.
func TestStockVariablesDescribed(t *testing.T) {
	pbs, err := Load(playbooks.FS, all.Schemas())
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pbs), 10)
	for _, p := range pbs {
		assert.NotEmpty(t, p.Header, "%s has no header comment", p.Name)
		for _, v := range p.Variables {
			assert.NotEmpty(t, v.Description, "%s: variable %q has no description", p.Name, v.Name)
		}
	}
}

func TestLoadRejectsAnInvalidPlaybook(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.hcl"), []byte("play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    fiel { path = \"/x\" }\n  }\n}\n"), 0o644))
	_, err := Load(os.DirFS(dir), all.Schemas())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bad.hcl")
	assert.Contains(t, err.Error(), "Unknown module")
}
