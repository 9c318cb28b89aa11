// Package inventory reads Ansible-style inventories (INI, YAML, wsu's own
// HCL form, a BYOH windows-instances ConfigMap's data, or an inline
// comma-separated host list), resolves host patterns and merges variables the
// way Ansible does, so an existing Ansible inventory works unchanged.
//
// Every variable keeps the hcl.Range it was set at, and every problem in the
// input is an hcl.Diagnostic pointing at file:line:col.
package inventory

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/limits"
)

// Var is one inventory variable with where it was set (for located errors).
type Var struct {
	Value cty.Value
	Range hcl.Range
}

// Host is one inventory host.
type Host struct {
	Name string
	Vars map[string]Var
	// Groups are the direct groups, in order of appearance. "all" is implicit
	// for every host and never listed; "ungrouped" is listed for hosts that
	// have no other group.
	Groups []string
	Range  hcl.Range // where the host first appeared
}

// Group is one inventory group.
type Group struct {
	Name     string
	Hosts    []string // direct members in order of appearance; "all" lists every host
	Children []string // direct child groups in order of appearance
	Vars     map[string]Var
	Range    hcl.Range // where the group first appeared
}

// Inventory is a parsed inventory.
type Inventory struct {
	Source string // file name, or "" for an inline list
	Hosts  map[string]*Host
	Order  []string          // host names in first-appearance order
	Groups map[string]*Group // always contains "all" and "ungrouped" (Ansible semantics)
}

const (
	groupAll       = "all"
	groupUngrouped = "ungrouped"
)

// Load reads an inventory from a file, or treats arg as an inline host list
// ("win01,win02" or "localhost,") when it contains a comma and is not a file.
func Load(arg string) (*Inventory, hcl.Diagnostics) {
	return LoadFrom(arg, nil)
}

// LoadFrom is Load reading the file through files (once per run: an
// inventory may be a pipe, -i <(...), whose text the run quotes later).
func LoadFrom(arg string, files *limits.Files) (*Inventory, hcl.Diagnostics) {
	fi, err := os.Stat(arg)
	switch {
	case err == nil && fi.IsDir():
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Inventory is a directory",
			Detail:   fmt.Sprintf("%q is a directory; give the path of an INI, YAML or HCL inventory file.", arg),
		}}
	case err == nil:
		src, err := files.Read(arg)
		if err != nil {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Cannot read inventory",
				Detail:   err.Error(),
			}}
		}
		switch formatOf(arg, src) {
		case formatYAML:
			return ParseYAML(arg, src)
		case formatHCL:
			return ParseHCL(arg, src)
		}
		return ParseINI(arg, src)
	case strings.Contains(arg, ","):
		return ParseList(arg)
	case errors.Is(err, fs.ErrNotExist):
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Inventory not found",
			Detail: fmt.Sprintf("There is no file named %q. To list hosts inline, separate them with commas; "+
				"a single host needs a trailing comma, e.g. %q.", arg, arg+","),
		}}
	default:
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read inventory",
			Detail:   err.Error(),
		}}
	}
}

type format int

const (
	formatINI format = iota
	formatYAML
	formatHCL
)

// hclBlockRe is how an HCL inventory's first block starts.
var hclBlockRe = regexp.MustCompile(`^(group|host)\s+"[^"]*"\s*\{`)

// formatOf picks the parser: by extension first, then by content, since
// Ansible users often name YAML inventories "hosts" or "inventory".
func formatOf(name string, src []byte) format {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yml", ".yaml", ".json":
		return formatYAML
	case ".ini", ".cfg":
		return formatINI
	case ".hcl": // also inventory.wsu.hcl
		return formatHCL
	}
	for _, line := range strings.Split(strings.TrimPrefix(string(src), string(utf8BOM)), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "//") || strings.HasPrefix(line, "/*") || hclBlockRe.MatchString(line) {
			return formatHCL
		}
		if line == "---" || line[0] == '{' {
			return formatYAML
		}
		if line[0] == '[' || strings.Contains(line, "=") {
			return formatINI
		}
		// "all:" or "name: value"; an INI "host:2222" has no space after ':'.
		if i := strings.IndexByte(line, ':'); i > 0 && (i == len(line)-1 || line[i+1] == ' ' || line[i+1] == '\t') {
			return formatYAML
		}
		return formatINI
	}
	return formatINI
}

