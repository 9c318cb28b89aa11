package view

import (
	"fmt"
	"sort"
	"strings"

	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/inventory"
)

// shownHostVars are the --host-var options as a reviewer reads them (a
// changed ansible_host is where apply connects), the value of a
// secret-named one hidden: setup refuses those, but the file may be older
// or edited.
func shownHostVars(list []string) string {
	shown := make([]string, 0, len(list))
	for _, kv := range list {
		name, _, _ := strings.Cut(kv, "=")
		if inventory.SecretName(strings.TrimSpace(name)) {
			kv = name + "=(sensitive)"
		}
		shown = append(shown, kv)
	}
	return strings.Join(shown, " ")
}

// SavedPlan prints a saved plan for review (`wsu show FILE`): the inputs
// it was made with, then per host (by name) each task it will change, with
// the fields and content diffs the plan showed (secrets were hidden when
// it was saved); with Verbose, unchanged and skipped tasks too.
func (h *Human) SavedPlan(file string, p *planfile.Plan) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.w
	fmt.Fprintf(w, "%s\n", h.paint(cBold, "Saved plan "+file))
	line := func(name, value string) {
		if value != "" {
			fmt.Fprintf(w, "  %-11s %s\n", name+":", value)
		}
	}
	line("made by", "wsu "+p.WSUVersion)
	line("in", p.Dir)
	line("playbook", p.Playbook)
	line("inventory", strings.Join(p.InventorySources(), ", "))
	if p.Local {
		line("local", "yes (connection local)")
	}
	line("var files", strings.Join(p.VarFiles, ", "))
	line("join file", p.JoinConfig) // --join-config
	line("vars", strings.Join(p.Vars, " "))
	line("host vars", shownHostVars(p.HostVars))
	line("give again", strings.Join(p.SensitiveVars, ", ")+map[bool]string{true: " (sensitive: -var or WSU_VAR_ at apply)", false: ""}[len(p.SensitiveVars) > 0])
	line("limit", p.Limit)
	line("tags", strings.Join(p.Tags, ","))
	line("skip tags", strings.Join(p.SkipTags, ","))
	line("start at", p.StartAtTask)
	line("kubeconfig", p.Kubeconfig)
	line("context", p.KubeContext)
	h.planChanges(p)
	fmt.Fprintf(w, "Apply exactly it with: wsu apply %s\n", file)
}

// PlanChanges prints a plan's changes as SavedPlan does, without the
// saved inputs: per host each task it will change, with the fields and
// content diffs (secrets hidden), then the count. The controller keeps
// this text for an approver to review (docs/controller.md).
func (h *Human) PlanChanges(p *planfile.Plan) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.planChanges(p)
}

// planChanges prints p's changes per host and their count; h.mu is held.
func (h *Human) planChanges(p *planfile.Plan) {
	w := h.w
	names := make([]string, 0, len(p.Hosts))
	for n := range p.Hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	changes, hosts := 0, 0
	for _, name := range names {
		var b strings.Builder
		n := 0
		for _, t := range p.Hosts[name].Tasks {
			t = escapeTask(t) // a diff holds the host's file content
			switch {
			case t.Status == "changed":
				n++
				b.WriteString(h.savedChange(name, t))
			case t.Status == "failed" || t.Status == "deferred" || h.verbose:
				fmt.Fprintf(&b, "  %s [%s] %s (%s)\n", h.paint(cDim, "  ="), name, t.Address, t.Summary)
			}
		}
		if b.Len() > 0 {
			fmt.Fprintf(w, "\n%s\n%s", h.paint(cBold, "HOST "+name), b.String())
		}
		if n > 0 {
			hosts++
			changes += n
		}
	}
	if changes == 0 {
		fmt.Fprintf(w, "\n%s\n", h.paint(cGreen, "No changes: applying it changes nothing."))
	} else {
		fmt.Fprintf(w, "\n%s\n", h.paint(cBold, fmt.Sprintf("Plan: %d %s to change on %d %s.", changes, plural(changes, "task", "tasks"), hosts, plural(hosts, "host", "hosts"))))
	}
}

// savedChange is one changed task: its change as the plan showed it, or
// its summary line for a plan saved without changes recorded.
func (h *Human) savedChange(host string, t planfile.Task) string {
	c := t.Change
	if c == nil {
		return fmt.Sprintf("  %s [%s] %s\n", h.paint(cYellow, "  ~"), host, t.Summary)
	}
	code := cYellow
	switch c.Symbol {
	case "+":
		code = cGreen
	case "-", "-/+":
		code = cRed
	}
	line := fmt.Sprintf("  %s [%s] %s", h.paint(code, fmt.Sprintf("%3s", c.Symbol)), host, t.Address)
	if t.Module != "" {
		line += " (" + t.Module + ")"
	}
	if c.Subject != "" {
		line += " " + c.Subject
	}
	return line + "\n" + h.fields(c, "        ")
}
