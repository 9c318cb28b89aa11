package osexec

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCapture(t *testing.T) {
	tests := []struct {
		name      string
		writes    []string
		limit     int
		want      string
		truncated bool
	}{
		{name: "fits", writes: []string{"ab", "cd"}, limit: 4, want: "abcd"},
		{name: "split write", writes: []string{"ab", "cdef"}, limit: 4, want: "abcd", truncated: true},
		{name: "after full", writes: []string{"abcd", "e"}, limit: 4, want: "abcd", truncated: true},
		{name: "empty write when full", writes: []string{"abcd", ""}, limit: 4, want: "abcd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &capture{limit: tt.limit}
			for _, w := range tt.writes {
				n, err := c.Write([]byte(w))
				require.NoError(t, err)
				assert.Equal(t, len(w), n, "capture must accept everything")
			}
			assert.Equal(t, tt.want, c.buf.String())
			assert.Equal(t, tt.truncated, c.truncated)
		})
	}
}
