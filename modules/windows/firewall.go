package windows

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// ManagedFirewallGroup is the group win_firewall_rule gives a rule when the
// task sets none. Removal finds the rules wsu created by it, as it finds
// services by ManagedDescription, so a rule an administrator made under the
// same name is left alone.
const ManagedFirewallGroup = "wsu"

// FirewallRule manages one Windows Firewall rule through the Host API's
// optional host.Firewall (the Windows Firewall API on a node).
type FirewallRule struct{}

var (
	_ modules.Module    = FirewallRule{}
	_ modules.Validator = FirewallRule{}
)

var firewallResults = []modules.Attribute{
	{Name: "name", Type: cty.String, Description: "The rule's name."},
	{Name: "exists", Type: cty.Bool, Description: "Whether the rule exists after the task."},
}

func (FirewallRule) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_firewall_rule",
		Summary: "Create, change or delete a Windows Firewall rule.",
		Description: "Makes exactly one rule named `name` exist with the given settings, or none " +
			"(`state = \"absent\"`). The arguments follow Ansible's `community.windows.win_firewall_rule`. " +
			"Windows lets several rules share a name; this module treats the name as the rule's " +
			"identity, so creating or changing a rule removes others with its name, and deleting " +
			"removes them all. The plan lists the settings that differ.\n\n" +
			"The rule is set through the Windows Firewall API (INetFwPolicy2), not netsh, and takes " +
			"effect at once. Rules wsu creates carry a marker: with no `group`, the group is `\"" +
			ManagedFirewallGroup + "\"`, and `only_if_managed = true` limits a deletion to rules " +
			"carrying it, which is how the removal playbook leaves an administrator's rules alone. " +
			"A host without a firewall to manage (a Linux host) fails the task saying so.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "name", Type: cty.String, Required: true, Description: "The rule's name (the Windows Firewall console's Name column)."},
			{Name: "description", Type: cty.String, Default: cty.StringVal(""), Description: "The rule's description."},
			{Name: "group", Type: cty.String, Default: cty.StringVal(ManagedFirewallGroup), Description: "The rule's group (INetFwRule.Grouping); the default marks the rule as wsu's."},
			{Name: "direction", Type: cty.String, Default: cty.StringVal(host.FirewallIn), Description: "`\"in\"` or `\"out\"`."},
			{Name: "action", Type: cty.String, Default: cty.StringVal(host.FirewallAllow), Description: "`\"allow\"` or `\"block\"`."},
			{Name: "protocol", Type: cty.String, Default: cty.StringVal(host.FirewallTCP), Description: "`\"tcp\"`, `\"udp\"` or `\"any\"`."},
			{Name: "localport", Type: cty.String, Default: cty.StringVal(""),
				Description: "Local ports: a port, a range (`\"9000-9010\"`) or a comma-separated list of them; `\"\"` or `\"any\"` for every port (the only choice with protocol `any`)."},
			{Name: "profiles", Type: cty.List(cty.String), Default: listVal(host.FirewallProfiles),
				Description: "The network profiles the rule applies to: `\"domain\"`, `\"private\"`, `\"public\"`."},
			{Name: "enabled", Type: cty.Bool, Default: cty.True, Description: "Whether the rule is enforced."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"), Description: "`\"present\"` or `\"absent\"`."},
			{Name: "only_if_managed", Type: cty.Bool, Default: cty.False,
				Description: "With `state = \"absent\"`: delete only rules in the group `\"" + ManagedFirewallGroup + "\"` (the ones wsu created)."},
		},
		Results: firewallResults,
		Example: `task "kubelet_port" {
  win_firewall_rule {
    name        = "wsu kubelet"
    description = "kubelet API: logs, exec, port-forward, metrics"
    localport   = "10250"
  }
}`,
	}
}

