package windows

import (
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

// Source files on the controller are hashed once per process: planning and
// applying a copy to many hosts would otherwise read every source once per
// host and phase (a 300 MB payload to 10 hosts: gigabytes of hashing).

// racyWindow: a file changed this close to when it was hashed could change
// again without its timestamps moving (coarse clocks, FAT's 2 s), so such a
// hash is not remembered (as host/hashcache does on the node).
var racyWindow = 2 * time.Second

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
func (k srcKey) stable(hashedAt time.Time) bool {
	return hashedAt.UnixNano()-max(k.mtime, k.ctime) >= int64(racyWindow)
}

type srcSum struct {
	done chan struct{}
	sha  string
	err  error
}

var srcSums = struct {
	sync.Mutex
	m map[srcKey]*srcSum
}{m: map[srcKey]*srcSum{}}

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
// returns the hash this process already took of the same content.
// Concurrent callers for one file share one read.
func hashLocal(src string) (localFile, error) {
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

	srcSums.Lock()
	s := srcSums.m[key]
	if s != nil {
		srcSums.Unlock()
		<-s.done
		if s.err == nil {
			local.sha, local.stable = s.sha, true
			return local, nil
		}
		// The first reader failed; read it here.
		return hashFile(f, local)
	}
	s = &srcSum{done: make(chan struct{})}
	srcSums.m[key] = s
	srcSums.Unlock()

	hashedAt := time.Now()
	local, err = hashFile(f, local)
	if err == nil {
		after, serr := f.Stat()
		local.stable = serr == nil && keyOf(abs, after) == key && local.size == key.size && key.stable(hashedAt)
	}
	s.sha, s.err = local.sha, err
	if err == nil && !local.stable {
		s.err = errors.New("changed recently: not remembered")
	}
	if s.err != nil {
		srcSums.Lock()
		delete(srcSums.m, key)
		srcSums.Unlock()
	}
	close(s.done)
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
