package inventory

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"gopkg.in/yaml.v3"

	"github.com/wsu-project/wsu/limits"
)

// yamlNodeBudget caps how many nodes one parse may visit, because aliases
// can make a small file expand exponentially ("billion laughs").
const yamlNodeBudget = 1 << 20

type yamlParser struct {
	b        *builder
	f        *srcFile
	budget   int
	overrun  bool
	aliasing map[*yaml.Node]bool // aliases being expanded, to stop self-reference
}

// ParseYAML parses an Ansible YAML (or JSON) inventory:
//
//	all:
//	  hosts: {win01: {ansible_host: 10.0.0.1}}
//	  vars: {ansible_user: admin}
//	  children:
//	    windows: {hosts: {win[01:03]: }, vars: {...}, children: {...}}
//
// Values keep their YAML types: strings, numbers, bools, lists (tuples) and
// mappings (objects).
func ParseYAML(filename string, src []byte) (*Inventory, hcl.Diagnostics) {
	b := newBuilder(filename, src)
	p := &yamlParser{b: b, f: b.file, budget: yamlNodeBudget, aliasing: map[*yaml.Node]bool{}}

	if diags := limits.CheckYAML(src, filename); diags.HasErrors() {
		b.diags = append(b.diags, diags...)
		return b.finish()
	}
	var doc yaml.Node
	if err := safeUnmarshal(src, &doc); err != nil {
		p.syntaxError(err)
		return b.finish()
	}
	if len(doc.Content) == 0 {
		return b.finish() // empty file: empty inventory
	}
	root, leave := p.enter(doc.Content[0])
	defer leave()
	if root == nil || isNull(root) {
		return b.finish()
	}
	if root.Kind != yaml.MappingNode {
		p.shapeError(root, "Inventory must be a mapping",
			"The top level of a YAML inventory maps group names to groups, e.g.\n\nall:\n  hosts:\n    win01:\n")
		return b.finish()
	}
	if p.manifest(root) {
		return b.finish()
	}
	for _, kv := range p.pairs(root) {
		name, ok := p.name(kv[0], "group")
		if !ok {
			continue
		}
		if name == "plugin" {
			p.shapeError(kv[0], "Inventory plugins are not supported",
				"This file configures an Ansible inventory plugin; give a static INI or YAML inventory instead.")
			continue
		}
		p.group(name, "", kv[0], kv[1])
	}
	return b.finish()
}

// safeUnmarshal turns a parser panic into an error: a malformed inventory
// must never take the whole run down.
func safeUnmarshal(src []byte, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return yaml.Unmarshal(src, n)
}

var yamlLineRe = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

var unknownAnchorRe = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)

// yamlLocateBudget bounds the bytes re-parsed while locating a syntax error.
const yamlLocateBudget = 32 << 20

func (p *yamlParser) syntaxError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		msg = m[2]
		if m[1] != "" {
			line, _ = strconv.Atoi(m[1])
		}
	}
	rng := p.f.rngLC(line, 1, 0)
	if off, ok := p.locate(msg); ok {
		rng = p.f.rng(off, off)
		// The prefix search stops at the alias's last letter; point at '*'.
		if m := unknownAnchorRe.FindStringSubmatch(msg); m != nil {
			alias := "*" + m[1]
			lo := max(0, off-len(alias)+1)
			if i := strings.LastIndex(string(p.f.src[lo:off+1]), alias); i >= 0 {
				rng = p.f.rng(lo+i, lo+i+len(alias))
			}
		}
	}
	hint := ""
	switch {
	case strings.Contains(msg, "expected key"), strings.Contains(msg, "mapping values are not allowed"),
		strings.Contains(msg, "expected '-' indicator"):
		hint = " Check the indentation: keys of one mapping must start in the same column."
	case strings.Contains(msg, "cannot start any token") && rng.Start.Byte < len(p.f.src) && p.f.src[rng.Start.Byte] == '\t':
		hint = " YAML must be indented with spaces, not tabs."
	}
	p.b.errorf(rng, "Invalid YAML", "The inventory is not valid YAML: %s.%s", msg, hint)
}

// locate finds where a syntax error is. yaml.v3 often reports the line where
// the enclosing block began (or no line at all), so re-parse growing prefixes
// of the source: the first prefix failing with the same message ends at the
// offending character. Returns its byte offset.
func (p *yamlParser) locate(msg string) (int, bool) {
	src := p.f.src
	spent := 0
	fails := func(n int) bool {
		spent += n
		var node yaml.Node
		err := safeUnmarshal(src[:n], &node)
		if err == nil {
			return false
		}
		m := yamlLineRe.FindStringSubmatch(err.Error())
		return m != nil && m[2] == msg
	}
	for i, start := range p.f.lines {
		end := len(src)
		if i+1 < len(p.f.lines) {
			end = p.f.lines[i+1]
		}
		if spent+end > yamlLocateBudget {
			return 0, false
		}
		if !fails(end) {
			continue
		}
		for c := start; c < end; {
			_, size := utf8.DecodeRune(src[c:])
			if spent+c > yamlLocateBudget {
				break
			}
			if fails(c + size) {
				return c, true
			}
			c += size
		}
		return start, true
	}
	return 0, false
}

