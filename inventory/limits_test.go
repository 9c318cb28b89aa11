package inventory

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/limits"
)

// adversarial are inputs beyond the limits, by format: deep nesting that
// overflowed the parser's stack or took minutes, and sizes past the
// bound. They seed the fuzz targets and are refused here.
func adversarial(ext string) map[string]string {
	deep := strings.Repeat("[", 30000) + strings.Repeat("]", 30000)
	deepObj := strings.Repeat("{a: ", 30000) + "1" + strings.Repeat("}", 30000)
	huge := strings.Repeat("#"+strings.Repeat("x", 1023)+"\n", limits.MaxFileSize/1024+1)
	switch ext {
	case ".hcl":
		return map[string]string{
			"deep list":   "group \"all\" {\n  vars = { x = " + deep + " }\n}\n",
			"deep object": "group \"all\" {\n  vars = { x = " + strings.ReplaceAll(deepObj, ": ", " = ") + " }\n}\n",
			"deep string": "group \"all\" {\n  vars = { x = " + strings.Repeat(`"${`, 20000) + " }\n}\n",
			"huge":        huge,
		}
	case ".yml":
		return map[string]string{
			"deep flow":   "all:\n  vars:\n    x: " + deep + "\n",
			"deep map":    "all:\n  vars:\n    x: " + deepObj + "\n",
			"deep blocks": deepBlocks(200),
			"deep dashes": "all:\n  vars:\n    x:\n" + "      " + strings.Repeat("- ", 500) + "1\n",
			"huge":        huge,
		}
	}
	return map[string]string{"huge": strings.Repeat("; "+strings.Repeat("x", 1021)+"\n", limits.MaxFileSize/1024+1)}
}

// deepBlocks nests YAML mappings by indentation.
func deepBlocks(n int) string {
	var b strings.Builder
	b.WriteString("all:\n  vars:\n")
	for i := range n {
		b.WriteString(strings.Repeat("  ", i+2) + "k:\n")
	}
	b.WriteString(strings.Repeat("  ", n+2) + "v\n")
	return b.String()
}

func addAdversarial(f *testing.F, ext string) {
	for _, src := range adversarial(ext) {
		f.Add([]byte(src))
	}
}

func TestAdversarialInventoriesAreRefused(t *testing.T) {
	parsers := map[string]func(string, []byte) (*Inventory, error){
		".hcl": func(n string, b []byte) (*Inventory, error) { inv, d := ParseHCL(n, b); return inv, diagsErr(d) },
		".yml": func(n string, b []byte) (*Inventory, error) { inv, d := ParseYAML(n, b); return inv, diagsErr(d) },
		".ini": func(n string, b []byte) (*Inventory, error) { inv, d := ParseINI(n, b); return inv, diagsErr(d) },
	}
	for ext, parse := range parsers {
		for name, src := range adversarial(ext) {
			t.Run(ext+" "+name, func(t *testing.T) {
				_, err := parse("inv"+ext, []byte(src))
				require.Error(t, err)
				want := "Input nested too deeply"
				if name == "huge" {
					want = "Input too large"
				}
				assert.Contains(t, err.Error(), want)
				assert.Contains(t, err.Error(), "inv"+ext)
			})
		}
	}
	// At the bounds, the same shapes are inventories.
	inv, diags := ParseYAML("ok.yml", []byte(deepBlocks(limits.MaxNesting-3)))
	require.False(t, diags.HasErrors(), "%v", diags)
	assert.NotNil(t, inv)
	_, diags = ParseYAML("ok.yml", []byte("all:\n  vars:\n    x: "+strings.Repeat("[", limits.MaxNesting-3)+strings.Repeat("]", limits.MaxNesting-3)+"\n"))
	require.False(t, diags.HasErrors(), "%v", diags)
}

func diagsErr(d interface {
	HasErrors() bool
	Error() string
}) error {
	if d.HasErrors() {
		return errString(d.Error())
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }
