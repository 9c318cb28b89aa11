package inventory

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agext/levenshtein"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/limits"
)

type sectionKind int

const (
	secHosts sectionKind = iota
	secVars
	secChildren
	secSkip // after a broken header, so one mistake gives one error
)

type iniParser struct {
	b     *builder
	f     *srcFile
	kind  sectionKind
	group string
	// defined groups have a [g], [g:hosts] or [g:children] section or are
	// named as a child; [g:vars] alone is a typo Ansible rejects.
	defined     map[string]bool
	pendingVars map[string]hcl.Range
	pendingSeq  []string
}

// ParseINI parses an Ansible INI inventory.
//
// Values are strings. A quoted value loses its quotes; inside double quotes
// \" and \\ are escapes, elsewhere a backslash is literal so Windows paths
// survive. An unquoted value in a [group:vars] section ends at " #".
func ParseINI(filename string, src []byte) (*Inventory, hcl.Diagnostics) {
	b := newBuilder(filename, src)
	if diags := limits.CheckSize(len(src), limits.MaxFileSize, filename, hcl.InitialPos); diags.HasErrors() {
		b.diags = append(b.diags, diags...)
		return b.finish()
	}
	p := &iniParser{
		b:           b,
		f:           b.file,
		kind:        secHosts,
		group:       groupUngrouped, // hosts before any section (Ansible)
		defined:     map[string]bool{groupAll: true, groupUngrouped: true},
		pendingVars: map[string]hcl.Range{},
	}
	if !utf8.Valid(src) {
		off := 0
		for off < len(src) {
			r, size := utf8.DecodeRune(src[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		b.errorf(p.f.rng(off, off+1), "Invalid UTF-8", "The inventory must be UTF-8 text; save it as UTF-8.")
		return b.finish()
	}
	for i, start := range p.f.lines {
		end := len(src)
		if i+1 < len(p.f.lines) {
			end = p.f.lines[i+1] - 1 // drop the \n
		}
		line := string(src[start:end])
		line = strings.TrimSuffix(line, "\r")
		p.line(start, line)
	}
	for _, g := range p.pendingSeq {
		if rng, ok := p.pendingVars[g]; ok && !p.defined[g] {
			b.errorf(rng, "Vars for undefined group",
				"There is a [%s:vars] section but no group %q is defined. Add a [%s] section (it may be empty) or fix the name.%s",
				g, g, g, p.suggestGroup(g))
		}
	}
	return b.finish()
}

// line handles one line; start is its byte offset in the file.
func (p *iniParser) line(start int, line string) {
	lo := len(line) - len(strings.TrimLeft(line, " \t"))
	body := strings.TrimRight(line[lo:], " \t")
	if strings.TrimSpace(body) == "" || body[0] == '#' || body[0] == ';' {
		return
	}
	if body[0] == '[' {
		p.section(start+lo, body)
		return
	}
	switch p.kind {
	case secHosts:
		p.hostLine(start, line)
	case secVars:
		p.varLine(start+lo, body)
	case secChildren:
		p.childLine(start+lo, body)
	}
}

// section parses a "[name]" or "[name:kind]" header starting at off.
func (p *iniParser) section(off int, body string) {
	p.kind = secSkip
	closing := strings.IndexByte(body, ']')
	if closing < 0 {
		p.b.errorf(p.f.rng(off, off+len(body)), "Unterminated section header",
			"A section header must end with ']', e.g. [windows] or [windows:vars].")
		return
	}
	if rest := strings.TrimLeft(body[closing+1:], " \t"); rest != "" && rest[0] != '#' && rest[0] != ';' {
		at := off + len(body) - len(rest)
		p.b.errorf(p.f.rng(at, off+len(body)), "Unexpected text after section header",
			"Only a comment may follow ']' on a section line.")
		return
	}
	inner := body[1:closing]
	name, suffix, hasSuffix := strings.Cut(inner, ":")
	if why := badName(name, false); why != "" {
		p.b.errorf(p.f.rng(off, off+closing+1), "Invalid group name", "%q cannot be a group name: %s.", name, why)
		return
	}
	nameRng := p.f.rng(off+1, off+1+len(name))
	kind := secHosts
	switch {
	case !hasSuffix, suffix == "hosts":
	case suffix == "vars":
		kind = secVars
	case suffix == "children":
		kind = secChildren
	default:
		at := off + 1 + len(name) + 1
		hint := ""
		if s := closest(suffix, []string{"vars", "children", "hosts"}); s != "" {
			hint = fmt.Sprintf(" Did you mean [%s:%s]?", name, s)
		}
		p.b.errorf(p.f.rng(at, at+len(suffix)), "Unknown section type",
			"[%s:%s] is not a known section; the part after ':' must be vars, children or hosts.%s", name, suffix, hint)
		return
	}
	p.b.group(name, nameRng)
	if kind == secVars {
		if !p.defined[name] {
			if _, ok := p.pendingVars[name]; !ok {
				p.pendingVars[name] = nameRng
				p.pendingSeq = append(p.pendingSeq, name)
			}
		}
	} else {
		p.defined[name] = true
	}
	p.kind, p.group = kind, name
}

// hostLine parses "pattern key=value ..." in a hosts section.
func (p *iniParser) hostLine(start int, line string) {
	toks, err := tokenize(line)
	if err != nil {
		p.b.errorf(p.f.rng(start+err.start, start+err.end), err.summary, "%s", err.detail)
		return
	}
	if len(toks) == 0 {
		return
	}
	ht := toks[0]
	if strings.Contains(ht.text, "=") {
		p.b.errorf(p.f.rng(start+ht.start, start+ht.end), "Expected a host name",
			"%q looks like a variable, not a host. Variables for a whole group go in a [%s:vars] section; variables for one host follow its name on the same line.",
			ht.text, p.group)
		return
	}
	hp, perr := expandHostPattern(ht.text)
	if perr != nil {
		p.b.errorf(p.f.rng(start+ht.raw(perr.start), start+ht.raw(perr.end)), perr.summary, "%s", perr.detail)
		return
	}

	vars := map[string]Var{}
	var keys []string
	if hp.port != "" {
		at := start + ht.raw(hp.portStart)
		vars["ansible_port"] = Var{cty.StringVal(hp.port), p.f.rng(at, start+ht.end)}
		keys = append(keys, "ansible_port")
	}
	for i, t := range toks[1:] {
		eq := strings.IndexByte(t.text, '=')
		if eq <= 0 {
			detail := fmt.Sprintf("Host variables are written key=value, but found %q.", t.text)
			if t.text == "=" || (i+2 < len(toks) && strings.HasPrefix(toks[i+2].text, "=")) || eq == 0 {
				detail += " Remove the spaces around '='."
			}
			p.b.errorf(p.f.rng(start+t.start, start+t.end), "Expected key=value", "%s", detail)
			return
		}
		key := t.text[:eq]
		at := start + t.raw(eq) + 1
		if _, ok := vars[key]; !ok {
			keys = append(keys, key)
		}
		vars[key] = Var{cty.StringVal(t.text[eq+1:]), p.f.rng(at, start+t.end)}
	}

	hostRng := p.f.rng(start+ht.start, start+ht.end)
	if bad := firstBadHost(hp.names); bad != "" {
		p.b.errorf(hostRng, "Invalid host name", "%q cannot be a host name: %s.", bad, badName(bad, true))
		return
	}
	if !p.b.room(len(hp.names), hostRng) {
		return
	}
	for _, name := range hp.names {
		h := p.b.host(name, hostRng)
		for _, k := range keys {
			h.Vars[k] = vars[k]
		}
		p.b.addHost(p.group, name)
	}
}

// varLine parses "key=value" in a [group:vars] section; off is where the
// key starts.
func (p *iniParser) varLine(off int, body string) {
	eq := strings.IndexByte(body, '=')
	if eq < 0 {
		p.b.errorf(p.f.rng(off, off+len(body)), "Expected key=value",
			"Lines in a [%s:vars] section must have the form key=value, but found %q.", p.group, body)
		return
	}
	key := strings.TrimRight(body[:eq], " \t")
	if key == "" {
		p.b.errorf(p.f.rng(off, off+eq+1), "Missing variable name", "There is nothing before '='.")
		return
	}
	if strings.ContainsAny(key, " \t") {
		p.b.errorf(p.f.rng(off, off+len(key)), "Invalid variable name",
			"%q contains spaces; variable names are single words like ansible_user.", key)
		return
	}
	vs := eq + 1
	for vs < len(body) && (body[vs] == ' ' || body[vs] == '\t') {
		vs++
	}
	val, ve, err := parseVarValue(body[vs:])
	if err != nil {
		p.b.errorf(p.f.rng(off+vs+err.start, off+vs+err.end), err.summary, "%s", err.detail)
		return
	}
	p.b.inv.Groups[p.group].Vars[key] = Var{cty.StringVal(val), p.f.rng(off+vs, off+vs+ve)}
}

// parseVarValue reads a [group:vars] value and returns it with the length
// of source it covers.
func parseVarValue(s string) (string, int, *patternError) {
	if s == "" || (s[0] != '"' && s[0] != '\'') {
		end := len(s)
		for i := 1; i < len(s); i++ {
			if s[i] == '#' && (s[i-1] == ' ' || s[i-1] == '\t') {
				end = i
				break
			}
		}
		v := strings.TrimRight(s[:end], " \t")
		return v, len(v), nil
	}
	q := s[0]
	var sb strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			if rest := strings.TrimLeft(s[i+1:], " \t"); rest != "" && rest[0] != '#' && rest[0] != ';' {
				at := len(s) - len(rest)
				return "", 0, &patternError{at, len(s), "Unexpected text after quoted value",
					fmt.Sprintf("Only a comment may follow the closing quote; found %q.", rest)}
			}
			return sb.String(), i + 1, nil
		case q == '"' && c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			sb.WriteByte(s[i+1])
			i++
		default:
			sb.WriteByte(c)
		}
	}
	return "", 0, &patternError{0, 1, "Unterminated quoted string",
		fmt.Sprintf("The value starting with %c has no closing %c on this line.", q, q)}
}

// childLine parses a group name in a [group:children] section.
func (p *iniParser) childLine(off int, body string) {
	f := strings.Fields(body)
	if len(f) == 0 { // only exotic whitespace such as \f
		return
	}
	name := f[0]
	nameEnd := strings.Index(body, name) + len(name)
	if len(f) > 1 && f[1][0] != '#' && f[1][0] != ';' {
		at := off + nameEnd + strings.Index(body[nameEnd:], f[1])
		p.b.errorf(p.f.rng(at, off+len(body)), "Unexpected text after group name",
			"Each line in a [%s:children] section names one child group.", p.group)
		return
	}
	rng := p.f.rng(off+nameEnd-len(name), off+nameEnd)
	if name == groupAll {
		p.b.errorf(rng, "Invalid child group", "\"all\" cannot be a child of %q; it already contains every group.", p.group)
		return
	}
	if why := badName(name, false); why != "" || strings.Contains(name, "=") {
		if why == "" {
			why = "lines in a [" + p.group + ":children] section name groups, not variables"
		}
		p.b.errorf(rng, "Invalid child group", "%q cannot be a group name: %s.", name, why)
		return
	}
	p.defined[name] = true
	p.b.addChild(p.group, name, rng)
}

func (p *iniParser) suggestGroup(name string) string {
	var names []string
	for g := range p.defined {
		names = append(names, g)
	}
	if s := closest(name, names); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}

// token is one shell-like word of a host line. offs maps each byte of text
// back to its offset in the line, so values keep exact columns even when
// quotes were removed.
type token struct {
	text       string
	start, end int
	offs       []int
}

// raw maps an offset in text to an offset in the line.
func (t token) raw(i int) int {
	if i < len(t.offs) {
		return t.offs[i]
	}
	return t.end
}

// tokenize splits a host line into words like Ansible's shlex: quotes group
// words, a word starting with '#' begins a comment. Backslash escapes only
// \" and \\ inside double quotes (Windows paths stay intact).
func tokenize(line string) ([]token, *patternError) {
	var toks []token
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i >= len(line) || line[i] == '#' {
			return toks, nil
		}
		t := token{start: i}
		var sb strings.Builder
		for i < len(line) && line[i] != ' ' && line[i] != '\t' {
			c := line[i]
			if c != '"' && c != '\'' {
				sb.WriteByte(c)
				t.offs = append(t.offs, i)
				i++
				continue
			}
			open := i
			i++
			for {
				if i >= len(line) {
					return nil, &patternError{open, open + 1, "Unterminated quoted string",
						fmt.Sprintf("The quote %c has no closing %c on this line.", c, c)}
				}
				if line[i] == c {
					i++
					break
				}
				if c == '"' && line[i] == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					i++
				}
				sb.WriteByte(line[i])
				t.offs = append(t.offs, i)
				i++
			}
		}
		t.text, t.end = sb.String(), i
		toks = append(toks, t)
	}
}

// closest returns the candidate nearest to name by edit distance, or "" if
// none is close enough to be a plausible typo.
func closest(name string, candidates []string) string {
	best, bestD := "", -1
	limit := max(1, (utf8.RuneCountInString(name)+1)/3)
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := levenshtein.Distance(strings.ToLower(name), strings.ToLower(c), nil)
		if d <= limit && (bestD < 0 || d < bestD || (d == bestD && c < best)) {
			best, bestD = c, d
		}
	}
	return best
}
