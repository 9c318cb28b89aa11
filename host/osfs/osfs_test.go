package osfs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTempPattern(t *testing.T) {
	tests := []struct{ base, want string }{
		{"a.txt", ".wsu-tmp-a.txt-*"},
		{strings.Repeat("a", 100), ".wsu-tmp-" + strings.Repeat("a", maxTempBase) + "-*"},
		// 63 ASCII bytes then a two-byte rune: the rune must not be split.
		{strings.Repeat("a", 63) + "é", ".wsu-tmp-" + strings.Repeat("a", 63) + "-*"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, TempPattern(tt.base))
	}
}
