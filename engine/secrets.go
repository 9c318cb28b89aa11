package engine

import (
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
)

// CollectSecrets registers with s every secret a run's inputs hold, before
// anything is decoded or printed: the values of variables declared
// sensitive (their defaults, and what -var, WSU_VAR_, var files and the
// inventory give them), var-file and inventory values under a secret-like
// name (inventory.SecretName), and inventory values already marked
// sensitive (a BYOH inventory's private key). Run does it itself; a face
// that prints diagnostics before Run (setup) calls it first. Inputs that
// cannot be read are skipped: reading them is Run's to report.
func CollectSecrets(s *Scrubber, pb *playbook.Playbook, inv *inventory.Inventory, in Inputs) {
	declared := map[string]bool{}
	if pb != nil {
		pb.Walk(func(pb *playbook.Playbook) {
			for n := range pb.Variables {
				declared[n] = true
			}
		})
	}
	p, _ := parseInputs(in, declared)
	collectSecrets(s, pb, inv, p)
}

// collectSecrets is CollectSecrets with the inputs already parsed.
func collectSecrets(s *Scrubber, pb *playbook.Playbook, inv *inventory.Inventory, p *parsedInputs) {
	sensitive := sensitiveVariables(pb, s)
	if p != nil {
		// Text as given, and, for a typed variable, the strings of the
		// value it reads as ({ a = "s3cret" } hides s3cret alone too).
		text := func(name string, rv rawValue) {
			s.Add(rv.text)
			if sensitive[name] == nil {
				return // a secret -var of a variable not declared sensitive: its text
			}
			if v, d := rv.convert(sensitive[name]); !d.HasErrors() {
				s.AddValue(v)
			}
		}
		for name, rv := range p.cli {
			if sensitive[name] != nil || rv.secret {
				text(name, rv)
			}
		}
		for name, rv := range p.env {
			if sensitive[name] != nil {
				text(name, rv)
			}
		}
		for _, file := range p.valueFiles {
			for name, rv := range file {
				if sensitive[name] != nil || rv.secret {
					s.AddValue(rv.value)
				}
			}
		}
		for _, file := range p.files {
			for name, rv := range file {
				if sensitive[name] != nil || inventory.SecretName(name) {
					if v, d := rv.expr.Value(nil); !d.HasErrors() {
						s.AddValue(v)
					}
				}
			}
		}
	}
	if inv == nil {
		return
	}
	// Each group's and host's own variables, not each host's merged view:
	// an inventory read only in part (it has errors) may have groups
	// whose hosts are missing.
	note := func(vars map[string]inventory.Var) {
		for name, v := range vars {
			if inventory.SecretName(name) || sensitive[name] != nil {
				s.AddValue(v.Value)
			} else {
				s.AddMarked(v.Value)
			}
		}
	}
	for _, g := range inv.Groups {
		note(g.Vars)
	}
	for _, h := range inv.Hosts {
		note(h.Vars)
	}
}

// sensitiveVariables are the variables declared sensitive anywhere in the
// include tree, by name; their defaults are registered.
func sensitiveVariables(pb *playbook.Playbook, s *Scrubber) map[string]*playbook.Variable {
	sensitive := map[string]*playbook.Variable{}
	if pb == nil {
		return sensitive
	}
	pb.Walk(func(pb *playbook.Playbook) {
		for n, v := range pb.Variables {
			if v.Sensitive {
				sensitive[n] = v
				if v.Default != cty.NilVal {
					s.AddValue(v.Default)
				}
			}
		}
	})
	return sensitive
}
