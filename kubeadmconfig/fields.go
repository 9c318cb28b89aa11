package kubeadmconfig

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"gopkg.in/yaml.v3"

	"github.com/wsu-project/wsu/modules"
)

// parser reads one JoinConfiguration document into j, collecting
// diagnostics rather than stopping at the first.
type parser struct {
	s       *source
	j       *Join
	version string // v1beta3 or v1beta4
	diags   hcl.Diagnostics
}

func (p *parser) errorf(n *yaml.Node, summary, format string, args ...any) {
	r := p.s.at(n)
	p.diags = append(p.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: &r})
}

func (p *parser) warnf(n *yaml.Node, summary, format string, args ...any) {
	r := p.s.at(n)
	p.diags = append(p.diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: &r})
}

// fields reads the mapping n found at path (a kubeadm field path, "" for
// the document): the value of each key, with unknown and repeated keys
// refused as kubeadm's strict decoding refuses them. A null n is an empty
// mapping.
func (p *parser) fields(n *yaml.Node, path string, known []string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n == nil || isNull(n) || p.alias(n, path) {
		return out
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "Invalid join configuration", "%s must be a mapping (%s).", name(path), strings.Join(known, ", "))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case !contains(known, k.Value):
			hint := ""
			if s := modules.Nearest(k.Value, known); s != "" {
				hint = fmt.Sprintf(" Did you mean %q?", s)
			}
			p.errorf(k, "Unknown field", "%s has no field %q in %s/%s (kubeadm decodes strictly).%s", name(path), k.Value, Group, p.version, hint)
		case out[k.Value] != nil:
			p.errorf(k, "Repeated field", "%s sets %q twice.", name(path), k.Value)
		default:
			out[k.Value] = v
			p.j.Ranges[join(path, k.Value)] = p.s.at(v)
		}
	}
	return out
}

// alias refuses a YAML alias (*name): kubeadm's files have none, and
// following them would let a small file expand without bound.
func (p *parser) alias(n *yaml.Node, path string) bool {
	if n.Kind != yaml.AliasNode {
		return false
	}
	p.errorf(n, "YAML alias not supported", "%s is a YAML alias; write the value out.", name(path))
	return true
}

// str is a string scalar; "" for null or absent. Another YAML type is an
// error, as kubeadm's decoding into a string field fails (quote it). The
// value is never quoted in a message: it may be the token.
func (p *parser) str(n *yaml.Node, path string) string {
	if n == nil || isNull(n) || p.alias(n, path) {
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		p.errorf(n, "Invalid join configuration", "%s must be a string, not %s; quote it.", name(path), yamlType(n))
		return ""
	}
	return n.Value
}

// boolean is a true/false scalar; false for null or absent.
func (p *parser) boolean(n *yaml.Node, path string) bool {
	if n == nil || isNull(n) || p.alias(n, path) {
		return false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		p.errorf(n, "Invalid join configuration", "%s must be true or false, not %s.", name(path), yamlType(n))
		return false
	}
	return n.Value == "true" || n.Value == "True" || n.Value == "TRUE"
}

// list is a sequence's items; nil for null or absent.
func (p *parser) list(n *yaml.Node, path string) []*yaml.Node {
	if n == nil || isNull(n) || p.alias(n, path) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "Invalid join configuration", "%s must be a list, not %s.", name(path), yamlType(n))
		return nil
	}
	return n.Content
}

// strings is a sequence of strings, each with its node.
func (p *parser) strings(n *yaml.Node, path string) ([]string, []*yaml.Node) {
	var out []string
	var nodes []*yaml.Node
	for i, item := range p.list(n, path) {
		out = append(out, p.str(item, fmt.Sprintf("%s[%d]", path, i)))
		nodes = append(nodes, item)
	}
	return out, nodes
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// yamlType names a node's YAML type for messages.
func yamlType(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	}
	return "a " + strings.TrimPrefix(n.Tag, "!!")
}

// name is how a message names a field path.
func name(path string) string {
	if path == "" {
		return "The JoinConfiguration"
	}
	return path
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
