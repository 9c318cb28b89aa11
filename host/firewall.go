package host

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Firewall manages Windows Firewall rules. It is optional (only the Windows
// backend and the simulation have a firewall to manage): a module asks for
// it with a type assertion and reports a host without it. It exists because
// a node must accept the kubelet's port (10250) and the metrics exporter's
// (9182) from the cluster, and netsh's text interface is locale-dependent
// and has no "exactly this rule" form.
//
// Windows lets several rules share a name; these calls treat the name as
// the rule's identity: FirewallRule reads the first rule with the name, and
// SetFirewallRule and DeleteFirewallRule act on all of them.
type Firewall interface {
	// FirewallRule reads the rule named name; Exists is false when there
	// is none.
	FirewallRule(ctx context.Context, name string) (FirewallRule, error)
	// SetFirewallRule makes rule the only rule with its name: rules with
	// that name are removed and rule is added. rule must pass Validate.
	SetFirewallRule(ctx context.Context, rule FirewallRule) error
	// DeleteFirewallRule removes every rule named name; none is not an
	// error.
	DeleteFirewallRule(ctx context.Context, name string) error
}

// Firewall rule settings, in the spelling the Host API uses.
const (
	FirewallIn    = "in"
	FirewallOut   = "out"
	FirewallAllow = "allow"
	FirewallBlock = "block"
	FirewallTCP   = "tcp"
	FirewallUDP   = "udp"
	FirewallAny   = "any"
)

// FirewallProfiles are the network profiles a rule can apply to, in order.
var FirewallProfiles = []string{"domain", "private", "public"}

// FirewallRule is one inbound or outbound rule: the part of a Windows
// Firewall rule (INetFwRule) a node's playbooks set. Fields it does not
// carry (programs, services, addresses, ICMP types, interfaces) are left as
// Windows makes them for a new rule: any.
type FirewallRule struct {
	// Exists is false in the answer for a name no rule has.
	Exists      bool   `json:"exists"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Group is the rule's grouping (INetFwRule.Grouping), shown as the
	// Group column of the Windows Firewall console.
	Group     string `json:"group,omitempty"`
	Direction string `json:"direction"` // FirewallIn or FirewallOut
	Action    string `json:"action"`    // FirewallAllow or FirewallBlock
	Protocol  string `json:"protocol"`  // FirewallTCP, FirewallUDP or FirewallAny
	// LocalPorts is a comma-separated list of ports and ranges
	// ("10250", "80,443", "9000-9010"); empty means any port, and is the
	// only choice with protocol any.
	LocalPorts string `json:"local_ports,omitempty"`
	// Profiles lists the profiles the rule applies to (FirewallProfiles);
	// all three is how Windows reports "all".
	Profiles []string `json:"profiles"`
	Enabled  bool     `json:"enabled"`
}

// Normalize returns the rule in the form hosts report it: lower-case
// settings, profiles in FirewallProfiles order without repeats (none means
// all), ports without spaces ("*" means any). Compare normalized rules.
func (r FirewallRule) Normalize() FirewallRule {
	r.Direction = strings.ToLower(r.Direction)
	r.Action = strings.ToLower(r.Action)
	r.Protocol = strings.ToLower(r.Protocol)
	r.LocalPorts = strings.ReplaceAll(r.LocalPorts, " ", "")
	if r.LocalPorts == "*" {
		r.LocalPorts = ""
	}
	var profiles []string
	for _, p := range FirewallProfiles {
		if len(r.Profiles) == 0 || slices.ContainsFunc(r.Profiles, func(q string) bool { return strings.EqualFold(p, q) }) {
			profiles = append(profiles, p)
		}
	}
	r.Profiles = profiles
	return r
}

// Equal reports whether two rules set the same, Exists aside.
func (r FirewallRule) Equal(o FirewallRule) bool {
	a, b := r.Normalize(), o.Normalize()
	a.Exists, b.Exists = false, false
	return a.Name == b.Name && a.Description == b.Description && a.Group == b.Group &&
		a.Direction == b.Direction && a.Action == b.Action && a.Protocol == b.Protocol &&
		a.LocalPorts == b.LocalPorts && slices.Equal(a.Profiles, b.Profiles) && a.Enabled == b.Enabled
}

// Validate checks a rule given to SetFirewallRule.
func (r FirewallRule) Validate() error {
	n := r.Normalize()
	switch {
	case strings.TrimSpace(r.Name) == "":
		return fmt.Errorf("a firewall rule needs a name")
	case strings.ContainsAny(r.Name, "|\x00"):
		return fmt.Errorf("firewall rule name %q contains | or NUL, which Windows does not accept", r.Name)
	case strings.EqualFold(r.Name, "all"):
		return fmt.Errorf(`firewall rule name "all" is reserved (netsh means every rule by it)`)
	case n.Direction != FirewallIn && n.Direction != FirewallOut:
		return fmt.Errorf("firewall rule %s: direction must be in or out, not %q", r.Name, r.Direction)
	case n.Action != FirewallAllow && n.Action != FirewallBlock:
		return fmt.Errorf("firewall rule %s: action must be allow or block, not %q", r.Name, r.Action)
	case n.Protocol != FirewallTCP && n.Protocol != FirewallUDP && n.Protocol != FirewallAny:
		return fmt.Errorf("firewall rule %s: protocol must be tcp, udp or any, not %q", r.Name, r.Protocol)
	case n.Protocol == FirewallAny && n.LocalPorts != "":
		return fmt.Errorf("firewall rule %s: ports need protocol tcp or udp", r.Name)
	}
	for _, p := range r.Profiles {
		if !slices.Contains(FirewallProfiles, strings.ToLower(p)) {
			return fmt.Errorf("firewall rule %s: profile %q is not domain, private or public", r.Name, p)
		}
	}
	if err := CheckPorts(n.LocalPorts); err != nil {
		return fmt.Errorf("firewall rule %s: %w", r.Name, err)
	}
	return nil
}

// CheckPorts checks a port list: ports and ranges (low-high) from 1 to
// 65535, comma-separated; empty is any port.
func CheckPorts(list string) error {
	if list == "" {
		return nil
	}
	for item := range strings.SplitSeq(list, ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		a, errA := port(lo)
		b := a
		var errB error
		if isRange {
			b, errB = port(hi)
		}
		switch {
		case errA != nil || errB != nil:
			return fmt.Errorf("port list %q: %q is not a port (1-65535) or a range of them", list, item)
		case b < a:
			return fmt.Errorf("port list %q: range %q runs backwards", list, item)
		}
	}
	return nil
}

func port(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err == nil && (n < 1 || n > 65535) {
		err = fmt.Errorf("out of range")
	}
	return n, err
}

// String describes a rule for plans: "in allow tcp 10250 (domain, private,
// public), enabled".
func (r FirewallRule) String() string {
	n := r.Normalize()
	ports := n.LocalPorts
	if ports == "" {
		ports = "any port"
	}
	state := "enabled"
	if !n.Enabled {
		state = "disabled"
	}
	return fmt.Sprintf("%s %s %s %s (%s), %s", n.Direction, n.Action, n.Protocol, ports, strings.Join(n.Profiles, ", "), state)
}