// wantRule is the rule the config asks for; ok is false while any of it is
// unknown.
func wantRule(cfg modules.Config) (r host.FirewallRule, ok bool) {
	names := []string{"name", "description", "group", "direction", "action", "protocol", "localport"}
	vals := make([]string, len(names))
	for i, n := range names {
		s, known := str(get(cfg, n))
		if !known {
			return r, false
		}
		vals[i] = s
	}
	profiles, pOK := strList(get(cfg, "profiles"))
	enabled, eOK := boolAttr(cfg, "enabled")
	if !pOK || !eOK {
		return r, false
	}
	port := vals[6]
	if strings.EqualFold(port, "any") {
		port = ""
	}
	r = host.FirewallRule{Name: vals[0], Description: vals[1], Group: vals[2], Direction: vals[3], Action: vals[4],
		Protocol: vals[5], LocalPorts: port, Profiles: profiles, Enabled: enabled}
	return r.Normalize(), true
}

func (FirewallRule) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	diags = append(diags, validateEnum(cfg, "state", "present", "absent")...)
	diags = append(diags, validateEnum(cfg, "direction", host.FirewallIn, host.FirewallOut)...)
	diags = append(diags, validateEnum(cfg, "action", host.FirewallAllow, host.FirewallBlock)...)
	diags = append(diags, validateEnum(cfg, "protocol", host.FirewallTCP, host.FirewallUDP, host.FirewallAny)...)
	if diags.HasErrors() {
		return diags
	}
	if profiles, ok := strList(get(cfg, "profiles")); ok {
		for _, p := range profiles {
			if !slices.Contains(host.FirewallProfiles, p) {
				diags = append(diags, cfg.Error("profiles", "Invalid profile",
					fmt.Sprintf("profiles must be among \"domain\", \"private\" and \"public\"; got %q.", p)))
			}
		}
		if len(profiles) == 0 {
			diags = append(diags, cfg.Error("profiles", "No profile", "A rule applies to at least one profile."))
		}
	}
	if diags.HasErrors() {
		return diags
	}
	if r, ok := wantRule(cfg); ok {
		if err := r.Validate(); err != nil {
			attr := "name"
			switch {
			case strings.Contains(err.Error(), "port"):
				attr = "localport"
			case strings.Contains(err.Error(), "reserved"), strings.Contains(err.Error(), "needs a name"):
				attr = "name"
			}
			diags = append(diags, cfg.Error(attr, "Invalid firewall rule", err.Error()+"."))
		}
	}
	return diags
}

// ruleFields are a rule's settings as plans show them.
func ruleFields(r host.FirewallRule) []modules.FieldChange {
	n := r.Normalize()
	port := n.LocalPorts
	if port == "" {
		port = "any"
	}
	vals := []cty.Value{cty.StringVal(n.Description), cty.StringVal(n.Group), cty.StringVal(n.Direction), cty.StringVal(n.Action),
		cty.StringVal(n.Protocol), cty.StringVal(port), listVal(n.Profiles), cty.BoolVal(n.Enabled)}
	names := []string{"description", "group", "direction", "action", "protocol", "localport", "profiles", "enabled"}
	out := make([]modules.FieldChange, len(names))
	for i, name := range names {
		out[i] = modules.FieldChange{Name: name, New: vals[i]}
	}
	return out
}