func (p *yamlParser) rng(n *yaml.Node) hcl.Range {
	width := 0
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 && !strings.Contains(n.Value, "\n") {
		width = len([]rune(n.Value))
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			width += 2 // escapes may make this short; it is only a highlight
		}
	}
	return p.f.rngLC(n.Line, n.Column, width)
}

func (p *yamlParser) shapeError(n *yaml.Node, summary, detail string, args ...any) {
	p.b.errorf(p.rng(n), summary, detail, args...)
}

// enter resolves aliases and spends budget. The returned leave must be called
// once the node's subtree is processed; a nil node means "stop here".
func (p *yamlParser) enter(n *yaml.Node) (*yaml.Node, func()) {
	var entered []*yaml.Node
	leave := func() {
		for _, a := range entered {
			delete(p.aliasing, a)
		}
	}
	for n != nil && n.Kind == yaml.AliasNode {
		if p.aliasing[n] {
			p.shapeError(n, "Recursive YAML alias", "The alias *%s refers to a node that contains it.", n.Value)
			return nil, leave
		}
		p.aliasing[n] = true
		entered = append(entered, n)
		n = n.Alias
	}
	if n == nil {
		return nil, leave
	}
	p.budget--
	if p.budget < 0 {
		if !p.overrun {
			p.overrun = true
			p.shapeError(n, "Inventory too large", "The inventory expands to more than %d YAML nodes (check for aliases that repeat large parts).", yamlNodeBudget)
		}
		return nil, leave
	}
	return n, leave
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// pairs returns a mapping's key/value nodes with "<<" merge keys expanded;
// explicit keys win over merged ones and duplicate explicit keys are errors.
func (p *yamlParser) pairs(m *yaml.Node) [][2]*yaml.Node {
	var out [][2]*yaml.Node
	seen := map[string]*yaml.Node{}
	var merged [][2]*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
			merged = append(merged, p.mergeSources(v)...)
			continue
		}
		if k.Kind == yaml.ScalarNode {
			key := cty.NormalizeString(k.Value)
			if first, dup := seen[key]; dup {
				p.shapeError(k, "Duplicate key", "%q is already defined at line %d; YAML keys must be unique within a mapping.", k.Value, first.Line)
				continue
			}
			seen[key] = k
		}
		out = append(out, [2]*yaml.Node{k, v})
	}
	for _, kv := range merged {
		if kv[0].Kind == yaml.ScalarNode {
			key := cty.NormalizeString(kv[0].Value)
			if seen[key] != nil {
				continue
			}
			seen[key] = kv[0]
		}
		out = append(out, kv)
	}
	return out
}

// mergeSources expands the value of a "<<" key: a mapping or a list of them.
func (p *yamlParser) mergeSources(v *yaml.Node) [][2]*yaml.Node {
	n, leave := p.enter(v)
	defer leave()
	if n == nil {
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		return p.pairs(n)
	case yaml.SequenceNode:
		var out [][2]*yaml.Node
		for _, item := range n.Content {
			out = append(out, p.mergeSources(item)...)
		}
		return out
	}
	p.shapeError(v, "Invalid merge", "The value of a \"<<\" merge key must be a mapping or a list of mappings.")
	return nil
}

// name reads a mapping key used as a group, host or variable name.
func (p *yamlParser) name(k *yaml.Node, what string) (string, bool) {
	n, leave := p.enter(k)
	defer leave()
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		p.shapeError(k, "Invalid "+what+" name", "A %s name must be a plain string, not a list or mapping.", what)
		return "", false
	}
	if strings.TrimSpace(n.Value) == "" {
		p.shapeError(k, "Invalid "+what+" name", "A %s name cannot be empty.", what)
		return "", false
	}
	if what == "group" {
		if why := badName(n.Value, false); why != "" {
			p.shapeError(k, "Invalid group name", "%q cannot be a group name: %s.", n.Value, why)
			return "", false
		}
	}
	return n.Value, true
}

// key reads a key of a mapping inside a value, where any string (even "")
// is a valid key.
func (p *yamlParser) key(k *yaml.Node) (string, bool) {
	n, leave := p.enter(k)
	defer leave()
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		p.shapeError(k, "Invalid key", "Keys of a mapping value must be plain strings, not lists or mappings.")
		return "", false
	}
	return n.Value, true
}

var groupKeys = []string{"hosts", "vars", "children"}

