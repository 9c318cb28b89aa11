package view

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\nnext ünïcode ✓": "plain\ttext\nnext ünïcode ✓",
		"a\x1b[2Jb":                   `a\x1b[2Jb`,
		"line\r\nnext\r\n":            "line\nnext\n", // Windows line endings
		"over\rwrite":                 `over\x0dwrite`,
		"del\x7f nul\x00 bell\x07":    `del\x7f nul\x00 bell\x07`,
		"c1 \u009b31m":                `c1 \x9b31m`,
		"bad \x9b byte":               `bad \x9b byte`,
		"\u202aa\u202eb\u2066c\u2069": `\u202aa\u202eb\u2066c\u2069`,
		"lrm \u200e stays":            "lrm \u200e stays",
	} {
		assert.Equal(t, want, Escape(in), "%q", in)
	}
}
