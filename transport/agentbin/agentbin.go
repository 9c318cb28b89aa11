// Package agentbin is where a run's node agents come from: which build of
// cmd/wsu-agent the transports deploy to a host of a given OS and
// architecture, as a file or as bytes the CLI carries (make build embeds
// them), and its sha256, computed once per build.
//
// A Source belongs to one run (or to whatever builds a transport registry
// with it, transport.NewRegistry): nothing here is process-wide, so a
// controller running plays for several clusters at once gives each its own
// and a test can point one at a build of its own. Within a Source every
// build and every wsu_agent_binary file is one *Binary, so the hosts of a
// run (and their reconnects) hash it once, and the hash of tens of MB can
// overlap the SSH handshake instead of preceding it.
package agentbin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/wsu-project/wsu/host/osfs"
)

// Platform is an agent build's target, as GOOS and GOARCH spell it.
type Platform struct{ OS, Arch string }

// Native is the platform this program runs on.
func Native() Platform { return Platform{OS: runtime.GOOS, Arch: runtime.GOARCH} }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// FileName is the name make build gives the agent build for p:
// wsu-agent-windows-amd64.exe, wsu-agent-linux-amd64.
func FileName(p Platform) string {
	name := "wsu-agent-" + p.OS + "-" + p.Arch
	if p.OS == "windows" {
		name += ".exe"
	}
	return name
}

// Binary is one agent build: a local file or bytes in memory. Its sha256
// is computed at the first call and kept.
type Binary struct {
	name string // for messages: the file's path, or what the bytes are
	path string // a file-backed build; "" for bytes
	data []byte
	// fsys holds an embedded build (named name), read only when it is
	// sent or run: a run whose hosts have it reads none of it.
	fsys fs.FS

	sum func() (string, error)
	exe struct {
		sync.Mutex
		path string
	}
}

// File is the build at path.
func File(path string) *Binary {
	b := &Binary{name: path, path: path}
	b.sum = sync.OnceValues(func() (string, error) { return osfs.FileSHA256(path) })
	return b
}

// Bytes is a build held in memory (embedded in the program); name says
// what it is in messages and, by its extension, how an executable copy
// is named (Executable).
func Bytes(name string, data []byte) *Binary {
	b := &Binary{name: name, data: data}
	b.sum = sync.OnceValues(func() (string, error) {
		s := sha256.Sum256(data)
		return hex.EncodeToString(s[:]), nil
	})
	return b
}

