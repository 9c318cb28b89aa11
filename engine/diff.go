package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/wsu-project/wsu/modules"
)

// maxDiffLines bounds a shown content diff; a count stands for the rest.
const maxDiffLines = 200

// contentDiff is the unified diff (3 lines of context) of a file's content
// for the views, or a note in parentheses when there is none to show: the
// content is binary (a NUL byte, or not UTF-8), larger than
// modules.MaxDiffBytes, or the module said why (Omitted). A sensitive task
// never gets here (renderChange).
func contentDiff(path string, c *modules.ContentChange) string {
	switch {
	case c.Omitted != "":
		return "(no content diff: " + c.Omitted + "; compare by sha256)"
	case binary(c.Old) || binary(c.New):
		return "(binary content: compare by sha256)"
	case len(c.Old) > modules.MaxDiffBytes || len(c.New) > modules.MaxDiffBytes:
		return fmt.Sprintf("(no content diff: larger than %d KiB; compare by sha256)", modules.MaxDiffBytes>>10)
	}
	from := path
	if c.Old == "" {
		from = "/dev/null"
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(c.Old), B: lines(c.New), FromFile: from, ToFile: path, Context: 3,
	})
	if err != nil || text == "" {
		return ""
	}
	out := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(out) > maxDiffLines {
		rest := len(out) - maxDiffLines
		out = append(out[:maxDiffLines], fmt.Sprintf("(… %d more diff lines not shown)", rest))
	}
	return strings.Join(out, "\n")
}

// lines splits content into lines that each end in a newline; a last line
// without one is marked as diff marks it.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	out := strings.SplitAfter(s, "\n")
	if out[len(out)-1] == "" {
		return out[:len(out)-1]
	}
	out[len(out)-1] += "\n\\ No newline at end of file\n"
	return out
}

func binary(s string) bool {
	return strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s)
}
