package engine

import (
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine/playbook"
)

// sharedLocals remembers, for one run, the locals that refer to nothing
// but variables and other such locals: their value is the same on every
// host whose variables are the same, so a fleet evaluates each once per
// distinct set of inputs rather than once per host. The payload's
// manifest (jsondecode(file(...)) in three playbooks) was 6-7 % of a
// ten-host no-op re-run's CPU, decoded again for every host.
//
// A local that names a host's values, a task's or an include's result,
// each or self, or a play's variables is per host (or per task) and never
// shared, as it is never cached in the host's scope either.
type sharedLocals struct {
	mu sync.Mutex
	m  map[sharedLocalKey][]sharedLocal
}

type sharedLocalKey struct {
	inst *instance
	name string
}

// sharedLocal is one evaluation: the values it read and its result.
type sharedLocal struct {
	inputs, value cty.Value
}

// maxSharedInputs bounds the input sets remembered per local: past it
// (hosts whose variables all differ), each host evaluates its own.
const maxSharedInputs = 16

func (s *sharedLocals) get(k sharedLocalKey, inputs cty.Value) (cty.Value, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.m[k] {
		if e.inputs.RawEquals(inputs) {
			return e.value, true
		}
	}
	return cty.NilVal, false
}

func (s *sharedLocals) put(k sharedLocalKey, inputs, v cty.Value) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[sharedLocalKey][]sharedLocal{}
	}
	for _, e := range s.m[k] {
		if e.inputs.RawEquals(inputs) {
			return // another host evaluated it at the same time
		}
	}
	if len(s.m[k]) < maxSharedInputs {
		s.m[k] = append(s.m[k], sharedLocal{inputs: inputs, value: v})
	}
}

// hostFree reports whether trs name only variables and locals.
func hostFree(trs []hcl.Traversal) bool {
	for _, tr := range trs {
		if root := tr.RootName(); root != playbook.RootVar && root != playbook.RootLocal {
			return false
		}
	}
	return true
}
