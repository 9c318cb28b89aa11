package modutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLines(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		lines    []string
		out      string // after appending "new"
	}{
		{name: "empty", in: "", lines: nil, out: "new\n"},
		{name: "LF", in: "a\nb\n", lines: []string{"a", "b"}, out: "a\nb\nnew\n"},
		{name: "CRLF kept", in: "a\r\nb\r\n", lines: []string{"a", "b"}, out: "a\r\nb\r\nnew\r\n"},
		{name: "last line without newline", in: "a\nb", lines: []string{"a", "b"}, out: "a\nb\nnew\n"},
		{name: "UTF-8 BOM kept, not part of the first line", in: "\xEF\xBB\xBFa\r\n", lines: []string{"a"}, out: "\xEF\xBB\xBFa\r\nnew\r\n"},
		{name: "blank and comment lines kept", in: "# c\n\na\n", lines: []string{"# c", "", "a"}, out: "# c\n\na\nnew\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := ParseLines([]byte(tt.in))
			require.NoError(t, err)
			assert.Equal(t, tt.lines, l.Lines)
			l.Lines = append(l.Lines, "new")
			assert.Equal(t, tt.out, string(l.Bytes()))
		})
	}
	for _, bom := range []string{"\xFF\xFEa\x00", "\xFE\xFF\x00a"} {
		_, err := ParseLines([]byte(bom))
		assert.ErrorIs(t, err, ErrUTF16)
	}
}
