package view

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// Bounds on what a diagnostic quotes: huge or binary input (a one-line
// 60 KB list, a binary file given as a playbook) is never echoed whole.
const (
	// maxDiagnostics are shown; a count stands for the rest.
	maxDiagnostics = 20
	// maxQuotedLines a snippet may span; a longer one quotes its first line.
	maxQuotedLines = 10
	// quoteBefore and quoteAfter bound the bytes quoted around the
	// subject's start on a long line.
	quoteBefore = 60
	quoteAfter  = 100
)

// excerpt returns the source and diagnostic to quote for d: src and d
// themselves when the snippet is short and printable, else a stand-in
// source holding only a bounded, printable piece of the subject's line
// (at the same line number, "…" where it was cut) and a copy of d pointing
// into it. The diagnostic writer quotes whole lines, so it is handed the
// excerpt instead of the file.
func excerpt(src []byte, d *hcl.Diagnostic) ([]byte, *hcl.Diagnostic) {
	s := d.Subject
	if s == nil || s.Start.Byte > len(src) || s.End.Byte > len(src) || s.Start.Byte > s.End.Byte {
		return src, d
	}
	lineStart := bytes.LastIndexByte(src[:s.Start.Byte], '\n') + 1
	lineEnd := len(src)
	if i := bytes.IndexByte(src[s.Start.Byte:], '\n'); i >= 0 {
		lineEnd = s.Start.Byte + i
	}
	if quotable(src, d, lineStart) {
		return src, d
	}
	from := max(lineStart, s.Start.Byte-quoteBefore)
	to := min(lineEnd, s.Start.Byte+quoteAfter)
	from, to = runeStart(src, from, lineStart), runeStart(src, to, lineStart)
	hlEnd := min(max(s.End.Byte, s.Start.Byte), to)
	before := printable(src[from:s.Start.Byte])
	hl := printable(src[s.Start.Byte:hlEnd])
	after := printable(src[hlEnd:to])
	if from > lineStart {
		before = "…" + before
	}
	if to < lineEnd {
		after += "…"
	}
	var b strings.Builder
	b.WriteString(strings.Repeat("\n", s.Start.Line-1))
	start := b.Len() + len(before)
	b.WriteString(before + hl + after + "\n")
	c := *d
	c.Context = nil
	c.Subject = &hcl.Range{Filename: s.Filename,
		Start: hcl.Pos{Line: s.Start.Line, Column: s.Start.Column, Byte: start},
		End:   hcl.Pos{Line: s.Start.Line, Column: s.Start.Column + utf8.RuneCountInString(hl), Byte: start + len(hl)}}
	return []byte(b.String()), &c
}

// quotable reports whether d's snippet is short and printable enough to
// quote as it is.
func quotable(src []byte, d *hcl.Diagnostic, lineStart int) bool {
	s := d.Subject
	first, last := s.Start.Line, s.End.Line
	if d.Context != nil && d.Context.Filename == s.Filename {
		first, last = min(first, d.Context.Start.Line), max(last, d.Context.End.Line)
	}
	if last-first+1 > maxQuotedLines {
		return false
	}
	// The snippet's lines: from the first line's start to the last's end.
	from := lineStart
	for l := s.Start.Line; l > first && from > 0; l-- {
		from = bytes.LastIndexByte(src[:from-1], '\n') + 1
	}
	to := s.Start.Byte
	for l := s.Start.Line; l <= last; l++ {
		i := bytes.IndexByte(src[to:], '\n')
		if i < 0 {
			to = len(src)
			break
		}
		to += i + 1
	}
	for _, line := range bytes.Split(src[from:to], []byte("\n")) {
		if len(line) > quoteBefore+quoteAfter || printable(line) != string(line) {
			return false
		}
	}
	return true
}

// printable replaces control characters (tab aside) and invalid UTF-8 with
// U+FFFD, so a binary file's bytes cannot drive the terminal.
func printable(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || unicode.IsPrint(r) {
			return r
		}
		return utf8.RuneError
	}, strings.ToValidUTF8(string(b), string(utf8.RuneError)))
}

// runeStart moves i back to the start of the rune it is in, not before min.
func runeStart(src []byte, i, floor int) int {
	for i > floor && i < len(src) && !utf8.RuneStart(src[i]) {
		i--
	}
	return i
}
