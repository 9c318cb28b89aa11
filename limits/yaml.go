package limits

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// CheckYAML refuses a YAML document beyond MaxFileSize or MaxNesting,
// before it is parsed: nesting counts flow collections ([ and {, outside
// quoted scalars and comments), indentation levels and the "- " entries
// that open a sequence on one line. It errs on the side of counting: a
// block scalar's text may count where the parser would not, which takes
// more than a hundred levels of brackets or indentation to matter.
func CheckYAML(src []byte, filename string) hcl.Diagnostics {
	if d := CheckSize(len(src), MaxFileSize, filename, hcl.InitialPos); d != nil {
		return d
	}
	var indents []int // the indentation of each open block level
	flow := 0
	offset := 0
	for lineNo, line := range bytes.SplitAfter(src, []byte("\n")) {
		col, rest := indentOf(line)
		if flow == 0 && len(rest) > 0 && rest[0] != '#' && rest[0] != '\n' && rest[0] != '\r' {
			for len(indents) > 0 && indents[len(indents)-1] >= col {
				indents = indents[:len(indents)-1]
			}
			indents = append(indents, col)
			for dashes := 0; len(rest) >= 2 && rest[0] == '-' && (rest[1] == ' ' || rest[1] == '\t'); dashes++ {
				col += 2
				indents = append(indents, col)
				_, rest = indentOf(rest[2:])
			}
		}
		if len(indents)+flow > MaxNesting {
			return yamlRefusal(filename, lineNo+1, col+1, offset+col)
		}
		var at int
		var over bool
		flow, at, over = flowDepth(line, flow, MaxNesting-len(indents))
		if over {
			return yamlRefusal(filename, lineNo+1, at+1, offset+at)
		}
		offset += len(line)
	}
	return nil
}

func indentOf(line []byte) (int, []byte) {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	return i, line[i:]
}

// flowDepth follows [ { ] } through one line outside quotes and
// comments, starting at depth. It reports the column where depth passes
// max.
func flowDepth(line []byte, depth, max int) (int, int, bool) {
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '"' && c == '\\':
			i++
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			if i == 0 || isYAMLSep(line[i-1]) {
				quote = c
			}
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return depth, 0, false
		case c == '[' || c == '{':
			if depth > 0 || i == 0 || isYAMLSep(line[i-1]) {
				depth++
				if depth > max {
					return depth, i, true
				}
			}
		case (c == ']' || c == '}') && depth > 0:
			depth--
		}
	}
	return depth, 0, false
}

// isYAMLSep says a byte may precede a collection or a quoted scalar.
func isYAMLSep(c byte) bool {
	return c == ' ' || c == '\t' || c == '[' || c == '{' || c == ',' || c == ':' || c == '-' || c == '?'
}

func yamlRefusal(filename string, line, col, byteOff int) hcl.Diagnostics {
	pos := hcl.Pos{Line: line, Column: col, Byte: byteOff}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Input nested too deeply",
		Detail: fmt.Sprintf("Collections or indentation levels nest more than %d deep here; wsu refuses deeper input before parsing it. %s",
			MaxNesting, docRef),
		Subject: &hcl.Range{Filename: filename, Start: pos, End: hcl.Pos{Line: line, Column: col + 1, Byte: byteOff + 1}},
	}}
}
