package hashcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/transport/local"
)

// counting counts the hashes that reach the wrapped host.
type counting struct {
	host.Host
	n atomic.Int64
}

func (c *counting) SHA256(ctx context.Context, path string) (string, error) {
	c.n.Add(1)
	return c.Host.SHA256(ctx, path)
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// old is an mtime well before the racy window.
var old = time.Now().Add(-time.Hour).Truncate(time.Second)

// writeOld writes a file and backdates it, as payload files are.
func writeOld(t *testing.T, path string, content []byte, mtime time.Time) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, content, 0o644))
	require.NoError(t, os.Chtimes(path, mtime, mtime))
}

func TestSHA256(t *testing.T) {
	ctx := context.Background()
	orig := []byte("kube-proxy v1")
	tests := []struct {
		name   string
		change func(t *testing.T, h host.Host, path string) // after the first hash
		want   []byte                                       // content hashed second
		rehash bool
	}{
		{"unchanged", func(*testing.T, host.Host, string) {}, orig, false},
		{"content and mtime changed", func(t *testing.T, _ host.Host, p string) {
			writeOld(t, p, []byte("kube-proxy v2"), old.Add(time.Minute))
		}, []byte("kube-proxy v2"), true},
		{"size changed, mtime kept", func(t *testing.T, _ host.Host, p string) {
			writeOld(t, p, []byte("kube-proxy v10"), old)
		}, []byte("kube-proxy v10"), true},
		{"mtime changed only", func(t *testing.T, _ host.Host, p string) {
			require.NoError(t, os.Chtimes(p, old, old.Add(time.Second)))
		}, orig, true},
		{"same size and mtime, written through the wrapper", func(t *testing.T, h host.Host, p string) {
			require.NoError(t, h.WriteFile(ctx, p, bytes.NewReader([]byte("kube-proxy v3")), 0o644))
			require.NoError(t, os.Chtimes(p, old, old)) // only the invalidation can tell
		}, []byte("kube-proxy v3"), true},
		{"same size and mtime, uploaded through the wrapper", func(t *testing.T, h host.Host, p string) {
			require.NoError(t, host.Upload(ctx, h, p, bytes.NewReader([]byte("kube-proxy v5")), 0o644))
			require.NoError(t, os.Chtimes(p, old, old))
		}, []byte("kube-proxy v5"), true},
		{"same size and mtime, replaced behind the wrapper, then chmod through it", func(t *testing.T, h host.Host, p string) {
			// What the SSH transport's SFTP upload does: the agent only
			// sees the chmod that follows.
			writeOld(t, p, []byte("kube-proxy v6"), old)
			require.NoError(t, h.Chmod(ctx, p, 0o644))
		}, []byte("kube-proxy v6"), true},
		{"same size and mtime, removed through the wrapper", func(t *testing.T, h host.Host, p string) {
			require.NoError(t, h.Remove(ctx, filepath.Dir(p), true))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			writeOld(t, p, []byte("kube-proxy v4"), old)
		}, []byte("kube-proxy v4"), true},
		{"modified just now (racy)", func(t *testing.T, _ host.Host, p string) {
			writeOld(t, p, orig, time.Now())
		}, orig, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "k", "kube-proxy.exe")
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			writeOld(t, p, orig, old)
			inner := &counting{Host: local.New()}
			h := Wrap(inner, filepath.Join(dir, "cache.json"))

			got, err := h.SHA256(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, sum(orig), got)
			require.EqualValues(t, 1, inner.n.Load())

			tt.change(t, h, p)
			got, err = h.SHA256(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, sum(tt.want), got)
			want := int64(1)
			if tt.rehash {
				want = 2
			}
			assert.Equal(t, want, inner.n.Load(), "hashes reaching the host")
		})
	}
}

func TestSHA256Persists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p, cacheFile := filepath.Join(dir, "kubelet.exe"), filepath.Join(dir, "state", "hash-cache.json")
	writeOld(t, p, []byte("kubelet"), old)

	first := &counting{Host: local.New()}
	_, err := Wrap(first, cacheFile).SHA256(ctx, p)
	require.NoError(t, err)
	require.FileExists(t, cacheFile)

	second := &counting{Host: local.New()}
	got, err := Wrap(second, cacheFile).SHA256(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("kubelet")), got)
	assert.Zero(t, second.n.Load(), "a new wrapper serves the persisted hash")
}

