package inventory

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// WindowsInstancesGroup is the group every host of a windows-instances
// ConfigMap belongs to.
const WindowsInstancesGroup = "windows"

// usernamePrefix starts every windows-instances value.
const usernamePrefix = "username="

// wiEntry is one data entry of a windows-instances ConfigMap and where it
// sits in the text WindowsInstancesText renders.
type wiEntry struct {
	key, value         string
	keyStart, keyEnd   int
	valueStart, valEnd int
}

// WindowsInstancesText renders a windows-instances ConfigMap's data as the
// text the ranges of ParseWindowsInstances point into: one "KEY: VALUE" line
// per entry, in key order, as `kubectl get configmap -o yaml` lists the
// data. Keys and values that would not read back plainly (empty, spaces at
// either end, control characters, quotes) are shown Go-quoted. A view given
// this text under the inventory's source name can quote the offending entry.
func WindowsInstancesText(data map[string]string) []byte {
	text, _ := layoutWindowsInstances(data)
	return text
}

func layoutWindowsInstances(data map[string]string) ([]byte, []wiEntry) {
	var sb strings.Builder
	entries := make([]wiEntry, 0, len(data))
	for _, k := range sortedKeys(data) {
		e := wiEntry{key: k, value: data[k]}
		e.keyStart = sb.Len()
		sb.WriteString(displayText(k))
		e.keyEnd = sb.Len()
		sb.WriteString(": ")
		e.valueStart = sb.Len()
		sb.WriteString(displayText(e.value))
		e.valEnd = sb.Len()
		sb.WriteByte('\n')
		entries = append(entries, e)
	}
	return []byte(sb.String()), entries
}

// displayText is s as it appears in the rendered text.
func displayText(s string) string {
	plain := s != "" && utf8.ValidString(s) && strings.TrimSpace(s) == s && s[0] != '"'
	for _, r := range s {
		if !plain {
			break
		}
		plain = !unicode.IsControl(r) && r != utf8.RuneError
	}
	if plain {
		return s
	}
	return strconv.Quote(s)
}

// ParseWindowsInstances reads the data of a BYOH windows-instances ConfigMap
// (what the Windows Machine Config Operator reads): each key is a host's IPv4
// address or DNS name, each value "username=<user>". Every entry becomes a
// host in group "windows" named by its key, with ansible_host (the key) and
// ansible_user; the group sets connection = "ssh". Empty data gives an
// inventory without hosts: removing every entry is how BYOH hosts are
// deconfigured.
//
// source names the ConfigMap ("k8s://NAMESPACE/NAME"); diagnostics are
// located in the text WindowsInstancesText renders under that name, and say
// which entry is wrong. A bad entry is left out; the others still load.
func ParseWindowsInstances(source string, data map[string]string) (*Inventory, hcl.Diagnostics) {
	text, entries := layoutWindowsInstances(data)
	b := newBuilder(source, text)
	start := hcl.Range{Filename: source, Start: hcl.InitialPos, End: hcl.InitialPos}
	g := b.group(WindowsInstancesGroup, start)
	g.Vars["connection"] = Var{Value: cty.StringVal("ssh"), Range: start}

	seen := map[string]string{} // lower-cased key -> key
	for _, e := range entries {
		keyRng := b.file.rng(e.keyStart, e.keyEnd)
		valRng := b.file.rng(e.valueStart, e.valEnd)
		if why := checkAddress(e.key); why != "" {
			b.errorf(keyRng, "Invalid windows-instances entry", "Entry %q: %s", e.key, why)
			continue
		}
		user, why := parseUsername(e.value)
		if why != "" {
			b.errorf(valRng, "Invalid windows-instances entry", "Entry %q: %s", e.key, why)
			continue
		}
		// DNS names are case-insensitive: two spellings are one host.
		if first, dup := seen[strings.ToLower(e.key)]; dup {
			b.errorf(keyRng, "Invalid windows-instances entry", "Entry %q names the same host as entry %q (DNS names are case-insensitive); keep one of them.",
				e.key, first)
			continue
		}
		seen[strings.ToLower(e.key)] = e.key
		if !b.room(1, keyRng) {
			break
		}
		h := b.host(e.key, keyRng)
		h.Vars["ansible_host"] = Var{Value: cty.StringVal(e.key), Range: keyRng}
		h.Vars["ansible_user"] = Var{Value: cty.StringVal(user), Range: valRng}
		b.addHost(WindowsInstancesGroup, e.key)
	}
	return b.finish()
}

