package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
)

// TestRecordKnownHostsConcurrently: trust on first use from many dials at
// once — hosts of one run, and runs of one process, each with its own
// policy — records each host's key once, in whole lines. The appends are
// serialised by a lock on the file (no process-wide lock).
func TestRecordKnownHostsConcurrently(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "known_hosts")
	const hosts, dialsPerHost = 8, 4
	keys := make([]gossh.PublicKey, hosts)
	for i := range keys {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		require.NoError(t, err)
		keys[i], err = gossh.NewPublicKey(pub)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	added := make([][]bool, hosts)
	for i := range hosts {
		added[i] = make([]bool, dialsPerHost)
		for j := range dialsPerHost {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := hostKeyPolicy{knownHosts: file, tofu: true} // a run's own policy
				var err error
				added[i][j], err = p.record(fmt.Sprintf("10.9.0.%d:22", i+1), keys[i])
				assert.NoError(t, err)
			}()
		}
	}
	wg.Wait()
	for i := range hosts {
		n := 0
		for _, a := range added[i] {
			if a {
				n++
			}
		}
		assert.Equal(t, 1, n, "host %d's key recorded by exactly one dial", i+1)
	}
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	assert.Len(t, lines, hosts)
	for _, l := range lines {
		_, _, _, _, _, err := gossh.ParseKnownHosts([]byte(l))
		assert.NoError(t, err, "whole line %q", l)
	}
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}