// FromList is ParseList for a list known to be valid (errors dropped).
func FromList(list string) *Inventory {
	inv, _ := ParseList(list)
	return inv
}

// ParseList builds an inventory from an inline list such as "win01,win02,"
// or "localhost,". "name:port" sets ansible_port. An entry with a range,
// win[1:3] or win[01:10:2], is expanded as in an INI or YAML inventory
// (Ansible's advanced_host_list); a range that cannot be expanded is an
// error naming the entry. Other names are taken literally (an IPv6
// address keeps its colons).
func ParseList(list string) (*Inventory, hcl.Diagnostics) {
	b := newBuilder("", nil)
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if strings.ContainsAny(name, "[]") {
			hp, perr := expandHostPattern(name)
			if perr == nil {
				if bad := firstBadHost(hp.names); bad != "" {
					perr = &patternError{summary: "Invalid host name", detail: fmt.Sprintf("%q cannot be a host name: %s.", bad, badName(bad, true))}
				}
			}
			if perr != nil {
				b.diags = append(b.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: perr.summary,
					Detail: fmt.Sprintf("In the inline host list -i %q, entry %q: %s", list, name, perr.detail)})
				continue
			}
			if !b.room(len(hp.names), hcl.Range{}) {
				break
			}
			for _, n := range hp.names {
				b.listHost(n, hp.port)
			}
			continue
		}
		var port string
		if i := strings.IndexByte(name, ':'); i > 0 && strings.Count(name, ":") == 1 && isDigits(name[i+1:]) {
			name, port = name[:i], name[i+1:]
		}
		b.listHost(name, port)
	}
	return b.finish()
}

// listHost adds an inline list's host, ungrouped, with its port if any.
func (b *builder) listHost(name, port string) {
	h := b.host(name, hcl.Range{})
	if port != "" {
		h.Vars["ansible_port"] = Var{Value: cty.StringVal(port)}
	}
	b.addHost(groupUngrouped, name)
}

// Local is the one-host inventory of `--local`: the host "localhost" in
// the given groups (the CLI gives "windows", the group every stock playbook
// targets, so `wsu apply join --local` finds its host).
func Local(groups ...string) *Inventory {
	b := newBuilder("", nil)
	b.host("localhost", hcl.Range{})
	for _, g := range groups {
		b.group(g, hcl.Range{})
		b.addHost(g, "localhost")
	}
	inv, _ := b.finish()
	return inv
}

// builder accumulates hosts, groups and diagnostics for both parsers and
// applies the shared post-processing (cycles, "ungrouped", "all").
type builder struct {
	inv        *Inventory
	file       *srcFile
	diags      hcl.Diagnostics
	groupOrder []string
	edgeRange  map[[2]string]hcl.Range // parent/child -> where the child was named
	member     map[[2]string]bool      // group/host membership, for dedup
	full       bool                    // maxHosts reached and reported
}

func newBuilder(filename string, src []byte) *builder {
	b := &builder{
		inv: &Inventory{
			Source: filename,
			Hosts:  map[string]*Host{},
			Groups: map[string]*Group{},
		},
		file:      newSrcFile(filename, src),
		edgeRange: map[[2]string]hcl.Range{},
		member:    map[[2]string]bool{},
	}
	start := hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos}
	if filename == "" {
		start = hcl.Range{}
	}
	b.group(groupAll, start)
	b.group(groupUngrouped, start)
	return b
}

func (b *builder) errorf(rng hcl.Range, summary, detail string, args ...any) {
	r := rng
	b.diags = append(b.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(detail, args...),
		Subject:  &r,
	})
}

func (b *builder) group(name string, rng hcl.Range) *Group {
	g := b.inv.Groups[name]
	if g == nil {
		g = &Group{Name: name, Vars: map[string]Var{}, Range: rng}
		b.inv.Groups[name] = g
		b.groupOrder = append(b.groupOrder, name)
	}
	return g
}

