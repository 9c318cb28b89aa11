// Package hashcache remembers file hashes on the node, so a no-op run does
// not re-hash hundreds of MB of payload: a hash is served again while the
// file's size and modification time are unchanged.
package hashcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
)

// racyWindow: a file modified this close to when it was hashed might be
// changed again within the file system's timestamp granularity without its
// mtime moving, so its entry is not trusted (git's "racily clean" problem).
// It is the window where the backend cannot say how its file system
// stamps times (host.ModTimeStepper), and the most any file system gets.
// A cache's own (cache.racy), so a test shortens it for its caches only.
const racyWindow = 2 * time.Second

// minRacyWindow is the window on a file system whose stamps advance at
// least once a clock tick (NTFS, ext4: 10-16 ms): twice its step, and never
// less than this, so a re-run moments after a copy (a bench's, an admin's
// second look) finds the copy's sums, which the agent warms this long
// after writing.
const minRacyWindow = 100 * time.Millisecond

// version of the cache file format; another version is ignored.
const version = 1

type entry struct {
	Size     int64  `json:"size"`
	ModTime  int64  `json:"mtime"` // UnixNano
	HashedAt int64  `json:"hashed_at"`
	SHA256   string `json:"sha256"`
}

type file struct {
	Version int               `json:"version"`
	Entries map[string]*entry `json:"entries"`
}

type cache struct {
	host.Host
	path string
	racy time.Duration // racyWindow

	mu      sync.Mutex
	loaded  bool
	entries map[string]*entry
	saveMu  sync.Mutex // one writer of the cache file at a time

	warm     bool
	warmMu   sync.Mutex // warmLater against Close
	warmCtx  context.Context
	stopWarm context.CancelFunc
	warming  sync.WaitGroup
}

// Wrap returns h with SHA256 served from a cache persisted as JSON at
// cacheFile, a path on the machine running this code (the agent's node).
// Every other operation goes straight to h; WriteFile, Upload, Chmod and
// Remove also drop the cached entries they may make stale.
func Wrap(h host.Host, cacheFile string, opts ...Option) host.Host {
	c := &cache{Host: h, path: cacheFile, racy: racyWindow}
	for _, o := range opts {
		o(c)
	}
	c.warmCtx, c.stopWarm = context.WithCancel(context.Background())
	return c
}

// Option changes what Wrap returns.
type Option func(*cache)

// Warm hashes each file WriteFile wrote in the background, once the racy
// window has passed: the sum of a file just written cannot be trusted
// before, so without this the next run (a re-run planning the payload just
// copied) hashes it all again on the node. Close stops what is pending.
func Warm() Option { return func(c *cache) { c.warm = true } }

// warmMargin: a warming hash starts this much after the racy window, so
// the entry it records is trusted (HashedAt - ModTime >= the racy window).
const warmMargin = 100 * time.Millisecond

// load reads the cache file once; an unreadable or corrupt one is ignored
// and replaced at the next save. Call with mu held.
func (c *cache) load() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.entries = map[string]*entry{}
	b, err := os.ReadFile(c.path)
	if err != nil {
		return
	}
	var f file
	if json.Unmarshal(b, &f) != nil || f.Version != version {
		return
	}
	for k, e := range f.Entries {
		if e != nil {
			c.entries[k] = e
		}
	}
}

// window is the racy window for path: from its file system's time step
// where the backend knows it, else the cache's racy window.
func (c *cache) window(ctx context.Context, path string) time.Duration {
	st, ok := c.Host.(host.ModTimeStepper)
	if !ok {
		return c.racy
	}
	return racyFor(st.ModTimeStep(ctx, path), c.racy)
}

// racyFor is the racy window on a file system of time step step (0: not
// known), at most most.
func racyFor(step, most time.Duration) time.Duration {
	if step <= 0 {
		return most
	}
	return min(most, max(2*step, minRacyWindow))
}

func (e *entry) matches(fi host.FileInfo, racy time.Duration) bool {
	return e.Size == fi.Size && e.ModTime == fi.ModTime.UnixNano() &&
		e.HashedAt-e.ModTime >= int64(racy)
}

func sameFile(a, b host.FileInfo) bool {
	return a.Exists == b.Exists && a.Size == b.Size && a.ModTime.Equal(b.ModTime)
}

