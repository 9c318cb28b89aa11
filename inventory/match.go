package inventory

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// PatternError reports a host pattern that cannot be resolved.
type PatternError struct {
	Pattern    string // the whole pattern given to Match
	Part       string // the offending part of it
	Reason     string
	Suggestion string // a close host or group name, if any
}

func (e *PatternError) Error() string {
	msg := fmt.Sprintf("host pattern %q: %s", e.Pattern, e.Reason)
	if e.Part != e.Pattern {
		msg = fmt.Sprintf("host pattern %q: %q %s", e.Pattern, e.Part, e.Reason)
	}
	if e.Suggestion != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", e.Suggestion)
	}
	return msg
}

// Match returns the hosts selected by an Ansible host pattern, in inventory
// order. Parts are separated by ':' or ','; "&x" intersects, "!x" excludes.
// As in Ansible, all unions are applied first, then intersections, then
// exclusions, whatever order they are written in. A part is "all" or "*", a
// group or host name, a glob with '*' and '?' over group and host names, or
// "~regex" over host names. A plain name that is neither a group nor a host
// is an error, so a typo in "!name" cannot silently exclude nothing.
func (inv *Inventory) Match(pattern string) ([]string, error) {
	parts := splitPattern(pattern)
	if len(parts) == 0 {
		return nil, &PatternError{Pattern: pattern, Part: pattern, Reason: "is empty"}
	}
	var unions, inters, excls []string
	for _, part := range parts {
		switch part[0] {
		case '&':
			inters = append(inters, strings.TrimSpace(part[1:]))
		case '!':
			excls = append(excls, strings.TrimSpace(part[1:]))
		default:
			unions = append(unions, part)
		}
	}
	if len(unions) == 0 {
		unions = []string{groupAll} // "!win01" alone means all but win01
	}

	selected := map[string]bool{}
	for _, u := range unions {
		hosts, err := inv.matchPart(pattern, u)
		if err != nil {
			return nil, err
		}
		for h := range hosts {
			selected[h] = true
		}
	}
	for _, x := range inters {
		hosts, err := inv.matchPart(pattern, x)
		if err != nil {
			return nil, err
		}
		for h := range selected {
			if !hosts[h] {
				delete(selected, h)
			}
		}
	}
	for _, x := range excls {
		hosts, err := inv.matchPart(pattern, x)
		if err != nil {
			return nil, err
		}
		for h := range hosts {
			delete(selected, h)
		}
	}
	return inv.inOrder(selected), nil
}

// splitPattern splits on ',' and ':' except inside [...] or (...), so
// regexes like "~(?:web|db)[0-9]" survive.
func splitPattern(pattern string) []string {
	var parts []string
	depth, start := 0, 0
	flush := func(end int) {
		if p := strings.TrimSpace(pattern[start:end]); p != "" {
			parts = append(parts, p)
		}
		start = end + 1
	}
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '[', '(':
			depth++
		case ']', ')':
			if depth > 0 {
				depth--
			}
		case ',', ':':
			if depth == 0 {
				flush(i)
			}
		}
	}
	flush(len(pattern))
	return parts
}

// matchPart resolves one part of a pattern (without its & or ! prefix).
func (inv *Inventory) matchPart(pattern, part string) (map[string]bool, error) {
	out := map[string]bool{}
	switch {
	case part == "":
		return nil, &PatternError{Pattern: pattern, Part: part, Reason: "has an '&' or '!' with no name after it"}
	case part == groupAll || part == "*":
		for name := range inv.Hosts {
			out[name] = true
		}
	case part[0] == '~':
		re, err := regexp.Compile("^(?:" + part[1:] + ")") // anchored at the start, like Python's re.match
		if err != nil {
			return nil, &PatternError{Pattern: pattern, Part: part, Reason: "is not a valid regular expression: " + err.Error()}
		}
		for name := range inv.Hosts {
			if re.MatchString(name) {
				out[name] = true
			}
		}
	case strings.ContainsAny(part, "*?"):
		for name := range inv.Groups {
			if glob(part, name) {
				inv.addGroupHosts(out, name, map[string]bool{})
			}
		}
		for name := range inv.Hosts {
			if glob(part, name) {
				out[name] = true
			}
		}
	case inv.Groups[part] != nil:
		inv.addGroupHosts(out, part, map[string]bool{})
	case inv.Hosts[part] != nil:
		out[part] = true
	default:
		names := make([]string, 0, len(inv.Groups)+len(inv.Hosts))
		for g := range inv.Groups {
			names = append(names, g)
		}
		names = append(names, inv.Order...)
		return nil, &PatternError{Pattern: pattern, Part: part, Reason: "matches no host or group", Suggestion: closest(part, names)}
	}
	return out, nil
}

// addGroupHosts adds the hosts of a group and of all its descendants.
func (inv *Inventory) addGroupHosts(out map[string]bool, group string, seen map[string]bool) {
	if seen[group] {
		return
	}
	seen[group] = true
	g := inv.Groups[group]
	if g == nil {
		return
	}
	if group == groupAll {
		for name := range inv.Hosts {
			out[name] = true
		}
		return
	}
	for _, h := range g.Hosts {
		if inv.Hosts[h] != nil {
			out[h] = true
		}
	}
	for _, c := range g.Children {
		inv.addGroupHosts(out, c, seen)
	}
}

// inOrder lists the selected hosts in inventory order; hosts missing from
// Order (a hand-built Inventory) follow, sorted.
func (inv *Inventory) inOrder(selected map[string]bool) []string {
	out := make([]string, 0, len(selected))
	listed := map[string]bool{}
	for _, name := range inv.Order {
		if selected[name] && !listed[name] {
			out = append(out, name)
			listed[name] = true
		}
	}
	var rest []string
	for name := range selected {
		if !listed[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// glob matches name against a pattern where '*' is any run of characters
// and '?' is one character; everything else is literal (unlike path.Match,
// '[' and '\' have no meaning, since they appear in host names).
func glob(pattern, name string) bool {
	p, s := []rune(pattern), []rune(name)
	// Iterative matching with one backtrack point keeps this linear-ish
	// even for patterns like "a*a*a*a*b".
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
