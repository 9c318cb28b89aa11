package inventory

import (
	"fmt"
	"strconv"
	"strings"
)

// maxExpandedHosts bounds one host pattern so a typo like win[0:99999999]
// is an error instead of an out-of-memory crash.
const maxExpandedHosts = 10000

const asciiLetters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

// patternError is a problem in a host pattern; start/end are byte offsets
// into the pattern so callers can locate it in their file.
type patternError struct {
	start, end      int
	summary, detail string
}

// hostPattern is a parsed inventory host entry such as "win[01:03]:5986".
type hostPattern struct {
	names     []string
	port      string
	portStart int // offset of the port in the pattern
}

// expandHostPattern splits off an optional ":port" and expands every
// [start:end] or [start:end:step] range, as Ansible's inventory parsers do.
func expandHostPattern(p string) (hostPattern, *patternError) {
	var hp hostPattern
	colons, last, depth := 0, -1, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ':':
			if depth == 0 {
				colons++
				last = i
			}
		}
	}
	// More than one colon outside brackets is an IPv6 address; keep it whole.
	if colons == 1 {
		port := p[last+1:]
		if !isDigits(port) {
			return hp, &patternError{last, len(p), "Invalid port",
				fmt.Sprintf("The text after ':' in %q must be a port number, e.g. win01:5986.", p)}
		}
		if n, err := strconv.Atoi(port); err != nil || n > 65535 {
			return hp, &patternError{last + 1, len(p), "Invalid port",
				fmt.Sprintf("Port %s is out of range (1-65535).", port)}
		}
		hp.port, hp.portStart = port, last+1
		p = p[:last]
	}
	if p == "" {
		return hp, &patternError{0, 0, "Missing host name", "A host entry needs a name before the port."}
	}

	// Split into literal text and range alternatives, then take the product.
	parts := [][]string{}
	total := 1
	lit := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case ']':
			return hp, &patternError{i, i + 1, "Invalid host name",
				fmt.Sprintf("%q has a ']' without a matching '['.", p)}
		case '[':
			end := strings.IndexAny(p[i+1:], "[]")
			if end < 0 || p[i+1+end] == '[' {
				return hp, &patternError{i, i + 1, "Unterminated host range",
					fmt.Sprintf("The range in %q has no closing ']'. Write it as [start:end], e.g. win[01:10].", p)}
			}
			end += i + 1
			alts, perr := expandRange(p[i+1 : end])
			if perr != nil {
				perr.start, perr.end = i, end+1
				return hp, perr
			}
			parts = append(parts, []string{p[lit:i]}, alts)
			total *= len(alts)
			if total > maxExpandedHosts {
				return hp, &patternError{i, end + 1, "Host range too large",
					fmt.Sprintf("%q expands to more than %d hosts.", p, maxExpandedHosts)}
			}
			i, lit = end, end+1
		}
	}
	parts = append(parts, []string{p[lit:]})

	names := []string{""}
	for _, alts := range parts {
		next := make([]string, 0, len(names)*len(alts))
		for _, prefix := range names {
			for _, a := range alts {
				next = append(next, prefix+a)
			}
		}
		names = next
	}
	hp.names = names
	return hp, nil
}

// expandRange expands the inside of one [...] range. Offsets in the returned
// error are filled in by the caller.
func expandRange(inner string) ([]string, *patternError) {
	bad := func(summary, detail string, args ...any) ([]string, *patternError) {
		return nil, &patternError{summary: summary, detail: fmt.Sprintf(detail, args...)}
	}
	f := strings.Split(inner, ":")
	if len(f) != 2 && len(f) != 3 {
		return bad("Invalid host range", "[%s] is not a range. Write [start:end] or [start:end:step], e.g. win[01:10] or web[a:c].", inner)
	}
	beg, end := f[0], f[1]
	step := 1
	if len(f) == 3 {
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 1 {
			return bad("Invalid host range step", "The step in [%s] must be a positive whole number.", inner)
		}
		step = n
	}
	if beg == "" {
		beg = "0" // Ansible treats [:5] as [0:5]
	}
	if end == "" {
		return bad("Invalid host range", "The range [%s] has no end value.", inner)
	}

	if isDigits(beg) && isDigits(end) {
		if len(beg) > 9 || len(end) > 9 {
			return bad("Host range too large", "The numbers in [%s] are too large.", inner)
		}
		b, _ := strconv.Atoi(beg)
		e, _ := strconv.Atoi(end)
		if b > e {
			return bad("Invalid host range", "The range [%s] counts down: its start %s is after its end %s.", inner, beg, end)
		}
		// A leading zero means "keep this width", so both ends must agree.
		width := 0
		if len(beg) > 1 && beg[0] == '0' {
			width = len(beg)
			if len(end) != width {
				return bad("Invalid host range", "In [%s] the start is zero-padded to %d digits but the end has %d; write both with the same width, e.g. [01:10].", inner, width, len(end))
			}
		}
		if (e-b)/step+1 > maxExpandedHosts {
			return bad("Host range too large", "[%s] expands to more than %d hosts.", inner, maxExpandedHosts)
		}
		var out []string
		for n := b; n <= e; n += step {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
		return out, nil
	}

	bi, ei := strings.Index(asciiLetters, beg), strings.Index(asciiLetters, end)
	if len(beg) == 1 && len(end) == 1 && bi >= 0 && ei >= 0 {
		if bi > ei {
			return bad("Invalid host range", "The range [%s] counts down: %s comes after %s.", inner, beg, end)
		}
		var out []string
		for i := bi; i <= ei; i += step {
			out = append(out, asciiLetters[i:i+1])
		}
		return out, nil
	}
	return bad("Invalid host range", "Both ends of [%s] must be numbers (win[01:10]) or single letters (web[a:c]).", inner)
}