// checkAddress explains why key is neither an IPv4 address nor an RFC 1123
// DNS name, or returns "".
func checkAddress(key string) string {
	const want = "a key must be the host's IPv4 address (10.0.0.11) or DNS name (win01.example.com)"
	switch {
	case key == "":
		return "the key is empty; " + want + "."
	case strings.Contains(key, ":"):
		if ip := net.ParseIP(strings.Trim(key, "[]")); ip != nil && ip.To4() == nil {
			return fmt.Sprintf("it is an IPv6 address, which BYOH does not support: %s.", want)
		}
		return fmt.Sprintf("the key contains ':'; %s, without a port.", want)
	}
	if ip := net.ParseIP(key); ip != nil && ip.To4() != nil {
		return ""
	}
	if len(key) > 253 {
		return fmt.Sprintf("the DNS name is %d characters long; at most 253 are allowed.", len(key))
	}
	labels := strings.Split(key, ".")
	numeric := true
	for _, l := range labels {
		if !isDigits(l) {
			numeric = false
		}
	}
	if numeric {
		return "it is not a valid IPv4 address (four numbers from 0 to 255, without leading zeros)."
	}
	for _, l := range labels {
		switch {
		case l == "":
			return fmt.Sprintf("the DNS name has an empty label (two dots in a row, or a dot at either end); %s.", want)
		case len(l) > 63:
			return fmt.Sprintf("the label %q is %d characters long; DNS labels have at most 63.", l, len(l))
		case l[0] == '-' || l[len(l)-1] == '-':
			return fmt.Sprintf("the label %q starts or ends with '-', which DNS names do not allow.", l)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Sprintf("the key contains %q; DNS names have only letters, digits, '-' and '.'. %s.", r, upperFirst(want))
			}
		}
	}
	return ""
}

// parseUsername reads "username=<user>" (spaces around it are ignored) and
// returns the user, or why the value is not of that form.
func parseUsername(value string) (string, string) {
	v := strings.TrimSpace(value)
	const form = "the value must be exactly username=<user>, e.g. username=Administrator"
	if !strings.HasPrefix(v, usernamePrefix) {
		name, rest, found := strings.Cut(v, "=")
		name = strings.TrimSpace(name)
		switch {
		case v == "":
			return "", "the value is empty; " + form + "."
		case found && strings.EqualFold(name, "username"):
			return "", fmt.Sprintf("%s; write it as %s%s.", form, usernamePrefix, strings.TrimSpace(rest))
		case found && (closest(name, []string{"username"}) != "" || strings.Contains(strings.ToLower(name), "user")):
			return "", fmt.Sprintf(`%s. Did you mean "username"?`, form)
		case !found:
			return "", fmt.Sprintf("%s; put username= before the user name.", form)
		}
		return "", fmt.Sprintf("%s; the only key wsu and the Windows Machine Config Operator read is username.", form)
	}
	user := v[len(usernamePrefix):]
	if user == "" {
		return "", "the user name after username= is empty; " + form + "."
	}
	for _, r := range user {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return "", "the user name contains a space or control character; " + form + ", with nothing after the user name (no other keys)."
		case strings.ContainsRune(`=,;"/[]:|+*?<>`, r):
			return "", fmt.Sprintf("the user name contains %q; %s, with nothing after the user name (no other keys).", r, form)
		}
	}
	return user, ""
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
