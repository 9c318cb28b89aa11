package inventory

import "github.com/zclconf/go-cty/cty"

// HostString is the string a host of the inventory sets the variable name
// to, marks aside: the first such host in Order, or "" when none sets it
// to a known string. For the one-host inventories a controller builds,
// where a variable names a file of that host's (its known_hosts).
func (inv *Inventory) HostString(name string) string {
	if inv == nil {
		return ""
	}
	for _, h := range inv.Order {
		host := inv.Hosts[h]
		if host == nil {
			continue
		}
		if v, ok := host.Vars[name]; ok {
			if s, _ := v.Value.Unmark(); s.Type() == cty.String && s.IsKnown() && !s.IsNull() {
				return s.AsString()
			}
		}
	}
	return ""
}
