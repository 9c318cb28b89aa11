package hashcache

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The agent's own sum is served from the cache file while the binary's
// size and mtime hold, and taken again when they change.
func TestLocalSHA256(t *testing.T) {
	dir := t.TempDir()
	bin, cacheFile := filepath.Join(dir, "wsu"), filepath.Join(dir, "cache.json")
	require.NoError(t, os.WriteFile(bin, []byte("agent v1"), 0o755))
	require.NoError(t, os.Chtimes(bin, old, old))

	got, err := LocalSHA256(cacheFile, bin)
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("agent v1")), got)

	// Served from the cache: a planted sum comes back.
	b, err := os.ReadFile(cacheFile)
	require.NoError(t, err)
	var f file
	require.NoError(t, json.Unmarshal(b, &f))
	require.Contains(t, f.Entries, "local:"+bin)
	f.Entries["local:"+bin].SHA256 = "planted"
	b, _ = json.Marshal(f)
	require.NoError(t, os.WriteFile(cacheFile, b, 0o644))
	got, err = LocalSHA256(cacheFile, bin)
	require.NoError(t, err)
	assert.Equal(t, "planted", got)

	// A new build: hashed again.
	require.NoError(t, os.WriteFile(bin, []byte("agent v2"), 0o755))
	got, err = LocalSHA256(cacheFile, bin)
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("agent v2")), got)

	// Without a usable cache file it still answers.
	got, err = LocalSHA256(filepath.Join(dir, "missing", "dir", "x"), bin)
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("agent v2")), got)
}

// A sum taken within the racy window of the binary's last write is not
// trusted: a build replaced in the same clock tick, same size, same mtime
// (a copy that keeps times), is hashed again.
func TestLocalSHA256Racy(t *testing.T) {
	dir := t.TempDir()
	bin, cacheFile := filepath.Join(dir, "wsu"), filepath.Join(dir, "cache.json")
	now := time.Now()
	require.NoError(t, os.WriteFile(bin, []byte("agent v1"), 0o755))
	require.NoError(t, os.Chtimes(bin, now, now))
	got, err := LocalSHA256(cacheFile, bin)
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("agent v1")), got)

	require.NoError(t, os.WriteFile(bin, []byte("agent v2"), 0o755))
	require.NoError(t, os.Chtimes(bin, now, now))
	got, err = LocalSHA256(cacheFile, bin)
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("agent v2")), got)
}
