package playbook

import (
	"io/fs"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// parsing is a stock playbook being read and parsed on a goroutine of its
// own; done closes when the fields are set.
type parsing struct {
	done  chan struct{}
	src   []byte
	err   error
	file  *hcl.File
	diags hcl.Diagnostics
}

// prefetch starts parsing, each on its own goroutine, the stock playbooks
// the include blocks of one file name by a literal source, so that a
// join's twenty includes are parsed side by side while the loader decodes
// them one by one, in order, as before: the Playbook, its diagnostics and
// their order are the same. Only stock playbooks (the binary's, in
// memory) are parsed ahead: reading a file on disk may block (a pipe) or
// be refused, and is left to the include that names it. An include the
// loader then rejects (a cycle, an invalid block) leaves its parse unused.
func (l *Loader) prefetch(blocks hcl.Blocks, from location, stack []string) {
	for _, b := range blocks {
		if b.Type != "include" {
			continue
		}
		src, ok := literalSource(b)
		if !ok {
			continue
		}
		target := l.resolve(from, src)
		name := target.display()
		if target.fsys == nil || slices.Contains(stack, name) || l.ahead[name] != nil {
			continue
		}
		if l.ahead == nil {
			l.ahead = map[string]*parsing{}
		}
		p := &parsing{done: make(chan struct{})}
		l.ahead[name] = p
		go p.run(target)
	}
}

func (p *parsing) run(loc location) {
	defer close(p.done)
	p.src, p.err = fs.ReadFile(loc.fsys, loc.name)
	if p.err == nil {
		p.file, p.diags = parseFile(loc, p.src)
	}
}

// literalSource is an include block's source when it is a constant string.
func literalSource(b *hcl.Block) (string, bool) {
	attrs, _ := b.Body.JustAttributes()
	a, ok := attrs["source"]
	if !ok {
		return "", false
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}
