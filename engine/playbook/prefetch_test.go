package playbook_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules/all"
)

// prefetchTree is a playbook with includes two deep, one of them broken
// twice (a syntax error and, in another file, an undeclared reference), and
// one included from two places.
var prefetchTree = map[string]string{
	"main.hcl": `
include "a" { source = "a.hcl" }
include "b" { source = "sub/b.hcl" }
include "c" { source = "c.hcl" }
include "a_again" { source = "a.hcl" }
`,
	"a.hcl": `
play "a" {
  hosts = "all"
  task "hello" {
    print { msg = "a" }
  }
}
`,
	"sub/b.hcl": `
include "d" { source = "d.hcl" }
play "b" {
  hosts = "all"
  task "b" {
    print { msg = var.missing }
  }
}
`,
	"sub/d.hcl": `
play "d" {
  hosts =
}
`,
	"c.hcl": `
play "c" {
  hosts = "all"
}
`,
}

// TestEmbeddedIncludesParsedAhead: stock playbooks are parsed side by
// side ahead of their include (prefetch); the result must be what the
// loader gives for the same files on disk, parsed one by one: the same
// diagnostics in the same order, at the same lines and columns, and the
// same include tree.
func TestEmbeddedIncludesParsedAhead(t *testing.T) {
	fixed := map[string]string{"sub/d.hcl": "play \"d\" {\n  hosts = \"all\"\n}\n"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"syntax error", prefetchTree, "sub/d.hcl:3,10 Invalid expression"},
		{"reference error", withFiles(prefetchTree, fixed), "sub/b.hcl:6,19 Reference to undeclared variable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mapFS, dir := fstest.MapFS{}, t.TempDir()
			for name, src := range tc.files {
				mapFS[name] = &fstest.MapFile{Data: []byte(src)}
				path := filepath.Join(dir, filepath.FromSlash(name))
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(src), 0o644))
			}
			for range 20 { // goroutines finish in any order; the result may not depend on it
				embedded, ediags := playbook.NewLoader(all.Schemas(), mapFS).Load("wsu:main.hcl")
				onDisk, ddiags := playbook.NewLoader(all.Schemas(), nil).Load(filepath.Join(dir, "main.hcl"))
				got := located(ediags, "wsu:")
				require.Contains(t, got, tc.want)
				assert.Equal(t, located(ddiags, dir+string(filepath.Separator)), got)
				assert.Equal(t, tree(onDisk), tree(embedded))
			}
		})
	}
}

func withFiles(base, over map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// located lists diagnostics as "file:line,col summary", the file relative
// to prefix.
func located(diags hcl.Diagnostics, prefix string) []string {
	var out []string
	for _, d := range diags {
		at := "-"
		if d.Subject != nil {
			at = strings.TrimPrefix(filepath.ToSlash(d.Subject.Filename), filepath.ToSlash(prefix))
			at += fmt.Sprintf(":%d,%d", d.Subject.Start.Line, d.Subject.Start.Column)
		}
		out = append(out, at+" "+d.Summary)
	}
	return out
}

// tree is a playbook's items, includes followed, as names.
func tree(pb *playbook.Playbook) []string {
	if pb == nil {
		return nil
	}
	var out []string
	for _, it := range pb.Items {
		switch it := it.(type) {
		case *playbook.Play:
			out = append(out, "play "+it.Name)
		case *playbook.Include:
			out = append(out, "include "+it.Name+" {")
			out = append(out, tree(it.Playbook)...)
			out = append(out, "}")
		}
	}
	return out
}
