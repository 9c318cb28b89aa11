package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/limits"
)

// inputVars are the typed variables the input fuzz target feeds.
var inputVars = []*playbook.Variable{
	{Name: "items", Type: cty.Map(cty.DynamicPseudoType)},
	{Name: "nums", Type: cty.List(cty.Number)},
	{Name: "obj", Type: cty.Object(map[string]cty.Type{"a": cty.List(cty.DynamicPseudoType)})},
	{Name: "raw", Type: cty.DynamicPseudoType},
}

// deepAnyObject is a value whose conversion to map(any) used to take tens
// of seconds.
func deepAnyObject(keys, depth int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range keys {
		fmt.Fprintf(&b, "k%d = %s1%s\n", i, strings.Repeat("{a=", depth), strings.Repeat("}", depth))
	}
	b.WriteString("}")
	return b.String()
}

// FuzzInputs feeds a variables file and a -var value to every typed
// variable: reading and converting them must never crash or hang, and
// whatever is refused is refused with a diagnostic.
func FuzzInputs(f *testing.F) {
	deep := strings.Repeat("[", 5000) + "1" + strings.Repeat("]", 5000)
	f.Add([]byte("nums = [1, 2]\nitems = { a = 1 }\n"), "[1, 2, 3]")
	f.Add([]byte("nums = "+deep+"\n"), deep)
	f.Add([]byte("items = "+deepAnyObject(300, 90)+"\n"), deepAnyObject(100, 99))
	f.Add([]byte("obj = { a = "+strings.Repeat("[", 99)+strings.Repeat("]", 99)+" }\n"), strings.Repeat("-", 5000)+"1")
	f.Add([]byte("# "+strings.Repeat("x", limits.MaxFileSize)+"\n"), strings.Repeat("1", limits.MaxValueSize+1))
	f.Add([]byte("raw = 1"+strings.Repeat("+1", 5000)+"\n"), "{"+strings.Repeat("a = true ? 1 : ", 5000)+"1}")
	dir := f.TempDir()
	declared := map[string]bool{}
	for _, v := range inputVars {
		declared[v.Name] = true
	}
	f.Fuzz(func(t *testing.T, file []byte, text string) {
		path := filepath.Join(dir, "vars.hcl")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		var opts []string
		for _, v := range inputVars {
			opts = append(opts, v.Name+"="+text)
		}
		p, _ := parseInputs(Inputs{VarFiles: []string{path}, Vars: opts}, declared)
		for _, v := range inputVars {
			for _, src := range []map[string]rawValue{p.cli, firstFile(p)} {
				if r, ok := src[v.Name]; ok {
					val, diags := r.convert(v)
					if val == cty.NilVal && !diags.HasErrors() {
						t.Fatalf("%s: no value and no error", v.Name)
					}
				}
			}
		}
	})
}

func firstFile(p *parsedInputs) map[string]rawValue {
	if len(p.files) == 0 {
		return nil
	}
	return p.files[0]
}