// group processes one group's body; parent is "" for a top-level group.
func (p *yamlParser) group(name, parent string, key, val *yaml.Node) {
	if parent != "" && name == groupAll {
		p.shapeError(key, "Invalid child group", "\"all\" cannot be a child of %q; it already contains every group.", parent)
		return
	}
	rng := p.rng(key)
	p.b.group(name, rng)
	if parent != "" {
		p.b.addChild(parent, name, rng)
	}
	body, leave := p.enter(val)
	defer leave()
	if body == nil || isNull(body) {
		return
	}
	if body.Kind != yaml.MappingNode {
		p.shapeError(val, "Group must be a mapping",
			"Group %q must be a mapping with hosts:, vars: and/or children:, or empty.", name)
		return
	}
	for _, kv := range p.pairs(body) {
		field, ok := p.name(kv[0], "key")
		if !ok {
			continue
		}
		switch field {
		case "hosts":
			p.hosts(name, kv[1])
		case "vars":
			p.vars(p.b.inv.Groups[name].Vars, name, kv[1])
		case "children":
			p.children(name, kv[1])
		default:
			hint := ""
			if s := closest(field, groupKeys); s != "" {
				hint = fmt.Sprintf(" Did you mean %q?", s)
			}
			p.shapeError(kv[0], "Unexpected key in group",
				"Group %q has a key %q; only hosts, vars and children are allowed. Hosts go under hosts:, e.g.\n\n%s:\n  hosts:\n    %s:\n%s",
				name, field, name, field, hint)
		}
	}
}

func (p *yamlParser) hosts(group string, val *yaml.Node) {
	n, leave := p.enter(val)
	defer leave()
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.shapeError(val, "Hosts must be a mapping",
			"The hosts of group %q must be a mapping from host name to its variables (or nothing), not a %s. For example:\n\nhosts:\n  win01:\n  win02:\n    ansible_host: 10.0.0.2",
			group, kindName(n))
		return
	}
	for _, kv := range p.pairs(n) {
		pattern, ok := p.name(kv[0], "host")
		if !ok {
			continue
		}
		hp, perr := expandHostPattern(pattern)
		if perr != nil {
			r := p.rng(kv[0])
			if kv[0].Style == 0 && kv[0].Kind == yaml.ScalarNode {
				// A plain key sits exactly as written, so point inside it.
				r = p.f.rngLC(kv[0].Line, kv[0].Column+len([]rune(pattern[:perr.start])), len([]rune(pattern[perr.start:perr.end])))
			}
			p.b.errorf(r, perr.summary, "%s", perr.detail)
			continue
		}
		if bad := firstBadHost(hp.names); bad != "" {
			p.shapeError(kv[0], "Invalid host name", "%q cannot be a host name: %s.", bad, badName(bad, true))
			continue
		}
		vars := map[string]Var{}
		if hp.port != "" {
			vars["ansible_port"] = Var{cty.StringVal(hp.port), p.rng(kv[0])}
		}
		p.vars(vars, pattern, kv[1])
		if !p.b.room(len(hp.names), p.rng(kv[0])) {
			return
		}
		for _, name := range hp.names {
			h := p.b.host(name, p.rng(kv[0]))
			for k, v := range vars {
				h.Vars[k] = v
			}
			p.b.addHost(group, name)
		}
	}
}

func firstBadHost(names []string) string {
	for _, n := range names {
		if badName(n, true) != "" {
			return n
		}
	}
	return ""
}

func (p *yamlParser) children(group string, val *yaml.Node) {
	n, leave := p.enter(val)
	defer leave()
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.shapeError(val, "Children must be a mapping",
			"The children of group %q must be a mapping from group name to group, not a %s. For example:\n\nchildren:\n  windows:\n  linux:",
			group, kindName(n))
		return
	}
	for _, kv := range p.pairs(n) {
		if name, ok := p.name(kv[0], "group"); ok {
			p.group(name, group, kv[0], kv[1])
		}
	}
}

// vars stores a vars mapping into dst; owner names the group or host.
func (p *yamlParser) vars(dst map[string]Var, owner string, val *yaml.Node) {
	n, leave := p.enter(val)
	defer leave()
	if n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.shapeError(val, "Variables must be a mapping",
			"The variables of %q must be a mapping of name: value, not a %s.", owner, kindName(n))
		return
	}
	for _, kv := range p.pairs(n) {
		name, ok := p.name(kv[0], "variable")
		if !ok {
			continue
		}
		if v, ok := p.value(kv[1]); ok {
			dst[name] = Var{v, p.rng(kv[1])}
		}
	}
}