// maxHosts bounds a whole inventory, so a file of a few range lines cannot
// exhaust memory.
const maxHosts = 100000

// room reports whether n more hosts fit, reporting the overflow once.
func (b *builder) room(n int, rng hcl.Range) bool {
	if len(b.inv.Order)+n <= maxHosts {
		return true
	}
	if !b.full {
		b.full = true
		b.errorf(rng, "Too many hosts", "The inventory has more than %d hosts; the rest are ignored.", maxHosts)
	}
	return false
}

func (b *builder) host(name string, rng hcl.Range) *Host {
	h := b.inv.Hosts[name]
	if h == nil {
		h = &Host{Name: name, Vars: map[string]Var{}, Range: rng}
		b.inv.Hosts[name] = h
		b.inv.Order = append(b.inv.Order, name)
	}
	return h
}

// addHost makes host a direct member of group. Membership of "all" is
// implicit for every host, so it is not recorded.
func (b *builder) addHost(group, host string) {
	if group == groupAll || b.member[[2]string{group, host}] {
		return
	}
	b.member[[2]string{group, host}] = true
	g := b.inv.Groups[group]
	g.Hosts = append(g.Hosts, host)
	h := b.inv.Hosts[host]
	h.Groups = append(h.Groups, group)
}

// addChild records child under parent, creating child if it is new.
func (b *builder) addChild(parent, child string, rng hcl.Range) {
	b.group(child, rng)
	key := [2]string{parent, child}
	if _, ok := b.edgeRange[key]; ok {
		return
	}
	b.edgeRange[key] = rng
	g := b.inv.Groups[parent]
	g.Children = append(g.Children, child)
}

func (b *builder) finish() (*Inventory, hcl.Diagnostics) {
	b.breakCycles()
	inv := b.inv

	// Ansible: a host whose only group is "all" belongs to "ungrouped", and a
	// host with a real group is taken out of "ungrouped".
	ung := inv.Groups[groupUngrouped]
	leave := map[string]bool{}
	for _, name := range inv.Order {
		h := inv.Hosts[name]
		other := 0
		for _, g := range h.Groups {
			if g != groupUngrouped {
				other++
			}
		}
		switch {
		case other == 0:
			b.addHost(groupUngrouped, name)
		case other < len(h.Groups):
			h.Groups = without(h.Groups, groupUngrouped)
			leave[name] = true
		}
	}
	if len(leave) > 0 { // one pass: inventories can hold many thousands of hosts
		var keep []string
		for _, name := range ung.Hosts {
			if !leave[name] {
				keep = append(keep, name)
			}
		}
		ung.Hosts = keep
	}

	// Every group without another parent hangs directly under "all".
	parents := inv.parents()
	all := inv.Groups[groupAll]
	top := map[string]bool{}
	for _, c := range all.Children {
		top[c] = true
	}
	for _, name := range b.groupOrder {
		if name != groupAll && len(parents[name]) == 0 && !top[name] {
			all.Children = append(all.Children, name)
		}
	}
	all.Hosts = append([]string(nil), inv.Order...)
	return inv, b.diags
}

// breakCycles reports every children edge that makes a group its own
// ancestor and drops it, so later graph walks always terminate.
func (b *builder) breakCycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		color[name] = grey
		stack = append(stack, name)
		g := b.inv.Groups[name]
		for i := 0; i < len(g.Children); i++ {
			child := g.Children[i]
			switch color[child] {
			case grey:
				// Show the loop from the repeated group back to itself.
				var path []string
				for j := len(stack) - 1; j >= 0; j-- {
					if stack[j] == child {
						path = append(path, stack[j:]...)
						break
					}
				}
				path = append(path, child)
				b.errorf(b.edgeRange[[2]string{name, child}], "Group is its own ancestor",
					"Adding %q as a child of %q creates a loop: %s. A group cannot contain itself, directly or through its children.",
					child, name, strings.Join(path, " -> "))
				g.Children = append(g.Children[:i:i], g.Children[i+1:]...)
				i--
			case white:
				visit(child)
			}
		}
		stack = stack[:len(stack)-1]
		color[name] = black
	}
	for _, name := range b.groupOrder {
		if color[name] == white {
			visit(name)
		}
	}
}

