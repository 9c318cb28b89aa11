package engine

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/wsu-project/wsu/engine/playbook"
)

// needsFacts reports whether a task reads host.facts, directly or through
// a local of its playbook that does. Such a task connects to the host
// before it is evaluated, as Ansible gathers facts at the start of a play:
// otherwise a first task that only asserts on the facts (check-runtime's)
// would see null.
func needsFacts(t *playbook.Task, pb *playbook.Playbook) bool {
	exprs := []hcl.Expression{t.When, t.ForEach, t.Until, t.Retries, t.Delay, t.IgnoreErrors}
	if t.Body != nil {
		exprs = append(exprs, bodyExprs(t.Body)...)
	}
	return exprsReadFacts(exprs, pb)
}

// exprsReadFacts: does any of exprs (nil ones skipped) read host.facts,
// directly or through a local of pb that does?
func exprsReadFacts(exprs []hcl.Expression, pb *playbook.Playbook) bool {
	localsRead := localsReadFacts(pb)
	for _, e := range exprs {
		if e == nil {
			continue
		}
		for _, tr := range e.Variables() {
			switch tr.RootName() {
			case "host":
				if readsFacts(tr) {
					return true
				}
			case "local":
				if localsRead {
					return true
				}
			}
		}
	}
	return false
}

// localsReadFacts: does any local of pb read host.facts?
func localsReadFacts(pb *playbook.Playbook) bool {
	if pb == nil {
		return false
	}
	for _, l := range pb.Locals {
		for _, tr := range l.Expr.Variables() {
			if tr.RootName() == "host" && readsFacts(tr) {
				return true
			}
		}
	}
	return false
}

// readsFacts: host.facts..., or the whole host object.
func readsFacts(tr hcl.Traversal) bool {
	if len(tr) < 2 {
		return true
	}
	a, ok := tr[1].(hcl.TraverseAttr)
	return !ok || a.Name == "facts"
}

func bodyExprs(b *hclsyntax.Body) []hcl.Expression {
	var out []hcl.Expression
	for _, a := range b.Attributes {
		out = append(out, a.Expr)
	}
	for _, blk := range b.Blocks {
		out = append(out, bodyExprs(blk.Body)...)
	}
	return out
}

// outputsReadFacts reports whether pb's outputs read host.facts, directly
// or through a local that does. The includer reads outputs even when
// --tags skipped every task of the include, so no task may have connected:
// collectOutputs connects first, as a task reading the facts would.
func outputsReadFacts(pb *playbook.Playbook) bool {
	if pb == nil {
		return false
	}
	var exprs []hcl.Expression
	for _, o := range pb.Outputs {
		exprs = append(exprs, o.Value)
	}
	return exprsReadFacts(exprs, pb)
}