// Embedded is the build name in fsys (what make build embeds). Its sha256
// is the one make recorded beside it (name + ".sha256": the hex sum and
// the size) when that file is there and the size matches, else computed
// from the content at the first call. Its content is read only to be
// sent or run, so a run that finds the build in place on every host
// neither reads nor hashes the megabytes.
func Embedded(fsys fs.FS, name string) *Binary {
	b := &Binary{name: name, fsys: fsys}
	b.sum = sync.OnceValues(func() (string, error) {
		if sum, ok := recordedSum(fsys, name); ok {
			return sum, nil
		}
		f, err := fsys.Open(name)
		if err != nil {
			return "", err
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	})
	return b
}

// recordedSum is the sha256 make recorded for name in fsys, when its
// recorded size is the file's.
func recordedSum(fsys fs.FS, name string) (string, bool) {
	rec, err := fs.ReadFile(fsys, name+".sha256")
	if err != nil {
		return "", false
	}
	f := strings.Fields(string(rec))
	fi, err := fs.Stat(fsys, name)
	if err != nil || len(f) != 2 || len(f[0]) != sha256.Size*2 || f[1] != fmt.Sprint(fi.Size()) {
		return "", false
	}
	if _, err := hex.DecodeString(f[0]); err != nil {
		return "", false
	}
	return f[0], true
}

// content is an in-memory build's bytes, read from fsys for an embedded
// one (to write an executable copy: once per build and machine).
func (b *Binary) content() ([]byte, error) {
	if b.fsys == nil {
		return b.data, nil
	}
	return fs.ReadFile(b.fsys, b.name)
}

// Name is the build's path, or what the bytes are.
func (b *Binary) Name() string { return b.name }

// InMemory reports a build held as bytes (embedded), not a file.
func (b *Binary) InMemory() bool { return b.path == "" }

// SHA256 is the build's hex sha256, computed once. A file that changes
// afterwards is caught by the agent's hello after the upload, which
// reports the sum of what arrived.
func (b *Binary) SHA256() (string, error) { return b.sum() }

// Open returns the build's content and size.
func (b *Binary) Open() (io.ReadCloser, int64, error) {
	if b.fsys != nil {
		// Streamed from the program's image: hosts deploying at once
		// hold no copy each.
		f, err := b.fsys.Open(b.name)
		if err != nil {
			return nil, 0, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, fi.Size(), nil
	}
	if b.path == "" {
		return io.NopCloser(bytes.NewReader(b.data)), int64(len(b.data)), nil
	}
	f, err := os.Open(b.path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// Executable returns a file this machine can run as the agent: a
// file-backed build's own path; for bytes, a copy in dir named by the
// build and its sha256 (wsu-agent-linux-amd64-<sha256[:12]>), written
// once, private to the user until complete, and reused by later runs
// when its content is still the build's.
func (b *Binary) Executable(dir string) (string, error) {
	if b.path != "" {
		return b.path, nil
	}
	b.exe.Lock()
	defer b.exe.Unlock()
	if b.exe.path != "" {
		return b.exe.path, nil
	}
	if dir == "" {
		return "", fmt.Errorf("no directory to write the agent %s to, to run it", b.name)
	}
	sum, _ := b.SHA256()
	ext := filepath.Ext(b.name)
	p := filepath.Join(dir, strings.TrimSuffix(filepath.Base(b.name), ext)+"-"+sum[:12]+ext)
	if got, err := osfs.FileSHA256(p); err != nil || got != sum {
		data, err := b.content()
		if err == nil {
			err = writeExecutable(p, data)
		}
		if err != nil {
			return "", fmt.Errorf("writing the agent %s to run it: %w", b.name, err)
		}
	}
	b.exe.path = p
	return p, nil
}

// writeExecutable writes data to p through a temp file renamed over it.
func writeExecutable(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o700)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Options say where a Source finds builds, in the order tried.
type Options struct {
	// Embedded holds builds named FileName(p): what make build embeds in
	// the CLI. nil: none.
	Embedded fs.FS
	// Dir is searched for FileName(p) next: the CLI's own directory, where
	// make build leaves bin/wsu-agent-*.
	Dir string
	// Self serves as the agent for its own platform (Native) when neither
	// holds a build for it: the CLI, whose `wsu agent` is the same command.
	Self string
	// CacheDir is where a build held in memory is written to be run on
	// this machine (connection=local).
	CacheDir string
}

// Source hands out a run's agent builds. A nil *Source has none: only
// files named explicitly (wsu_agent_binary) can be deployed, and the local
// transport serves the host in-process.
type Source struct {
	opts   Options
	mu     sync.Mutex
	builds map[Platform]*Binary
	files  map[string]*Binary
}

// New returns a Source finding builds as opts say.
func New(opts Options) *Source {
	return &Source{opts: opts, builds: map[Platform]*Binary{}, files: map[string]*Binary{}}
}

// For returns the build to deploy to a host of platform p.
func (s *Source) For(p Platform) (*Binary, error) {
	if s == nil {
		return nil, fmt.Errorf("no agent build for %s: set wsu_agent_binary to the wsu-agent built for it", p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.builds[p]; b != nil {
		return b, nil
	}
	b, err := s.find(p)
	if err != nil {
		return nil, err
	}
	s.builds[p] = b
	return b, nil
}

// find looks for p's build as Options orders it; s.mu is held.
func (s *Source) find(p Platform) (*Binary, error) {
	name := FileName(p)
	if s.opts.Embedded != nil {
		fi, err := fs.Stat(s.opts.Embedded, name)
		if err == nil && fi.Mode().IsRegular() {
			return Embedded(s.opts.Embedded, name), nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("the embedded agent %s: %w", name, err)
		}
	}
	var beside string
	if s.opts.Dir != "" {
		beside = filepath.Join(s.opts.Dir, name)
		if fi, err := os.Stat(beside); err == nil && fi.Mode().IsRegular() {
			return s.fileLocked(beside), nil
		}
	}
	if s.opts.Self != "" && p == Native() {
		return s.fileLocked(s.opts.Self), nil
	}
	msg := fmt.Sprintf("this wsu carries no agent for %s (it was not built with `make build`)", p)
	if beside != "" {
		msg += " and " + beside + " is missing"
	}
	return nil, fmt.Errorf("%s: run `make build`, or build it with `GOOS=%s GOARCH=%s go build -o %s ./cmd/wsu-agent` and set wsu_agent_binary to it",
		msg, p.OS, p.Arch, name)
}

// File returns the build at path: the same *Binary for the same path, so
// it is hashed once however many hosts name it.
func (s *Source) File(path string) *Binary {
	if s == nil {
		return File(path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fileLocked(path)
}

func (s *Source) fileLocked(path string) *Binary {
	b := s.files[path]
	if b == nil {
		b = File(path)
		s.files[path] = b
	}
	return b
}

// Resolve is the build for a host: the file path names
// (wsu_agent_binary) when set, else For(p).
func (s *Source) Resolve(path string, p Platform) (*Binary, error) {
	if path != "" {
		return s.File(path), nil
	}
	return s.For(p)
}

// Local returns an executable of the agent for this machine
// (connection=local): a build held in memory is written under CacheDir
// first. "" from a nil Source: there is no agent to start.
func (s *Source) Local() (string, error) {
	if s == nil {
		return "", nil
	}
	b, err := s.For(Native())
	if err != nil {
		return "", err
	}
	return b.Executable(s.opts.CacheDir)
}