// parents maps each group to its direct parents (excluding "all").
func (inv *Inventory) parents() map[string][]string {
	p := map[string][]string{}
	for _, name := range sortedKeys(inv.Groups) {
		if name == groupAll {
			continue
		}
		for _, child := range inv.Groups[name].Children {
			p[child] = append(p[child], name)
		}
	}
	return p
}

// GroupNames returns every group the host belongs to, directly (Host.Groups)
// or through parent groups, including "all", sorted. Unknown hosts give nil.
func (inv *Inventory) GroupNames(host string) []string {
	h := inv.Hosts[host]
	if h == nil {
		return nil
	}
	parents := inv.parents()
	seen := map[string]bool{groupAll: true}
	var walk func(string)
	walk = func(g string) {
		if seen[g] {
			return
		}
		seen[g] = true
		for _, p := range parents[g] {
			walk(p)
		}
	}
	for _, g := range h.Groups {
		walk(g)
	}
	return sortedKeys(seen)
}

// HostVars merges a host's variables in Ansible's order, lowest first:
// "all", then the host's other groups by depth (parents before children)
// then ansible_group_priority then name, then the host's own vars.
func (inv *Inventory) HostVars(name string) map[string]Var {
	h := inv.Hosts[name]
	if h == nil {
		return nil
	}
	depth := inv.depths()
	groups := inv.GroupNames(name)
	sort.SliceStable(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if depth[a] != depth[b] {
			return depth[a] < depth[b]
		}
		pa, pb := inv.priority(a), inv.priority(b)
		if pa != pb {
			return pa < pb
		}
		return a < b
	})
	out := map[string]Var{}
	for _, g := range groups {
		if grp := inv.Groups[g]; grp != nil {
			for k, v := range grp.Vars {
				out[k] = v
			}
		}
	}
	for k, v := range h.Vars {
		out[k] = v
	}
	return out
}

// depths gives each group its longest distance from "all" (Ansible's
// Group.depth): top-level groups are 1, their children 2, and so on.
func (inv *Inventory) depths() map[string]int {
	parents := inv.parents()
	depth := map[string]int{groupAll: 0}
	onStack := map[string]bool{}
	var calc func(string) int
	calc = func(g string) int {
		if d, ok := depth[g]; ok {
			return d
		}
		if onStack[g] { // only a hand-built cyclic Inventory gets here
			return 1
		}
		onStack[g] = true
		d := 1
		for _, p := range parents[g] {
			if pd := calc(p) + 1; pd > d {
				d = pd
			}
		}
		onStack[g] = false
		depth[g] = d
		return d
	}
	for name := range inv.Groups {
		calc(name)
	}
	return depth
}

// priority reads ansible_group_priority (default 1), which Ansible uses to
// order groups of the same depth before falling back to the name.
func (inv *Inventory) priority(group string) int {
	g := inv.Groups[group]
	if g == nil {
		return 1
	}
	v, ok := g.Vars["ansible_group_priority"]
	if !ok || v.Value.IsNull() || !v.Value.IsKnown() {
		return 1
	}
	switch v.Value.Type() {
	case cty.Number:
		// Int64 saturates, so absurd priorities still sort sensibly.
		i, _ := v.Value.AsBigFloat().Int64()
		return int(i)
	case cty.String:
		if i, err := strconv.Atoi(strings.TrimSpace(v.Value.AsString())); err == nil {
			return i
		}
	}
	return 1
}

// badName explains why s cannot name a group (or, with host set, a host), or
// returns "". Characters with a meaning in host patterns are refused because
// such a group or host could never be selected.
func badName(s string, host bool) string {
	if s == "" {
		return "it is empty"
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "it contains a space or control character"
		}
	}
	special := ":,[]*?"
	if host {
		special = ",*?" // ':' appears in IPv6 addresses; ranges are already expanded
	}
	if strings.ContainsAny(s, special) || strings.ContainsAny(s[:1], "!&~") {
		return fmt.Sprintf("it contains one of %s or starts with !, & or ~, which have a meaning in host patterns", special)
	}
	return ""
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func without(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
