package windows

import "strings"

// escapeArg quotes one argument so that the Microsoft C runtime (and Go's
// os.Args on Windows) reads it back unchanged: the rules of
// syscall.EscapeArg, kept here so they are testable off Windows.
func escapeArg(s string) string {
	if s == "" {
		return `""`
	}
	if !strings.ContainsAny(s, " \t\"\\") {
		return s
	}
	quote := strings.ContainsAny(s, " \t")
	var b strings.Builder
	if quote {
		b.WriteByte('"')
	}
	slashes := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			slashes++
		case '"':
			// Backslashes before a quote are doubled, and the quote escaped.
			b.WriteString(strings.Repeat(`\`, slashes+1))
			slashes = 0
		default:
			slashes = 0
		}
		b.WriteByte(s[i])
	}
	if quote {
		// Trailing backslashes would escape the closing quote.
		b.WriteString(strings.Repeat(`\`, slashes))
		b.WriteByte('"')
	}
	return b.String()
}

// buildCommandLine is a service's command line. The program name follows
// argv[0] rules (quotes only, no escapes), which a Windows path needs anyway:
// it cannot contain a quote.
func buildCommandLine(exe string, args []string) string {
	var b strings.Builder
	if exe == "" || strings.ContainsAny(exe, " \t") {
		b.WriteString(`"` + exe + `"`)
	} else {
		b.WriteString(exe)
	}
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(escapeArg(a))
	}
	return b.String()
}

// parseCommandLine splits a service's command line into program and
// arguments, the inverse of buildCommandLine. It also reads command lines
// written by others: an unquoted program path with spaces
// (C:\Program Files\x\y.exe -a) is taken up to the first ".exe" followed by
// a blank, the way the SCM resolves it.
func parseCommandLine(cmd string) (exe string, args []string) {
	cmd = strings.TrimLeft(cmd, " \t")
	if strings.HasPrefix(cmd, `"`) {
		end := strings.IndexByte(cmd[1:], '"')
		if end < 0 {
			return cmd[1:], nil
		}
		exe, cmd = cmd[1:1+end], cmd[2+end:]
	} else {
		end := strings.IndexAny(cmd, " \t")
		if end < 0 {
			return cmd, nil
		}
		exe, cmd = cmd[:end], cmd[end:]
		if !strings.HasSuffix(strings.ToLower(exe), ".exe") {
			if i := exeEnd(exe + cmd); i > len(exe) {
				full := exe + cmd
				exe, cmd = full[:i], full[i:]
			}
		}
	}
	return exe, splitArgs(cmd)
}

// exeEnd returns the index just past the first ".exe" that ends a word, or
// -1. Words before it that look like arguments (-x, /x, k=v, quotes) mean the
// line is a program without extension followed by its arguments.
func exeEnd(s string) int {
	lower := strings.ToLower(s)
	for off := 0; ; {
		i := strings.Index(lower[off:], ".exe")
		if i < 0 {
			return -1
		}
		end := off + i + len(".exe")
		if end == len(s) || s[end] == ' ' || s[end] == '\t' {
			for _, w := range strings.Fields(s[:end])[1:] {
				if strings.ContainsAny(w[:1], "-/\"") || strings.ContainsAny(w, "=\"") {
					return -1
				}
			}
			return end
		}
		off = end
	}
}

// splitArgs splits arguments by the C runtime rules: 2n backslashes before a
// quote are n backslashes and a quote toggle, 2n+1 are n and a literal
// quote, and "" inside quotes is a literal quote.
func splitArgs(cmd string) []string {
	var args []string
	for {
		cmd = strings.TrimLeft(cmd, " \t")
		if cmd == "" {
			return args
		}
		var b strings.Builder
		inQuote, slashes := false, 0
		i := 0
	word:
		for ; i < len(cmd); i++ {
			c := cmd[i]
			switch {
			case c == '\\':
				slashes++
				continue
			case c == '"':
				b.WriteString(strings.Repeat(`\`, slashes/2))
				if slashes%2 == 1 {
					b.WriteByte('"')
				} else if inQuote && i+1 < len(cmd) && cmd[i+1] == '"' {
					b.WriteByte('"')
					i++
					inQuote = false
				} else {
					inQuote = !inQuote
				}
				slashes = 0
				continue
			case (c == ' ' || c == '\t') && !inQuote:
				break word
			}
			b.WriteString(strings.Repeat(`\`, slashes))
			slashes = 0
			b.WriteByte(c)
		}
		b.WriteString(strings.Repeat(`\`, slashes))
		args = append(args, b.String())
		cmd = cmd[i:]
	}
}