func TestSHA256CacheFileIgnored(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		content string
	}{
		{"corrupt", "{not json"},
		{"truncated", `{"version":1,"entries":{"x":`},
		{"other version", `{"version":99,"entries":{}}`},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p, cacheFile := filepath.Join(dir, "f"), filepath.Join(dir, "cache.json")
			writeOld(t, p, []byte("payload"), old)
			require.NoError(t, os.WriteFile(cacheFile, []byte(tt.content), 0o644))

			got, err := Wrap(local.New(), cacheFile).SHA256(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, sum([]byte("payload")), got)

			// Rewritten as a valid cache that the next wrapper uses.
			b, err := os.ReadFile(cacheFile)
			require.NoError(t, err)
			var f file
			require.NoError(t, json.Unmarshal(b, &f))
			assert.Equal(t, version, f.Version)
			inner := &counting{Host: local.New()}
			_, err = Wrap(inner, cacheFile).SHA256(ctx, p)
			require.NoError(t, err)
			assert.Zero(t, inner.n.Load())
		})
	}
}

func TestSHA256Errors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := Wrap(local.New(), filepath.Join(dir, "cache.json"))
	_, err := h.SHA256(ctx, filepath.Join(dir, "missing"))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = h.SHA256(ctx, dir)
	assert.Error(t, err, "a directory has no hash")
}

func TestSHA256Concurrent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var paths []string
	for i := range 8 {
		p := filepath.Join(dir, string(rune('a'+i)))
		writeOld(t, p, []byte(p), old)
		paths = append(paths, p)
	}
	inner := &counting{Host: local.New()}
	h := Wrap(inner, filepath.Join(dir, "cache.json"))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, p := range paths {
				got, err := h.SHA256(ctx, p)
				assert.NoError(t, err)
				assert.Equal(t, sum([]byte(p)), got)
			}
		})
	}
	wg.Wait()
	before := inner.n.Load()
	for _, p := range paths {
		_, err := h.SHA256(ctx, p)
		require.NoError(t, err)
	}
	assert.Equal(t, before, inner.n.Load(), "all served from the cache afterwards")
}

// BenchmarkSHA256Cache compares hashing a 300 MB payload-sized file with a
// fresh cache against serving it from the cache.
func BenchmarkSHA256Cache(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir() // removed, with the big file, after the benchmark
	p := filepath.Join(dir, "payload.exe")
	f, err := os.Create(p)
	require.NoError(b, err)
	const size = 300 << 20
	require.NoError(b, f.Truncate(size))
	for _, off := range []int64{0, size / 3, size - 16} {
		_, err := f.WriteAt([]byte("not all zeroes.."), off)
		require.NoError(b, err)
	}
	require.NoError(b, f.Close())
	require.NoError(b, os.Chtimes(p, old, old))

	b.Run("first-hash", func(b *testing.B) {
		b.SetBytes(size)
		cacheFile := filepath.Join(dir, "fresh.json")
		for b.Loop() {
			os.Remove(cacheFile)
			h := Wrap(local.New(), cacheFile)
			if _, err := h.SHA256(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		h := Wrap(local.New(), filepath.Join(dir, "warm.json"))
		if _, err := h.SHA256(ctx, p); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := h.SHA256(ctx, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// stepping reports its file systems' time step, as a platform does.
type stepping struct {
	host.Host
	step time.Duration
}

func (s stepping) ModTimeStep(context.Context, string) time.Duration { return s.step }

// How soon after a write a sum is trusted follows the file system's time
// step: on one stamping at a clock tick, a sum taken 300 ms after the
// write is served to the next run; where the step is FAT's two seconds,
// or not known, it is taken again.
func TestRacyWindowFollowsFileSystem(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		step   time.Duration
		rehash bool
	}{
		{"clock tick (NTFS, ext4)", 16 * time.Millisecond, false},
		{"two seconds (FAT)", 2 * time.Second, true},
		{"not known (a network share)", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p, cacheFile := filepath.Join(dir, "kubelet.exe"), filepath.Join(dir, "hash-cache.json")
			writeOld(t, p, []byte("kubelet"), time.Now().Add(-300*time.Millisecond))
			_, err := Wrap(stepping{Host: local.New(), step: tt.step}, cacheFile).SHA256(ctx, p)
			require.NoError(t, err)

			next := &counting{Host: local.New()}
			got, err := Wrap(stepping{Host: next, step: tt.step}, cacheFile).SHA256(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, sum([]byte("kubelet")), got)
			want := int64(0)
			if tt.rehash {
				want = 1
			}
			assert.Equal(t, want, next.n.Load(), "hashes reaching the host in the next run")
		})
	}
}
