package inventory

import (
	"sort"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// srcFile maps byte offsets and yaml.v3 line/column pairs to hcl positions,
// so every Var and diagnostic can point at the exact spot in the file.
type srcFile struct {
	name  string
	src   []byte
	lines []int // byte offset where each line starts
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

func newSrcFile(name string, src []byte) *srcFile {
	f := &srcFile{name: name, src: src}
	start := 0
	// Notepad writes a BOM; it is not part of the first line's columns.
	if len(src) >= 3 && string(src[:3]) == string(utf8BOM) {
		start = 3
	}
	f.lines = append(f.lines, start)
	for i := start; i < len(src); i++ {
		if src[i] == '\n' {
			f.lines = append(f.lines, i+1)
		}
	}
	return f
}

// pos converts a byte offset into a position; columns count runes.
func (f *srcFile) pos(off int) hcl.Pos {
	if off < f.lines[0] {
		off = f.lines[0]
	}
	if off > len(f.src) {
		off = len(f.src)
	}
	i := sort.Search(len(f.lines), func(i int) bool { return f.lines[i] > off }) - 1
	if i < 0 {
		i = 0
	}
	start := f.lines[i]
	return hcl.Pos{Line: i + 1, Column: 1 + utf8.RuneCount(f.src[start:off]), Byte: off}
}

// rng returns the range covering the byte offsets [start, end).
func (f *srcFile) rng(start, end int) hcl.Range {
	if end < start {
		end = start
	}
	return hcl.Range{Filename: f.name, Start: f.pos(start), End: f.pos(end)}
}

// offsetLC converts a 1-based line and rune column (as yaml.v3 reports them)
// into a byte offset, clamping anything out of range rather than failing:
// yaml.v3 also breaks lines at \r and U+2028, which this table does not.
func (f *srcFile) offsetLC(line, col int) int {
	if line < 1 {
		line = 1
	}
	if line > len(f.lines) {
		line = len(f.lines)
	}
	off := f.lines[line-1]
	for c := 1; c < col && off < len(f.src) && f.src[off] != '\n'; c++ {
		_, size := utf8.DecodeRune(f.src[off:])
		off += size
	}
	return off
}

// rngLC is a range starting at line:col spanning n runes (0 for a point).
func (f *srcFile) rngLC(line, col, n int) hcl.Range {
	start := f.offsetLC(line, col)
	end := start
	for i := 0; i < n && end < len(f.src) && f.src[end] != '\n'; i++ {
		_, size := utf8.DecodeRune(f.src[end:])
		end += size
	}
	return f.rng(start, end)
}
