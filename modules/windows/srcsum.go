package windows

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Source files on the controller are hashed once, not once per host and
// phase: planning and applying a copy to many hosts would otherwise read
// every source that often (a 300 MB payload to 10 hosts: gigabytes of
// hashing). The hashes are a SourceHashes the face owns: a run's own (the
// CLI, setup's default), or one the controller keeps for its runs, since
// its runs copy the same payload to every instance. Nothing is remembered
// process-wide.

// DefaultRacyWindow: a file changed this close to when it was hashed could
// change again without its timestamps moving (coarse clocks, FAT's 2 s), so
// such a hash is not remembered (as host/hashcache does on the node).
const DefaultRacyWindow = 2 * time.Second

// DefaultMaxSourceHashes bounds how many files a SourceHashes remembers: a
// payload is a few dozen files; a controller's per-instance files stay
// well under it. The least recently used is forgotten first.
const DefaultMaxSourceHashes = 1024

// srcKey identifies a file's content as far as its metadata can: it changes
// whenever the content does, outside the racy window.
type srcKey struct {
	path         string
	size         int64
	mtime, ctime int64 // UnixNano; ctime 0 where the platform has none
	dev, ino     uint64
}

func keyOf(path string, fi os.FileInfo) srcKey {
	k := srcKey{path: path, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	statKey(fi, &k)
	return k
}

// stable reports whether a hash taken at hashedAt stays valid while the
// key is unchanged.
func (k srcKey) stable(hashedAt time.Time, racy time.Duration) bool {
	return hashedAt.UnixNano()-max(k.mtime, k.ctime) >= int64(racy)
}

type srcSum struct {
	key  srcKey
	done chan struct{}
	sha  string
	err  error
	used *list.Element // its path in SourceHashes.lru
}

// SourceHashes remembers the sha256 of source files on the machine wsu runs
// on, one entry per path: the hash of the path's content as its metadata
// last identified it (a file rewritten replaces its entry, never adds
// one), at most max paths, the least recently used forgotten first.
// Concurrent callers for one file share one read. A nil *SourceHashes
// remembers nothing: each call reads the file.
type SourceHashes struct {
	racy time.Duration
	max  int

	mu  sync.Mutex
	m   map[string]*srcSum // by absolute path
	lru *list.List         // of paths, most recently used first
}

// NewSourceHashes returns an empty SourceHashes with the default bounds.
func NewSourceHashes() *SourceHashes {
	return &SourceHashes{racy: DefaultRacyWindow, max: DefaultMaxSourceHashes, m: map[string]*srcSum{}, lru: list.New()}
}

// Len is how many files are remembered.
func (h *SourceHashes) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

func (h *SourceHashes) racyWindow() time.Duration {
	if h == nil {
		return DefaultRacyWindow
	}
	return h.racy
}

// claim returns the entry for key: one remembered or being read (mine
// false), or a new one the caller must fill and settle (mine true). A nil
// receiver always hands out a new one.
func (h *SourceHashes) claim(key srcKey) (s *srcSum, mine bool) {
	if h == nil {
		return &srcSum{key: key, done: make(chan struct{})}, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.m[key.path]; s != nil && s.key == key {
		h.lru.MoveToFront(s.used)
		return s, false
	}
	h.forget(key.path)
	s = &srcSum{key: key, done: make(chan struct{})}
	s.used = h.lru.PushFront(key.path)
	h.m[key.path] = s
	for len(h.m) > max(h.max, 1) {
		h.forget(h.lru.Back().Value.(string))
	}
	return s, true
}

// settle ends the read s stood for: a failed or unstable read is not
// remembered.
func (h *SourceHashes) settle(s *srcSum) {
	if s.err != nil && h != nil {
		h.mu.Lock()
		if h.m[s.key.path] == s {
			h.forget(s.key.path)
		}
		h.mu.Unlock()
	}
	close(s.done)
}

// forget drops path's entry; h.mu is held.
func (h *SourceHashes) forget(path string) {
	if s := h.m[path]; s != nil {
		h.lru.Remove(s.used)
		delete(h.m, path)
	}
}

// localFile is a source file as read on the controller.
type localFile struct {
	path string // absolute
	sha  string
	size int64
	key  srcKey
	// stable: the file may be sent without hashing it again, checking only
	// that its key did not change (see stable).
	stable bool
}

// hashLocal resolves src against the working directory and hashes it, or
// returns the hash h already took of the same content.
func (h *SourceHashes) hashLocal(src string) (localFile, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return localFile{}, err
	}
	f, err := openRegular(abs)
	if err != nil {
		return localFile{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return localFile{}, err
	}
	key := keyOf(abs, fi)
	local := localFile{path: abs, size: fi.Size(), key: key}

	s, mine := h.claim(key)
	if !mine {
		<-s.done
		if s.err == nil {
			local.sha, local.stable = s.sha, true
			return local, nil
		}
		// The first reader failed; read it here.
		return hashFile(f, local)
	}
	hashedAt := time.Now()
	local, err = hashFile(f, local)
	if err == nil {
		after, serr := f.Stat()
		local.stable = serr == nil && keyOf(abs, after) == key && local.size == key.size && key.stable(hashedAt, h.racyWindow())
	}
	s.sha, s.err = local.sha, err
	if err == nil && !local.stable {
		s.err = errors.New("changed recently: not remembered")
	}
	h.settle(s)
	return local, err
}

func hashFile(f *os.File, local localFile) (localFile, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return local, err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return local, err
	}
	local.sha, local.size = hex.EncodeToString(h.Sum(nil)), n
	return local, nil
}

// sendReader streams a source file to the host and vouches for what it
// sent: at the end it checks the content is the one planned (a stable
// file's key is unchanged; any other file is hashed as it is read) and
// otherwise fails instead of ending, so the host never commits the file.
type sendReader struct {
	f     *os.File
	local localFile
	want  string    // sha256 the content must have
	hash  io.Writer // nil: stable file, checked by key
	sum   func() string
	n     int64
	// changed is set when the check at the end failed.
	changed error
}

func newSendReader(f *os.File, local localFile, want string) *sendReader {
	r := &sendReader{f: f, local: local, want: want}
	if !local.stable {
		h := sha256.New()
		r.hash, r.sum = h, func() string { return hex.EncodeToString(h.Sum(nil)) }
	}
	return r
}

func (r *sendReader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	r.n += int64(n)
	if r.hash != nil {
		r.hash.Write(p[:n])
	}
	if err == io.EOF {
		if r.changed = r.check(); r.changed != nil {
			return n, r.changed
		}
	}
	return n, err
}

func (r *sendReader) check() error {
	if r.hash != nil {
		if got := r.sum(); got != r.want {
			return fmt.Errorf("%s changed while it was being copied (sha256 %s, planned %s): nothing was replaced", r.local.path, got, r.want)
		}
		return nil
	}
	fi, err := r.f.Stat()
	if err != nil {
		return err
	}
	if keyOf(r.local.path, fi) != r.local.key || r.n != r.local.size {
		return fmt.Errorf("%s changed while it was being copied: nothing was replaced", r.local.path)
	}
	return nil
}
