package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// JSON is an Inventory in JSON, without source ranges: the form a run
// request carries it in (setup.Request), so a run on another machine (a
// controller's Job) gets exactly the hosts, groups and typed values the
// face built. Marks (sensitive) travel by name; whether a marked value may
// travel at all is the carrier's decision.
type JSON struct {
	Source string               `json:"source,omitempty"`
	Order  []string             `json:"order"`
	Hosts  map[string]JSONHost  `json:"hosts"`
	Groups map[string]JSONGroup `json:"groups"`
}

// JSONHost is a Host in JSON.
type JSONHost struct {
	Vars   map[string]JSONVar `json:"vars,omitempty"`
	Groups []string           `json:"groups,omitempty"`
}

// JSONGroup is a Group in JSON.
type JSONGroup struct {
	Hosts    []string           `json:"hosts,omitempty"`
	Children []string           `json:"children,omitempty"`
	Vars     map[string]JSONVar `json:"vars,omitempty"`
}

// JSONVar is a variable's value with its type (cty's JSON forms) and the
// marks the value carried, by name.
type JSONVar struct {
	Type  json.RawMessage `json:"type"`
	Value json.RawMessage `json:"value"`
	Marks []string        `json:"marks,omitempty"`
}

// ToJSON is inv in JSON. A value marked other than by a string name, or
// marked inside (an element of a list), cannot be written.
func ToJSON(inv *Inventory) (*JSON, error) {
	out := &JSON{Source: inv.Source, Order: slices.Clone(inv.Order), Hosts: map[string]JSONHost{}, Groups: map[string]JSONGroup{}}
	for name, h := range inv.Hosts {
		vars, err := varsToJSON(h.Vars)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
		out.Hosts[name] = JSONHost{Vars: vars, Groups: slices.Clone(h.Groups)}
	}
	for name, g := range inv.Groups {
		vars, err := varsToJSON(g.Vars)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", name, err)
		}
		out.Groups[name] = JSONGroup{Hosts: slices.Clone(g.Hosts), Children: slices.Clone(g.Children), Vars: vars}
	}
	return out, nil
}

func varsToJSON(vars map[string]Var) (map[string]JSONVar, error) {
	if len(vars) == 0 {
		return nil, nil
	}
	out := map[string]JSONVar{}
	for name, v := range vars {
		jv, err := varToJSON(v.Value)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", name, err)
		}
		out[name] = jv
	}
	return out, nil
}

func varToJSON(v cty.Value) (JSONVar, error) {
	val, marks := v.Unmark()
	var names []string
	for m := range marks {
		s, ok := m.(string)
		if !ok {
			return JSONVar{}, fmt.Errorf("a mark %v that has no name", m)
		}
		names = append(names, s)
	}
	slices.Sort(names)
	if val.ContainsMarked() {
		return JSONVar{}, errors.New("a value marked inside (an element, not the whole value)")
	}
	typ, err := ctyjson.MarshalType(val.Type())
	if err != nil {
		return JSONVar{}, err
	}
	data, err := ctyjson.Marshal(val, val.Type())
	if err != nil {
		return JSONVar{}, err
	}
	return JSONVar{Type: typ, Value: data, Marks: names}, nil
}

// Inventory rebuilds the inventory j describes. It refuses one that is not
// whole: a host listed in Order but not described or the other way round,
// a group or host named but missing, the groups "all" and "ungrouped"
// missing, a value that is not of its type. Errors name the host, group
// and variable.
func (j *JSON) Inventory() (*Inventory, error) {
	if err := j.check(); err != nil {
		return nil, err
	}
	inv := &Inventory{Source: j.Source, Order: slices.Clone(j.Order), Hosts: map[string]*Host{}, Groups: map[string]*Group{}}
	for name, h := range j.Hosts {
		vars, err := varsFromJSON(h.Vars)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
		inv.Hosts[name] = &Host{Name: name, Vars: vars, Groups: slices.Clone(h.Groups)}
	}
	for name, g := range j.Groups {
		vars, err := varsFromJSON(g.Vars)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", name, err)
		}
		inv.Groups[name] = &Group{Name: name, Hosts: slices.Clone(g.Hosts), Children: slices.Clone(g.Children), Vars: vars}
	}
	return inv, nil
}

// check refuses an inventory that is not whole (Inventory).
func (j *JSON) check() error {
	for _, g := range []string{groupAll, groupUngrouped} {
		if _, ok := j.Groups[g]; !ok {
			return fmt.Errorf("no group %q (every inventory has it)", g)
		}
	}
	seen := map[string]bool{}
	for _, name := range j.Order {
		if _, ok := j.Hosts[name]; !ok {
			return fmt.Errorf("order: host %q is not among the hosts", name)
		}
		if seen[name] {
			return fmt.Errorf("order: host %q is listed twice", name)
		}
		seen[name] = true
	}
	for name, h := range j.Hosts {
		if !seen[name] {
			return fmt.Errorf("host %s is not in the order", name)
		}
		if err := j.known(h.Groups, j.hasGroup); err != nil {
			return fmt.Errorf("host %s: groups: %w", name, err)
		}
	}
	for name, g := range j.Groups {
		if err := j.known(g.Hosts, j.hasHost); err != nil {
			return fmt.Errorf("group %s: hosts: %w", name, err)
		}
		if err := j.known(g.Children, j.hasGroup); err != nil {
			return fmt.Errorf("group %s: children: %w", name, err)
		}
	}
	return nil
}

func (j *JSON) hasGroup(name string) bool { _, ok := j.Groups[name]; return ok }
func (j *JSON) hasHost(name string) bool  { _, ok := j.Hosts[name]; return ok }

func (j *JSON) known(names []string, has func(string) bool) error {
	for _, n := range names {
		if !has(n) {
			return fmt.Errorf("%q is not described", n)
		}
	}
	return nil
}

func varsFromJSON(vars map[string]JSONVar) (map[string]Var, error) {
	out := map[string]Var{}
	for name, v := range vars {
		val, err := v.value()
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", name, err)
		}
		out[name] = Var{Value: val}
	}
	return out, nil
}

func (v JSONVar) value() (cty.Value, error) {
	typ, err := ctyjson.UnmarshalType(v.Type)
	if err != nil {
		return cty.NilVal, fmt.Errorf("type: %w", err)
	}
	val, err := ctyjson.Unmarshal(v.Value, typ)
	if err != nil {
		return cty.NilVal, fmt.Errorf("value: %w", err)
	}
	for _, m := range v.Marks {
		val = val.Mark(m)
	}
	return val, nil
}