// value converts a YAML node to its natural cty value.
func (p *yamlParser) value(orig *yaml.Node) (cty.Value, bool) {
	n, leave := p.enter(orig)
	defer leave()
	if n == nil {
		return cty.NilVal, false
	}
	switch n.Kind {
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			return cty.EmptyTupleVal, true
		}
		elems := make([]cty.Value, 0, len(n.Content))
		for _, c := range n.Content {
			v, ok := p.value(c)
			if !ok {
				return cty.NilVal, false
			}
			elems = append(elems, v)
		}
		return cty.TupleVal(elems), true
	case yaml.MappingNode:
		attrs := map[string]cty.Value{}
		for _, kv := range p.pairs(n) {
			k, ok := p.key(kv[0])
			if !ok {
				return cty.NilVal, false
			}
			v, ok := p.value(kv[1])
			if !ok {
				return cty.NilVal, false
			}
			attrs[k] = v
		}
		if len(attrs) == 0 {
			return cty.EmptyObjectVal, true
		}
		return cty.ObjectVal(attrs), true
	case yaml.ScalarNode:
		return p.scalar(orig, n)
	}
	p.shapeError(orig, "Unsupported YAML value", "This YAML node cannot be used as a variable value.")
	return cty.NilVal, false
}

func (p *yamlParser) scalar(orig, n *yaml.Node) (cty.Value, bool) {
	switch n.Tag {
	case "!!null":
		return cty.NullVal(cty.DynamicPseudoType), true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			p.shapeError(orig, "Invalid boolean", "%q is not a boolean.", n.Value)
			return cty.NilVal, false
		}
		return cty.BoolVal(b), true
	case "!!int", "!!float":
		var x any
		if err := n.Decode(&x); err != nil {
			p.shapeError(orig, "Invalid number", "%q is not a number.", n.Value)
			return cty.NilVal, false
		}
		switch x := x.(type) {
		case int:
			return cty.NumberIntVal(int64(x)), true
		case int64:
			return cty.NumberIntVal(x), true
		case uint64:
			return cty.NumberUIntVal(x), true
		case float64:
			if math.IsNaN(x) {
				return cty.StringVal(n.Value), true // cty numbers cannot be NaN
			}
			return cty.NumberFloatVal(x), true
		}
		return cty.StringVal(n.Value), true
	case "!vault":
		p.shapeError(orig, "Vault values are not supported",
			"This value is encrypted with ansible-vault, which wsu cannot decrypt. Store it unencrypted or pass it another way.")
		return cty.NilVal, false
	}
	if strings.HasPrefix(n.Tag, "!!") || n.Tag == "!unsafe" || n.Tag == "!" || n.Tag == "" {
		// Strings, timestamps and binary stay as written; !unsafe only
		// disables templating in Ansible.
		return cty.StringVal(n.Value), true
	}
	p.shapeError(orig, "Unsupported YAML tag", "The tag %s is not supported in inventories.", n.Tag)
	return cty.NilVal, false
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "mapping"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return fmt.Sprintf("single value (%q)", n.Value)
	}
	return "YAML node"
}

// manifest refuses a Kubernetes manifest given as an inventory (kubectl get
// cm windows-instances -o yaml > cm.yaml; -i cm.yaml) in one error at its
// kind, instead of one per key that is not a group. A BYOH ConfigMap is
// read from the cluster, where its SSH key is: the error gives the
// k8s:// reference that does that.
func (p *yamlParser) manifest(root *yaml.Node) bool {
	var kind *yaml.Node
	var apiVersion, name, namespace string
	for _, kv := range p.pairs(root) {
		switch kv[0].Value {
		case "kind":
			kind = kv[1]
		case "apiVersion":
			apiVersion = kv[1].Value
		case "metadata":
			for _, m := range p.pairs(kv[1]) {
				switch m[0].Value {
				case "name":
					name = m[1].Value
				case "namespace":
					namespace = m[1].Value
				}
			}
		}
	}
	if kind == nil || kind.Kind != yaml.ScalarNode || apiVersion == "" {
		return false
	}
	if kind.Value != "ConfigMap" || name == "" {
		p.shapeError(kind, "A Kubernetes manifest, not an inventory",
			"%s is a Kubernetes %s (%s), not an inventory: an inventory maps groups to hosts (docs/inventory.md). "+
				"A BYOH windows-instances ConfigMap is read from the cluster with -i k8s://NAMESPACE/NAME.",
			p.b.file.name, kind.Value, apiVersion)
		return true
	}
	ns := namespace
	if ns == "" {
		ns = "NAMESPACE"
	}
	p.shapeError(kind, "A Kubernetes ConfigMap, not an inventory file",
		"%s is the ConfigMap %s%s as kubectl prints it, not an inventory file. wsu reads a BYOH ConfigMap "+
			"(windows-instances) from the cluster, with the SSH key from the Secret cloud-private-key beside it: "+
			"give -i k8s://%s/%s (and --kubeconfig FILE if KUBECONFIG does not name the cluster).",
		p.b.file.name, name, inNamespace(namespace), ns, name)
	return true
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}
