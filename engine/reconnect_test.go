package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/inventory"
)

// The engine owns reconnect_timeout (transports ignore it): its default,
// its spellings and its errors.
func TestReconnectTimeout(t *testing.T) {
	read := func(t *testing.T, line string) (time.Duration, error) {
		t.Helper()
		inv, diags := inventory.ParseINI("inv.ini", []byte(line+"\n"))
		require.False(t, diags.HasErrors(), "%v", diags)
		return reconnectTimeout(inv.HostVars("win01"))
	}
	for _, tt := range []struct {
		line string
		want time.Duration
	}{
		{"win01", DefaultReconnectTimeout},
		{"win01 reconnect_timeout=2m", 2 * time.Minute},
		{"win01 reconnect_timeout=90s", 90 * time.Second},
		{"win01 reconnect_timeout=45", 45 * time.Second},
	} {
		d, err := read(t, tt.line)
		require.NoError(t, err, tt.line)
		assert.Equal(t, tt.want, d, tt.line)
	}
	assert.Equal(t, 5*time.Minute, DefaultReconnectTimeout)

	for _, bad := range []string{"soon", "-1m", "5x"} {
		_, err := read(t, "win01 reconnect_timeout="+bad)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "inv.ini:1:", "names where it was set")
		assert.Contains(t, err.Error(), `reconnect_timeout must be a duration such as "30s" or "5m", or a number of seconds`)
	}
}
