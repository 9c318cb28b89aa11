package inventory

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/limits"
)

var (
	hclRootSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "group", LabelNames: []string{"name"}},
		{Type: "host", LabelNames: []string{"name"}},
	}}
	hclGroupSchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "vars"}, {Name: "hosts"}, {Name: "children"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "host", LabelNames: []string{"name"}}},
	}
)

type hclParser struct {
	b      *builder
	f      *srcFile
	groups map[string]*hcl.Block // the one block of each declared group
	// member records where each host joined each group, so a host listed
	// twice in one group is reported with the first place.
	member map[[2]string]hcl.Range
	// hostBlock records each host block label, so a host defined twice is
	// reported rather than silently merged.
	hostBlock map[string]hcl.Range
}

// ParseHCL parses wsu's own HCL inventory:
//
//	group "windows" {
//	  vars     = { ansible_user = "Administrator", connection = "ssh" }
//	  hosts    = ["win[02:10].example.com"]    # members, ranges as in INI
//	  children = ["gpu"]                       # groups declared in this file
//	  host "win01" {                           # a member with its own variables
//	    ansible_host = "10.0.0.11"
//	  }
//	}
//	group "gpu" { hosts = ["win04"] }
//	host "win04" { gpu_driver = "535.104" }    # variables only: membership comes from groups
//
// The model is Ansible's: a host block's attributes are its variables, a
// group's vars are group variables ("all" holds variables for every host),
// and a host belongs to the groups whose block holds it or lists it in hosts.
// Values are HCL expressions without references or function calls: strings,
// numbers, bools, lists and objects, which keep their types as in YAML.
func ParseHCL(filename string, src []byte) (*Inventory, hcl.Diagnostics) {
	b := newBuilder(filename, src)
	p := &hclParser{b: b, f: b.file, groups: map[string]*hcl.Block{}, member: map[[2]string]hcl.Range{}, hostBlock: map[string]hcl.Range{}}

	// Notepad writes a BOM, which the HCL scanner would reject; parse after
	// it with byte offsets that still count it.
	start := hcl.InitialPos
	body := src
	if len(src) >= 3 && string(src[:3]) == string(utf8BOM) {
		start.Byte, body = 3, src[3:]
	}
	if diags := limits.CheckConfig(body, filename, start); diags.HasErrors() {
		b.diags = append(b.diags, diags...)
		return b.finish()
	}
	file, diags := hclsyntax.ParseConfig(body, filename, start)
	if diags.HasErrors() {
		b.diags = append(b.diags, diags...)
		return b.finish() // a syntax error would only cascade
	}
	content, diags := file.Body.Content(hclRootSchema)
	for _, d := range diags {
		if d.Summary == "Unsupported argument" {
			d.Detail += ` Variables for every host go in group "all": group "all" { vars = { ... } }.`
		}
	}
	b.diags = append(b.diags, diags...)

	// Declare every group first, so children may name a group defined
	// further down.
	for _, blk := range content.Blocks {
		if blk.Type != "group" {
			continue
		}
		name, rng := blk.Labels[0], blk.LabelRanges[0]
		if why := badName(name, false); why != "" {
			b.errorf(rng, "Invalid group name", "%q cannot be a group name: %s.", name, why)
			continue
		}
		if first, dup := p.groups[name]; dup {
			b.errorf(rng, "Duplicate group", "Group %q is already defined at line %d; put everything about a group in one block.",
				name, first.LabelRanges[0].Start.Line)
			continue
		}
		p.groups[name] = blk
		b.group(name, rng)
	}
	for _, blk := range content.Blocks {
		switch blk.Type {
		case "group":
			if p.groups[blk.Labels[0]] == blk {
				p.group(blk)
			}
		case "host":
			p.host(blk, "")
		}
	}
	return b.finish()
}

// group reads one group block's body.
func (p *hclParser) group(blk *hcl.Block) {
	name := blk.Labels[0]
	content, diags := blk.Body.Content(hclGroupSchema)
	p.b.diags = append(p.b.diags, diags...)
	if a := content.Attributes["vars"]; a != nil {
		p.vars(p.b.inv.Groups[name].Vars, a.Expr, fmt.Sprintf("group %q", name))
	}
	// Hosts join in the order they are written, whether listed or in blocks.
	type item struct {
		at  int
		add func()
	}
	var items []item
	if a := content.Attributes["hosts"]; a != nil {
		items = append(items, item{a.Range.Start.Byte, func() { p.hostList(name, a.Expr) }})
	}
	for _, hb := range content.Blocks {
		items = append(items, item{hb.DefRange.Start.Byte, func() { p.host(hb, name) }})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].at < items[j].at })
	for _, it := range items {
		it.add()
	}
	if a := content.Attributes["children"]; a != nil {
		p.children(name, a.Expr)
	}
}

