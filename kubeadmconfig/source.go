package kubeadmconfig

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"gopkg.in/yaml.v3"
)

// source maps yaml.v3's line and column (1-based, columns in runes) to hcl
// positions with byte offsets, so every diagnostic points into the file.
type source struct {
	name  string
	src   []byte
	lines []int // byte offset where each line starts
}

func newSource(name string, src []byte) *source {
	s := &source{name: name, src: src, lines: []int{0}}
	for i, c := range src {
		if c == '\n' {
			s.lines = append(s.lines, i+1)
		}
	}
	return s
}

// offset is the byte offset of line:col, clamped into the file.
func (s *source) offset(line, col int) int {
	line = min(max(line, 1), len(s.lines))
	off := s.lines[line-1]
	for c := 1; c < col && off < len(s.src) && s.src[off] != '\n'; c++ {
		_, size := utf8.DecodeRune(s.src[off:])
		off += size
	}
	return off
}

func (s *source) pos(off int) hcl.Pos {
	line := 1
	for line < len(s.lines) && s.lines[line] <= off {
		line++
	}
	return hcl.Pos{Line: line, Column: 1 + utf8.RuneCount(s.src[s.lines[line-1]:off]), Byte: off}
}

// at is the range of node n: a scalar's text on its line (quotes
// included), or the point where any other node starts.
func (s *source) at(n *yaml.Node) hcl.Range {
	start := s.offset(n.Line, n.Column)
	end := start
	if n.Kind == yaml.ScalarNode && n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
		runes := utf8.RuneCountInString(n.Value)
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			runes += 2
		}
		for i := 0; i < runes && end < len(s.src) && s.src[end] != '\n'; i++ {
			_, size := utf8.DecodeRune(s.src[end:])
			end += size
		}
	}
	return hcl.Range{Filename: s.name, Start: s.pos(start), End: s.pos(end)}
}

// line is the range of the start of line n (1-based).
func (s *source) line(n int) hcl.Range {
	off := s.offset(n, 1)
	return hcl.Range{Filename: s.name, Start: s.pos(off), End: s.pos(off)}
}

var yamlErrRe = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxError is a YAML parser's error located at the line it names. The
// parser's messages name characters and tokens, never a value.
func (s *source) syntaxError(err error) *hcl.Diagnostic {
	msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 1
	if m := yamlErrRe.FindStringSubmatch(err.Error()); m != nil {
		msg = m[2]
		if m[1] != "" {
			line, _ = strconv.Atoi(m[1])
		}
	}
	r := s.line(line)
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid YAML",
		Detail: fmt.Sprintf("The join configuration is not valid YAML: %s.", msg), Subject: &r}
}
