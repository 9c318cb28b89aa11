package windows

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wsu-project/wsu/host"
)

// The firewall backend, and why it is built this way.
//
// Rules go through the Windows Firewall API: INetFwPolicy2.Rules
// (INetFwRules: Item, Add, Remove) and INetFwRule's properties, reached by
// calling the COM vtables through syscall (firewall_windows.go), since the
// agent builds without cgo and carries no COM library. Two other routes
// were rejected:
//   - netsh advfirewall: a text interface whose output is localised, and
//     which the issue rules out;
//   - writing the rule strings under HKLM\SYSTEM\CurrentControlSet\Services\
//     SharedAccess\Parameters\FirewallPolicy\FirewallRules: the format is
//     documented ([MS-GPFAS]) and Wine would run it fully, but the firewall
//     service (mpssvc) reads that key when it starts; a rule written there
//     is not enforced until mpssvc restarts, and an API write by anyone else
//     meanwhile can overwrite it.
//
// What a rule means is decided here, in code that builds on every
// platform: the conversion between host.FirewallRule and the API's values
// (comRule) and the name-as-identity logic over fwStore (the three INetFwRules
// calls). The contract tests run that logic against memStore, a stand-in
// with the documented INetFwRules behaviour, and the Wine tier runs it
// against Wine's hnetcfg.dll as far as Wine implements it (see
// wine_firewall_test.go and docs/agent-protocol.md).

// NET_FW_* values of the Windows Firewall API.
const (
	fwProtocolTCP = 6
	fwProtocolUDP = 17
	fwProtocolAny = 256

	fwDirIn  = 1
	fwDirOut = 2

	fwActionBlock = 0
	fwActionAllow = 1

	fwProfileDomain  = 1
	fwProfilePrivate = 2
	fwProfilePublic  = 4
	fwProfileAll     = 0x7FFFFFFF
)

// comRule is a rule as INetFwRule holds it.
type comRule struct {
	Name, Description, Grouping string
	Protocol, Direction, Action int32
	Profiles                    int32
	LocalPorts                  string // "*" for any
	Enabled                     bool
}

// errNoRule is fwStore.Item's answer for a name no rule has (the API's
// HRESULT_FROM_WIN32(ERROR_FILE_NOT_FOUND)).
var errNoRule = errors.New("no firewall rule with that name")

// fwStore is the rule collection: INetFwRules' Item, Add and Remove.
type fwStore interface {
	// Item returns the first rule named name, or errNoRule.
	Item(name string) (comRule, error)
	// Add adds a rule; a rule with the same name may already exist.
	Add(r comRule) error
	// Remove removes a rule named name.
	Remove(name string) error
}

// maxSameName bounds the removal loop: Windows allows any number of rules
// with one name, and a store that reports a rule it cannot remove must not
// spin forever.
const maxSameName = 256

func toCOM(r host.FirewallRule) comRule {
	n := r.Normalize()
	c := comRule{Name: n.Name, Description: n.Description, Grouping: n.Group, Enabled: n.Enabled, LocalPorts: n.LocalPorts}
	switch n.Protocol {
	case host.FirewallTCP:
		c.Protocol = fwProtocolTCP
	case host.FirewallUDP:
		c.Protocol = fwProtocolUDP
	default:
		c.Protocol = fwProtocolAny
	}
	c.Direction = fwDirIn
	if n.Direction == host.FirewallOut {
		c.Direction = fwDirOut
	}
	c.Action = fwActionAllow
	if n.Action == host.FirewallBlock {
		c.Action = fwActionBlock
	}
	for i, p := range host.FirewallProfiles {
		for _, q := range n.Profiles {
			if p == q {
				c.Profiles |= 1 << i
			}
		}
	}
	if c.Profiles == fwProfileDomain|fwProfilePrivate|fwProfilePublic {
		c.Profiles = fwProfileAll
	}
	if c.LocalPorts == "" && c.Protocol != fwProtocolAny {
		c.LocalPorts = "*"
	}
	return c
}

func fromCOM(c comRule) host.FirewallRule {
	r := host.FirewallRule{Exists: true, Name: c.Name, Description: c.Description, Group: c.Grouping, Enabled: c.Enabled, LocalPorts: c.LocalPorts}
	switch c.Protocol {
	case fwProtocolTCP:
		r.Protocol = host.FirewallTCP
	case fwProtocolUDP:
		r.Protocol = host.FirewallUDP
	case fwProtocolAny:
		r.Protocol = host.FirewallAny
	default:
		// An IP protocol number the Host API has no name for: shown, so it
		// never equals a wanted rule.
		r.Protocol = fmt.Sprintf("protocol %d", c.Protocol)
	}
	r.Direction = host.FirewallIn
	if c.Direction == fwDirOut {
		r.Direction = host.FirewallOut
	}
	r.Action = host.FirewallAllow
	if c.Action == fwActionBlock {
		r.Action = host.FirewallBlock
	}
	for i, p := range host.FirewallProfiles {
		if c.Profiles&(1<<i) != 0 {
			r.Profiles = append(r.Profiles, p)
		}
	}
	return r.Normalize()
}

// getRule reads the first rule named name.
func getRule(s fwStore, name string) (host.FirewallRule, error) {
	c, err := s.Item(name)
	if errors.Is(err, errNoRule) {
		return host.FirewallRule{Name: name}, nil
	}
	if err != nil {
		return host.FirewallRule{}, fmt.Errorf("read firewall rule %s: %w", name, err)
	}
	return fromCOM(c), nil
}

// setRule makes r the only rule with its name.
func setRule(s fwStore, r host.FirewallRule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if err := deleteRule(s, r.Name); err != nil {
		return err
	}
	if err := s.Add(toCOM(r)); err != nil {
		return fmt.Errorf("add firewall rule %s: %w", r.Name, err)
	}
	return nil
}

// deleteRule removes every rule named name.
func deleteRule(s fwStore, name string) error {
	if strings.TrimSpace(name) == "" {
		return errors.New("a firewall rule needs a name")
	}
	for range maxSameName {
		_, err := s.Item(name)
		if errors.Is(err, errNoRule) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read firewall rule %s: %w", name, err)
		}
		if err := s.Remove(name); err != nil {
			return fmt.Errorf("remove firewall rule %s: %w", name, err)
		}
	}
	return fmt.Errorf("remove firewall rule %s: still present after %d removals", name, maxSameName)
}