// hostList adds the hosts of a group's hosts attribute.
func (p *hclParser) hostList(group string, expr hcl.Expression) {
	elems, diags := hcl.ExprList(expr)
	if diags.HasErrors() {
		p.b.errorf(expr.Range(), "Invalid hosts", `hosts must be a list of host names or patterns, e.g. hosts = ["win01", "win[02:10].example.com"].`)
		return
	}
	for _, e := range elems {
		pattern, ok := p.str(e, "host name")
		if !ok {
			continue
		}
		names, ok := p.expand(pattern, e.Range())
		if !ok {
			continue
		}
		if !p.join(group, names, e.Range()) {
			return
		}
	}
}

// host reads a host block; group is "" for a top-level block, which sets
// variables without making the host a member of any group.
func (p *hclParser) host(blk *hcl.Block, group string) {
	label, rng := blk.Labels[0], blk.LabelRanges[0]
	attrs, diags := blk.Body.JustAttributes()
	p.b.diags = append(p.b.diags, diags...)
	if first, dup := p.hostBlock[label]; dup {
		p.b.errorf(rng, "Duplicate host block",
			"Host %q already has a block at line %d. Give all its variables in that one block; to put it in another group too, list it in that group's hosts.",
			label, first.Start.Line)
		return
	}
	p.hostBlock[label] = rng
	vars := map[string]Var{}
	for _, name := range sortedKeys(attrs) {
		a := attrs[name]
		switch name {
		case "vars":
			p.b.errorf(a.NameRange, "Unexpected vars in host block",
				"A host's variables are the attributes of its block, e.g.\n\nhost %q {\n  ansible_host = \"10.0.0.11\"\n}", label)
			continue
		case "groups":
			p.b.errorf(a.NameRange, "Unexpected groups in host block",
				"A host joins a group by being listed in the group's hosts or by having its block inside the group's block, e.g. group \"windows\" { hosts = [%q] }.", label)
			continue
		}
		v, d := a.Expr.Value(nil)
		p.b.diags = append(p.b.diags, d...)
		if !d.HasErrors() {
			vars[name] = Var{v, a.Expr.Range()}
		}
	}
	names, ok := p.expand(label, rng)
	if !ok {
		return
	}
	if group != "" {
		if !p.join(group, names, rng) {
			return
		}
	} else if !p.b.room(len(names), rng) {
		return
	}
	for _, name := range names {
		h := p.b.host(name, rng)
		for k, v := range vars {
			h.Vars[k] = v
		}
	}
}

// expand expands a host pattern written at rng (a quoted string), locating
// any error inside it.
func (p *hclParser) expand(pattern string, rng hcl.Range) ([]string, bool) {
	if pattern == "" {
		p.b.errorf(rng, "Invalid host name", "A host name cannot be empty.")
		return nil, false
	}
	hp, perr := expandHostPattern(pattern)
	if perr != nil {
		p.b.errorf(p.within(rng, pattern, perr.start, perr.end), perr.summary, "%s", perr.detail)
		return nil, false
	}
	if hp.port != "" {
		p.b.errorf(p.within(rng, pattern, hp.portStart-1, len(pattern)), "Port in host name",
			"Set the port as a variable instead: host %q { ansible_port = %s }, or ansible_port in the group's vars.",
			strings.TrimSuffix(pattern, ":"+hp.port), hp.port)
		return nil, false
	}
	if bad := firstBadHost(hp.names); bad != "" {
		p.b.errorf(rng, "Invalid host name", "%q cannot be a host name: %s.", bad, badName(bad, true))
		return nil, false
	}
	return hp.names, true
}