func (c *cache) SHA256(ctx context.Context, path string) (string, error) {
	before, err := c.Host.Stat(ctx, path)
	if err != nil || !before.Exists || before.IsDir {
		// Not cacheable; h says what is wrong with it.
		c.forget(path, false)
		return c.Host.SHA256(ctx, path)
	}
	racy := c.window(ctx, path)
	c.mu.Lock()
	c.load()
	if e := c.entries[path]; e != nil && e.matches(before, racy) {
		sum := e.SHA256
		c.mu.Unlock()
		return sum, nil
	}
	c.mu.Unlock()

	hashedAt := time.Now()
	sum, err := c.Host.SHA256(ctx, path)
	if err != nil {
		return "", err
	}
	// Record only if the file did not change while being hashed.
	after, err := c.Host.Stat(ctx, path)
	if err != nil || !sameFile(before, after) {
		return sum, nil
	}
	c.mu.Lock()
	c.entries[path] = &entry{Size: before.Size, ModTime: before.ModTime.UnixNano(), HashedAt: hashedAt.UnixNano(), SHA256: sum}
	c.mu.Unlock()
	c.save()
	return sum, nil
}

func (c *cache) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	err := c.Host.WriteFile(ctx, path, content, mode)
	c.forget(path, false)
	if err == nil && c.warm {
		c.warmLater(path)
	}
	return err
}

// Upload is WriteFile by the wrapped host's other way (host.Uploader),
// with the same bookkeeping.
func (c *cache) Upload(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	err := host.Upload(ctx, c.Host, path, content, mode)
	c.forget(path, false)
	if err == nil && c.warm {
		c.warmLater(path)
	}
	return err
}

// Chmod also drops path's entry: a transport that replaced the file behind
// the agent's back (the SSH transport's SFTP upload) sets its mode through
// the agent next, and a sum cached for the old content must not be served
// even if size and mtime happened to match. Like WriteFile it warms the
// new content's sum.
func (c *cache) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	err := c.Host.Chmod(ctx, path, mode)
	c.forget(path, false)
	if err == nil && c.warm {
		c.warmLater(path)
	}
	return err
}

func (c *cache) warmLater(path string) {
	c.warmMu.Lock()
	defer c.warmMu.Unlock()
	if c.warmCtx.Err() != nil {
		return
	}
	c.warming.Add(1)
	go func() {
		defer c.warming.Done()
		t := time.NewTimer(c.window(c.warmCtx, path) + warmMargin)
		defer t.Stop()
		select {
		case <-t.C:
			c.SHA256(c.warmCtx, path) // for the cache only; errors are the next caller's
		case <-c.warmCtx.Done():
		}
	}()
}

// Close stops pending warming hashes, then closes the host.
func (c *cache) Close() error {
	c.warmMu.Lock()
	c.stopWarm()
	c.warmMu.Unlock()
	c.warming.Wait()
	return c.Host.Close()
}

func (c *cache) Remove(ctx context.Context, path string, recursive bool) error {
	err := c.Host.Remove(ctx, path, recursive)
	c.forget(path, recursive)
	return err
}

// forget drops path's entry and, for a tree, those below it (either
// separator: the host may be Windows).
func (c *cache) forget(path string, tree bool) {
	c.mu.Lock()
	c.load()
	n := len(c.entries)
	for k := range c.entries {
		if k == path || tree && (strings.HasPrefix(k, path+"/") || strings.HasPrefix(k, path+`\`)) {
			delete(c.entries, k)
		}
	}
	changed := len(c.entries) != n
	c.mu.Unlock()
	if changed {
		c.save()
	}
}

// save writes the cache atomically (temp + rename). It skips fsync: a
// cache lost in a crash only costs re-hashing, and a torn file is ignored.
// Failures are ignored for the same reason.
func (c *cache) save() {
	c.saveMu.Lock()
	defer c.saveMu.Unlock()
	c.mu.Lock()
	b, err := json.Marshal(file{Version: version, Entries: c.entries})
	c.mu.Unlock()
	if err != nil {
		return
	}
	dir := filepath.Dir(c.path)
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(c.path)+"-*")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(f.Name(), c.path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
}

// LocalSHA256 hashes a file of the machine this runs on (the agent's own
// binary, whose sum its greeting carries), keeping the sum in the same
// cache file under "local:" + path: every connection starts an agent,
// and re-hashing tens of MB each time delays every connection.
func LocalSHA256(cacheFile, path string) (string, error) {
	c := &cache{path: cacheFile}
	racy := racyFor(osfs.ModTimeStep(path), racyWindow)
	key := "local:" + path
	stat := func() (host.FileInfo, error) {
		fi, err := os.Stat(path)
		if err != nil {
			return host.FileInfo{}, err
		}
		return host.FileInfo{Path: path, Exists: true, Size: fi.Size(), ModTime: fi.ModTime()}, nil
	}
	before, err := stat()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.load()
	e := c.entries[key]
	c.mu.Unlock()
	if e != nil && e.matches(before, racy) {
		return e.SHA256, nil
	}
	hashedAt := time.Now()
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if after, err := stat(); err == nil && sameFile(before, after) {
		c.mu.Lock()
		c.entries[key] = &entry{Size: before.Size, ModTime: before.ModTime.UnixNano(), HashedAt: hashedAt.UnixNano(), SHA256: sum}
		c.mu.Unlock()
		c.save()
	}
	return sum, nil
}
