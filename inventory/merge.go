package inventory

import (
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Merge combines inventories given one after another (several -i), as
// Ansible does: hosts in order of first appearance; a group's members and
// children are the union of its sources'; a host's or group's variable set
// in a later source overrides the same variable set in an earlier one (per
// variable, each keeping the range it was set at). Cycles the union makes
// are reported and broken as in one file.
func Merge(invs ...*Inventory) (*Inventory, hcl.Diagnostics) {
	var names []string
	for _, inv := range invs {
		if inv.Source != "" {
			names = append(names, inv.Source)
		}
	}
	b := newBuilder("", nil)
	b.inv.Source = strings.Join(names, ", ")
	for _, inv := range invs {
		if !b.room(len(inv.Order), hcl.Range{}) {
			break
		}
		for _, name := range inv.Order {
			src := inv.Hosts[name]
			h := b.host(name, src.Range)
			for k, v := range src.Vars {
				h.Vars[k] = v
			}
		}
		for _, gname := range sortedKeys(inv.Groups) {
			src := inv.Groups[gname]
			g := b.group(gname, src.Range)
			for k, v := range src.Vars {
				g.Vars[k] = v
			}
			if gname == groupAll {
				continue // its hosts and children are derived again
			}
			for _, h := range src.Hosts {
				b.addHost(gname, h)
			}
			for _, c := range src.Children {
				b.addChild(gname, c, src.Range)
			}
		}
	}
	return b.finish()
}