// diffRule is the change from have to want (want nil: delete), shared by
// Plan and Apply; nil when there is nothing to do.
func diffRule(have host.FirewallRule, want *host.FirewallRule) *modules.Change {
	subject := "firewall rule " + have.Name
	switch {
	case want == nil && !have.Exists:
		return nil
	case want == nil:
		fields := ruleFields(have)
		for i := range fields {
			fields[i].Old, fields[i].New = fields[i].New, cty.NullVal(fields[i].New.Type())
		}
		return &modules.Change{Action: modules.Delete, Subject: subject, Fields: fields}
	case !have.Exists:
		fields := ruleFields(*want)
		for i := range fields {
			fields[i].Old = cty.NullVal(fields[i].New.Type())
		}
		return &modules.Change{Action: modules.Create, Subject: subject, Fields: fields}
	}
	var fields []modules.FieldChange
	old := ruleFields(have)
	for i, f := range ruleFields(*want) {
		if !f.New.Equals(old[i].New).True() {
			fields = append(fields, modules.FieldChange{Name: f.Name, Old: old[i].New, New: f.New})
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return &modules.Change{Action: modules.Update, Subject: subject, Fields: fields}
}

// firewallHost is the host's firewall, or a diagnostic saying it has none.
func firewallHost(h host.Host, cfg modules.Config) (host.Firewall, hcl.Diagnostics) {
	if fw, ok := h.(host.Firewall); ok {
		return fw, nil
	}
	return nil, hcl.Diagnostics{cfg.Error("name", "Not supported on this platform",
		"This host has no Windows Firewall to manage (its connection offers no firewall operations).")}
}

// observe reads the rule and decides what the task wants: want is nil for
// a deletion, and also when only_if_managed spares a rule not in wsu's
// group (then have reads as absent).
func observe(ctx context.Context, fw host.Firewall, cfg modules.Config, name string) (have host.FirewallRule, want *host.FirewallRule, diags hcl.Diagnostics) {
	have, err := fw.FirewallRule(ctx, name)
	if err != nil {
		return have, nil, hostError(cfg, "name", "Cannot read firewall rule", err)
	}
	have.Name = name
	if state, _ := str(get(cfg, "state")); state == "absent" {
		if managedOnly, _ := boolAttr(cfg, "only_if_managed"); managedOnly && have.Exists && have.Group != ManagedFirewallGroup {
			have.Exists = false
		}
		return have, nil, nil
	}
	w, _ := wantRule(cfg)
	return have, &w, nil
}

func (m FirewallRule) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	nameV := get(cfg, "name")
	name, nameOK := str(nameV)
	state, stateOK := str(get(cfg, "state"))
	_, wantOK := wantRule(cfg)
	res := result(firewallResults, map[string]cty.Value{"name": nameV, "exists": cty.BoolVal(state != "absent")})
	if !nameOK || !stateOK || (state == "present" && !wantOK) {
		subject := knownAfterApply
		if nameOK {
			subject = "firewall rule " + name
		}
		return modules.PlanResponse{Result: unknownResult(firewallResults), Change: &modules.Change{Action: modules.Update, Subject: subject}}
	}
	fw, diags := firewallHost(req.Host, cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	have, want, diags := observe(ctx, fw, cfg, name)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	if want == nil {
		res = result(firewallResults, map[string]cty.Value{"name": nameV, "exists": cty.BoolVal(false)})
	}
	return modules.PlanResponse{Result: res, Change: diffRule(have, want)}
}

func (m FirewallRule) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "name", "description", "group", "direction", "action", "protocol", "localport", "profiles", "enabled", "state", "only_if_managed"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(firewallResults), Diagnostics: diags}
	}
	name, _ := str(get(cfg, "name"))
	res := func(exists bool) cty.Value {
		return result(firewallResults, map[string]cty.Value{"name": cty.StringVal(name), "exists": cty.BoolVal(exists)})
	}
	fw, diags := firewallHost(req.Host, cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: res(false), Diagnostics: diags}
	}
	have, want, diags := observe(ctx, fw, cfg, name)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: res(have.Exists), Diagnostics: diags}
	}
	change := diffRule(have, want)
	switch {
	case change == nil:
		return modules.ApplyResponse{Result: res(want != nil || have.Exists)}
	case change.Action == modules.Delete:
		if err := fw.DeleteFirewallRule(ctx, name); err != nil {
			return modules.ApplyResponse{Result: res(true), Diagnostics: hostError(cfg, "name", "Cannot delete firewall rule", err)}
		}
		return modules.ApplyResponse{Result: res(false)}
	}
	if err := fw.SetFirewallRule(ctx, *want); err != nil {
		return modules.ApplyResponse{Result: res(have.Exists), Diagnostics: hostError(cfg, "name", "Cannot set firewall rule", err)}
	}
	return modules.ApplyResponse{Result: res(true)}
}
