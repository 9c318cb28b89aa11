// Package host defines the Host API: the typed operations a node module may
// perform on a managed host. The local transport implements it in-process;
// the node agent serves the same operations over RPC, so a module never knows
// (or cares) how far away the host is.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// ErrNotSupported is returned (wrapped) by an operation the platform behind a
// Host cannot perform, e.g. service control on the plain local transport or
// HNS under Wine. Callers report it; they never treat it as success.
var ErrNotSupported = errors.New("not supported on this platform")

// ErrConnectionLost is wrapped by every error a host returns once its
// connection has died (a network reconfiguration on the node, a reboot).
// The engine then reconnects within the host's reconnect_timeout and runs
// the interrupted task again: modules are idempotent, so it converges.
var ErrConnectionLost = errors.New("connection to the host was lost")

// ErrUnreachable is wrapped by a DialTCP that reached the host but not the
// address: refused, timed out, no route. It is an observation about the
// network, not a failure of the host or the connection to it.
var ErrUnreachable = errors.New("cannot connect")

// Lossy is implemented by hosts whose connection can die under a task;
// Lost reports whether it has.
type Lossy interface {
	Lost() bool
}

// KeyAuthenticated is implemented by hosts reached by logging in with a
// public key (SSH). LoginPublicKey is that key in authorized_keys form
// without a comment ("ssh-ed25519 AAAA..."), or "" when the login used no
// key the transport can name (a password, an ssh-agent).
type KeyAuthenticated interface {
	LoginPublicKey() string
}

// NotSupported wraps ErrNotSupported with the operation and platform names.
func NotSupported(op, platform string) error {
	return fmt.Errorf("%s: %w (%s)", op, ErrNotSupported, platform)
}

// Host is one managed machine as seen by node modules.
type Host interface {
	// Facts describes the host. Implementations may cache the answer.
	Facts(ctx context.Context) (Facts, error)

	// Stat describes path, following symlinks. A missing path is not an
	// error: Exists is false.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// SHA256 returns the hex sha256 of a regular file's content.
	SHA256(ctx context.Context, path string) (string, error)
	// ReadFile returns a file's content; files larger than limit are an
	// error (limit <= 0: no limit).
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	// WriteFile streams content to a temp file beside path, syncs it and
	// renames it over path, so a reader (or a cut stream) sees either the old
	// file or the complete new one. The result is a new file: a symlink at
	// path is replaced, not followed, and the old file's owner and ACL are
	// not carried over.
	WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error
	// MkdirAll creates path and any missing parents.
	MkdirAll(ctx context.Context, path string, mode fs.FileMode) error
	// Chmod changes a path's permission bits.
	Chmod(ctx context.Context, path string, mode fs.FileMode) error
	// Remove deletes path; with recursive it deletes a whole tree. A missing
	// path is not an error.
	Remove(ctx context.Context, path string, recursive bool) error
	// ReadDir lists a directory's entries, sorted by name, without
	// following links. It returns at most limit entries (limit <= 0 or above
	// MaxDirEntries: MaxDirEntries), so a huge directory cannot flood the
	// connection; which ones it returns then is unspecified, and a caller
	// that must know whether it saw everything asks for one more than it
	// needs. A missing path is an error wrapping fs.ErrNotExist (unlike
	// Stat: there is no listing to return); a file is an error too.
	ReadDir(ctx context.Context, path string, limit int) ([]DirEntry, error)

	// Run starts argv[0] with the remaining arguments (never through a
	// shell) and waits for it to exit or for the timeout.
	Run(ctx context.Context, req RunRequest) (RunResult, error)

	// DialTCP opens a TCP connection from the host to address (host:port)
	// within timeout (0: only ctx bounds it) and closes it again at once:
	// whether something listens there, as the host sees the network. A
	// connection that cannot be made is an error wrapping ErrUnreachable.
	DialTCP(ctx context.Context, address string, timeout time.Duration) error
	// DoHTTP makes one bounded HTTP exchange from the host (HTTPRequest
	// says how it is bounded). A connection that cannot be made is an
	// error wrapping ErrUnreachable; a status is an answer, not an error.
	DoHTTP(ctx context.Context, req HTTPRequest) (HTTPResponse, error)

	Processes
	Services
	Registry
	Environment
	HNS
	FileSecurity
	System

	// Close releases the connection to the host.
	Close() error
}

// Facts are the host properties playbooks commonly branch on.
type Facts struct {
	OS           string `json:"os"` // "windows", "linux"
	Platform     string `json:"platform"`
	Version      string `json:"version"`
	Build        string `json:"build"`
	Hostname     string `json:"hostname"`
	FQDN         string `json:"fqdn"`
	Architecture string `json:"architecture"`
	// IPv4 is the address of the interface holding the default route.
	IPv4 string `json:"ipv4"`
	// BootTime is when the machine last started (RFC 3339 in UTC, as
	// precise as the platform knows it); a reboot changes it, which is how win_reboot knows the
	// host went down and came back. "" when the platform cannot tell.
	BootTime string `json:"boot_time,omitempty"`
}

// FileInfo describes a path on the host.
type FileInfo struct {
	Path    string      `json:"path"`
	Exists  bool        `json:"exists"`
	IsDir   bool        `json:"is_dir"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mod_time"`
}

// DirEntry is one entry of a directory listing, described as Stat would
// describe it except that a link is reported, not followed.
type DirEntry struct {
	Name    string      `json:"name"`
	IsDir   bool        `json:"is_dir"`
	Size    int64       `json:"size"`
	Mode    fs.FileMode `json:"mode"`
	ModTime time.Time   `json:"mod_time"`
}

// MaxDirEntries bounds one ReadDir: a listing travels as one agent message
// (at most 1 MiB), and 1000 entries fit even when every name has the 255
// characters Windows allows (a listing that still does not fit, of names
// full of characters JSON escapes, fails; it is never cut short).
const MaxDirEntries = 1000

// DirLimit is the number of entries a ReadDir with limit returns at most.
func DirLimit(limit int) int {
	if limit <= 0 || limit > MaxDirEntries {
		return MaxDirEntries
	}
	return limit
}

// RunRequest starts a process.
type RunRequest struct {
	Argv    []string
	Dir     string
	Env     []string // extra KEY=VALUE entries on top of the host's environment
	Stdin   []byte
	Timeout time.Duration // 0: no limit beyond ctx
	// OutputLimit bounds each of stdout and stderr; the rest is dropped and
	// Truncated is set. 0 means 1 MiB.
	OutputLimit int
}

// RunResult is a finished process.
type RunResult struct {
	ExitCode  int
	Stdout    []byte
	Stderr    []byte
	Truncated bool
	TimedOut  bool
}

// DefaultOutputLimit bounds captured process output when a request sets none.
const DefaultOutputLimit = 1 << 20
