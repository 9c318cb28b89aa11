package windows

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// With sha256 given, planning compares the host's file with it and never
// reads src: here src is not even what the sum says, and the host's file,
// which is, needs nothing.
func TestCopySHA256PlanReadsNoSource(t *testing.T) {
	h := newHost(t)
	writeFile(t, h, kubeProxy, "hello")
	cfg := cfgFor(t, Copy{}, map[string]cty.Value{
		"src": cty.StringVal(localSrc(t, "other")), "dest": cty.StringVal(kubeProxy), "sha256": cty.StringVal(helloSHA),
	})
	pr := plan(t, Copy{}, h, cfg)
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	assert.Nil(t, pr.Change)
	assert.Equal(t, cty.StringVal(helloSHA), pr.Result.GetAttr("sha256"))
}

func TestCopySHA256Copies(t *testing.T) {
	h := newHost(t)
	cfg := cfgFor(t, Copy{}, map[string]cty.Value{
		"src": cty.StringVal(localSrc(t, "hello")), "dest": cty.StringVal(kubeProxy), "sha256": cty.StringVal(helloSHA),
	})
	pr, ar := converge(t, Copy{}, h, cfg)
	assert.Equal(t, modules.Create, action(pr.Change))
	assert.Equal(t, cty.StringVal(helloSHA), ar.Result.GetAttr("sha256"))
	assert.Equal(t, "hello", readFile(t, h, kubeProxy))
}

// A source that is not what sha256 says is refused before anything on the
// host is touched: the running service is not stopped.
func TestCopySHA256Mismatch(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kube-proxy", kubeProxy, "--windows-service")
	f := &fakeHost{Host: h}
	cfg := cfgFor(t, Copy{}, map[string]cty.Value{
		"src": cty.StringVal(localSrc(t, "corrupt")), "dest": cty.StringVal(kubeProxy),
		"service": cty.StringVal("kube-proxy"), "sha256": cty.StringVal(helloSHA),
	})
	pr := plan(t, Copy{}, f, cfg)
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	require.NotNil(t, pr.Change)
	ar := apply(t, Copy{}, f, cfg, pr.Change)
	requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Source does not match sha256", "src")
	assert.Empty(t, f.ops(), "nothing stopped or written")
	assert.Equal(t, host.ServiceRunning, query(t, h, "kube-proxy").State)
}

func TestCopySHA256Validate(t *testing.T) {
	src, dest := cty.StringVal("payload/kubelet.exe"), cty.StringVal(`C:\k\kubelet.exe`)
	runValidate(t, Copy{}, []validateCase{
		{name: "upper case", attrs: map[string]cty.Value{"src": src, "dest": dest, "sha256": cty.StringVal("2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824")}},
		{name: "short", attrs: map[string]cty.Value{"src": src, "dest": dest, "sha256": cty.StringVal("2cf24dba")}, wantSummary: "Invalid sha256", wantAttr: "sha256"},
		{name: "not hex", attrs: map[string]cty.Value{"src": src, "dest": dest, "sha256": cty.StringVal(helloSHA[:63] + "g")}, wantSummary: "Invalid sha256", wantAttr: "sha256"},
	})
}

// changingHost rewrites the source as the copy starts: what the host
// would receive is not what was planned and hashed.
type changingHost struct {
	host.Host
	src string
}

func (c *changingHost) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	if err := os.WriteFile(c.src, []byte("HELLO, changed"), 0o644); err != nil {
		return err
	}
	return c.Host.WriteFile(ctx, path, content, mode)
}

// A source that changes during the copy fails it, and the host keeps its
// old file: for a source hashed long enough ago that its metadata vouches
// for it (stable), and for a recent one, hashed again as it is sent.
func TestCopySourceChangesDuringCopy(t *testing.T) {
	for _, stable := range []bool{true, false} {
		t.Run(map[bool]string{true: "stable", false: "recent"}[stable], func(t *testing.T) {
			sums := NewSourceHashes()
			if stable {
				sums.racy = 0
			}
			m := Copy{Sources: sums}
			h := newHost(t)
			writeFile(t, h, kubeProxy, "old")
			src := localSrc(t, "hello")
			cfg := cfgFor(t, m, map[string]cty.Value{"src": cty.StringVal(src), "dest": cty.StringVal(kubeProxy)})
			local, err := sums.hashLocal(src)
			require.NoError(t, err)
			require.Equal(t, stable, local.stable)
			ar := apply(t, m, &changingHost{Host: h, src: src}, cfg, &modules.Change{Action: modules.Update, Subject: kubeProxy})
			requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Source changed during the copy", "src")
			assert.Equal(t, "old", readFile(t, h, kubeProxy))
		})
	}
}

// Hosts planned at once share one read of a source; a changed file is
// read again.
func TestHashLocalOnce(t *testing.T) {
	h := NewSourceHashes()
	h.racy = 0
	src := localSrc(t, "hello")
	var wg sync.WaitGroup
	sums := make([]localFile, 10)
	for i := range sums {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			sums[i], err = h.hashLocal(src)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	for _, s := range sums {
		assert.Equal(t, helloSHA, s.sha)
		assert.True(t, s.stable)
	}
	require.NoError(t, os.WriteFile(src, []byte("other content"), 0o644))
	s, err := h.hashLocal(src)
	require.NoError(t, err)
	assert.NotEqual(t, helloSHA, s.sha, "read again")
	assert.Equal(t, 1, h.Len(), "the rewritten file's entry replaced the old one")
}

// TestSourceHashesBounded: a file rewritten again and again, and more
// files than the bound, leave at most the bound remembered (the cache used
// to be process-wide and never forgot an entry: a controller writing an
// instance's files for every run grew it without end). The least recently
// used path goes first; the others are still served without a read.
func TestSourceHashesBounded(t *testing.T) {
	h := NewSourceHashes()
	h.racy, h.max = 0, 3
	dir := t.TempDir()
	src := filepath.Join(dir, "rewritten")
	for i := range 20 {
		require.NoError(t, os.WriteFile(src, []byte(fmt.Sprint("content ", i)), 0o644))
		require.NoError(t, os.Chtimes(src, time.Now(), time.Unix(int64(1000+i), 0)))
		_, err := h.hashLocal(src)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, h.Len(), "one entry per path")

	paths := make([]string, 5)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprint("f", i))
		require.NoError(t, os.WriteFile(paths[i], []byte(fmt.Sprint("file ", i)), 0o644))
		_, err := h.hashLocal(paths[i])
		require.NoError(t, err)
		if i == 3 {
			_, err = h.hashLocal(paths[2]) // f2 used again: f3, f2 newest
			require.NoError(t, err)
		}
	}
	assert.Equal(t, 3, h.Len(), "bounded")
	h.mu.Lock()
	var kept []string
	for p := range h.m {
		kept = append(kept, filepath.Base(p))
	}
	h.mu.Unlock()
	assert.ElementsMatch(t, []string{"f2", "f3", "f4"}, kept, "the least recently used went first")

}
