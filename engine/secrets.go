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
		for name, rv := range p.cli {
			if sensitive[name] {
				s.Add(rv.text)
			}
		}
		for name, rv := range p.env {
			if sensitive[name] {
				s.Add(rv.text)
			}
		}
		for _, file := range p.files {
			for name, rv := range file {
				if sensitive[name] || inventory.SecretName(name) {
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
			if inventory.SecretName(name) || sensitive[name] {
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

// sensitiveVariables names the variables declared sensitive anywhere in
// the include tree, and registers their defaults.
func sensitiveVariables(pb *playbook.Playbook, s *Scrubber) map[string]bool {
	sensitive := map[string]bool{}
	if pb == nil {
		return sensitive
	}
	pb.Walk(func(pb *playbook.Playbook) {
		for n, v := range pb.Variables {
			if v.Sensitive {
				sensitive[n] = true
				if v.Default != cty.NilVal {
					s.AddValue(v.Default)
				}
			}
		}
	})
	return sensitive
}
