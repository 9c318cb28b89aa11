package view

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
)

// Escape makes text from a host (file content in a diff, a command's
// stderr, a print message) safe to write to a terminal: a control code
// could otherwise move the cursor, clear or retitle the screen, or redraw
// the plan the operator is reviewing. Every C0 control but newline and
// tab, DEL, every C1 control and every invalid UTF-8 byte (an 8-bit
// terminal reads 0x9b as CSI) becomes \xNN; the Unicode bidi embeddings,
// overrides and isolates (U+202A–U+202E, U+2066–U+2069), which reorder
// what is shown, become \uNNNN. A CR before a LF (Windows line endings)
// is dropped; a lone CR, which overwrites the line, is escaped. Human
// output only: JSON keeps the text exact.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			// CRLF: the LF ends the line.
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case bidi(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) || bidi(r) {
			return true
		}
		i += n
	}
	return false
}

func bidi(r rune) bool { return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) }

// escapeEvent is e with every text Human prints escaped (a copy: the JSON
// view gets the same event).
func escapeEvent(e engine.Event) engine.Event {
	e.Play, e.Host, e.Task, e.Key, e.Message, e.NothingChecked = Escape(e.Play), Escape(e.Host), Escape(e.Task), Escape(e.Key), Escape(e.Message), Escape(e.NothingChecked)
	e.Change = escapeChange(e.Change)
	if e.Diagnostics != nil {
		ds := make([]engine.DiagnosticView, len(e.Diagnostics))
		for i, d := range e.Diagnostics {
			d.Summary, d.Detail = Escape(d.Summary), Escape(d.Detail)
			ds[i] = d
		}
		e.Diagnostics = ds
	}
	return e
}

// escapeChange is c with its texts escaped (a copy).
func escapeChange(c *planfile.Change) *planfile.Change {
	if c == nil {
		return nil
	}
	out := *c
	out.Subject, out.Diff = Escape(c.Subject), Escape(c.Diff)
	out.Fields = make([]planfile.Field, len(c.Fields))
	for i, f := range c.Fields {
		f.Name, f.Old, f.New = Escape(f.Name), Escape(f.Old), Escape(f.New)
		out.Fields[i] = f
	}
	out.Restarts = make([]string, len(c.Restarts))
	for i, r := range c.Restarts {
		out.Restarts[i] = Escape(r)
	}
	return &out
}

// escapeTask is a saved plan's task with its texts escaped.
func escapeTask(t planfile.Task) planfile.Task {
	t.Address, t.Summary, t.Module = Escape(t.Address), Escape(t.Summary), Escape(t.Module)
	t.Change = escapeChange(t.Change)
	return t
}

// escapeDiagnostic is d with its summary and detail escaped (a copy).
func escapeDiagnostic(d *hcl.Diagnostic) *hcl.Diagnostic {
	c := *d
	c.Summary, c.Detail = Escape(d.Summary), Escape(d.Detail)
	return &c
}
