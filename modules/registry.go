package modules

import (
	"fmt"
	"sort"

	"github.com/agext/levenshtein"
)

// Registry maps module names to modules. The CLI and the controller build one
// with every stock module (see modules/all); tests build their own.
type Registry struct {
	byName map[string]Module
}

// NewRegistry returns a registry holding mods.
func NewRegistry(mods ...Module) *Registry {
	r := &Registry{byName: map[string]Module{}}
	for _, m := range mods {
		r.Register(m)
	}
	return r
}

// Register adds a module; a duplicate name is a programming error.
func (r *Registry) Register(m Module) {
	name := m.Schema().Name
	if _, dup := r.byName[name]; dup {
		panic(fmt.Sprintf("modules: %q registered twice", name))
	}
	r.byName[name] = m
}

// Lookup returns the named module.
func (r *Registry) Lookup(name string) (Module, bool) {
	m, ok := r.byName[name]
	return m, ok
}

// Names returns every module name, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Suggest returns the registered name closest to a misspelt one, or "".
func (r *Registry) Suggest(name string) string {
	return Nearest(name, r.Names())
}

// Nearest returns the candidate within a small edit distance of name, or "".
func Nearest(name string, candidates []string) string {
	best, bestDist := "", 4
	for _, c := range candidates {
		if d := levenshtein.Distance(name, c, nil); d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist > len(name)/2+1 {
		return ""
	}
	return best
}
