package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKeyInUse: which key of the Secret an instance logs in with, and
// whether a rotation waits for it, from the fingerprint its status records.
func TestKeyInUse(t *testing.T) {
	k := instanceKeys{current: "OLD", currentFP: "SHA256:old", next: "NEW", nextFP: "SHA256:new"}
	tests := []struct {
		name     string
		keys     instanceKeys
		recorded string
		use      string
		pending  bool
	}{
		{"not rotated yet", k, "SHA256:old", "OLD", true},
		{"first run during a rotation", k, "", "OLD", true},
		{"rotated, keys not swapped yet", k, "SHA256:new", "NEW", false},
		{"no rotation", instanceKeys{current: "OLD", currentFP: "SHA256:old"}, "SHA256:old", "OLD", false},
		{"keys swapped by the admin", instanceKeys{current: "NEW", currentFP: "SHA256:new"}, "SHA256:new", "NEW", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.use, tt.keys.inUse(tt.recorded))
			assert.Equal(t, tt.pending, tt.keys.pending(tt.recorded))
		})
	}
}