// join makes names members of group; false once the inventory is full.
func (p *hclParser) join(group string, names []string, rng hcl.Range) bool {
	if !p.b.room(len(names), rng) {
		return false
	}
	reported := false
	for _, name := range names {
		key := [2]string{group, name}
		if first, dup := p.member[key]; dup {
			if !reported { // one report per entry, however many a range repeats
				reported = true
				p.b.errorf(rng, "Duplicate host in group", "Host %q is already in group %q (line %d, column %d). List each host once per group.",
					name, group, first.Start.Line, first.Start.Column)
			}
			continue
		}
		p.member[key] = rng
		p.b.host(name, rng)
		p.b.addHost(group, name)
	}
	return true
}

// children adds a group's child groups, which must be declared in the file.
func (p *hclParser) children(group string, expr hcl.Expression) {
	elems, diags := hcl.ExprList(expr)
	if diags.HasErrors() {
		p.b.errorf(expr.Range(), "Invalid children", `children must be a list of group names, e.g. children = ["linux", "windows"].`)
		return
	}
	seen := map[string]hcl.Range{}
	for _, e := range elems {
		name, ok := p.str(e, "group name")
		if !ok {
			continue
		}
		rng := e.Range()
		switch first, dup := seen[name]; {
		case name == groupAll:
			p.b.errorf(rng, "Invalid child group", "\"all\" cannot be a child of %q; it already contains every group.", group)
		case dup:
			p.b.errorf(rng, "Duplicate child group", "%q is already a child of %q (line %d).", name, group, first.Start.Line)
		case p.groups[name] == nil:
			hint := ""
			if s := closest(name, sortedKeys(p.groups)); s != "" {
				hint = fmt.Sprintf(" Did you mean %q?", s)
			}
			p.b.errorf(rng, "Unknown group", "Group %q names a child group %q, but no group %q is defined in this file. Add a group %q {} block (it may be empty) or fix the name.%s",
				group, name, name, name, hint)
		default:
			seen[name] = rng
			p.b.addChild(group, name, rng)
		}
	}
}

// vars stores an object of name = value into dst; owner names the group.
func (p *hclParser) vars(dst map[string]Var, expr hcl.Expression, owner string) {
	pairs, diags := hcl.ExprMap(expr)
	if diags.HasErrors() {
		// Not an object constructor: null is "no variables", anything else
		// is a mistake.
		v, d := expr.Value(nil)
		p.b.diags = append(p.b.diags, d...)
		if d.HasErrors() || v.IsNull() {
			return
		}
		if !v.Type().IsObjectType() && !v.Type().IsMapType() {
			p.b.errorf(expr.Range(), "Invalid vars", "The vars of %s must be an object of name = value, e.g. vars = { ansible_user = \"Administrator\" }.", owner)
			return
		}
		for it := v.ElementIterator(); it.Next(); {
			k, val := it.Element()
			dst[k.AsString()] = Var{val, expr.Range()}
		}
		return
	}
	seen := map[string]hcl.Range{}
	for _, kv := range pairs {
		name, ok := p.str(kv.Key, "variable name")
		if !ok {
			continue
		}
		if first, dup := seen[name]; dup {
			p.b.errorf(kv.Key.Range(), "Duplicate variable", "%q is already set at line %d in the vars of %s.", name, first.Start.Line, owner)
			continue
		}
		seen[name] = kv.Key.Range()
		v, d := kv.Value.Value(nil)
		p.b.diags = append(p.b.diags, d...)
		if !d.HasErrors() {
			dst[name] = Var{v, kv.Value.Range()}
		}
	}
}

// str evaluates a static string: a host or group name, or a key.
func (p *hclParser) str(e hcl.Expression, what string) (string, bool) {
	v, d := e.Value(nil)
	p.b.diags = append(p.b.diags, d...)
	if d.HasErrors() {
		return "", false
	}
	if v.IsNull() || v.Type() != cty.String {
		p.b.errorf(e.Range(), "Invalid "+what, "A %s must be a string, e.g. \"win01\".", what)
		return "", false
	}
	return v.AsString(), true
}

// within narrows rng, where the quoted string text is written, to the bytes
// [start, end) of text; when the source differs from the text (escapes,
// templates) the whole of rng is the best there is.
func (p *hclParser) within(rng hcl.Range, text string, start, end int) hcl.Range {
	lo, hi := rng.Start.Byte, rng.End.Byte
	if lo < 0 || hi > len(p.f.src) || hi-lo != len(text)+2 || string(p.f.src[lo+1:hi-1]) != text {
		return rng
	}
	return p.f.rng(lo+1+start, lo+1+end)
}
