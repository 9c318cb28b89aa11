// Package native implements host.Host for the machine the program runs on,
// in-process: no agent, no connection, just the os and os/exec packages
// (through host/osfs and host/osexec). On Windows it is the agent's Win32
// platform. It is what the node agent (cmd/wsu-agent) serves with
// --platform native, and what transport/local hands a library user of the
// engine; it imports neither HCL nor cty, so the agent stays small.
package native

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
)

// localHost is the machine wsu runs on.
type localHost struct {
	// The Windows-side operations are not available on a POSIX machine.
	host.Unsupported
	// The file operations, with POSIX semantics.
	osfs.FS
	mu    sync.Mutex
	facts *host.Facts // cached: gathering may hit DNS
	// waitDelay is Run's wait for the output pipes after the child exits;
	// 0: osexec.DefaultWaitDelay (tests shorten it).
	waitDelay time.Duration
}

var _ host.Host = (*localHost)(nil)

// New returns a Host acting on the local machine: on Windows the native
// Win32 platform of the agent, elsewhere this package's POSIX host.
func New() host.Host { return newNative() }

// NewPOSIX returns the in-process POSIX host (Windows operations are not
// supported).
func NewPOSIX() host.Host {
	return &localHost{Unsupported: host.Unsupported{Platform: runtime.GOOS + " (local)"}}
}

// Facts gathers the facts once and then serves them from the cache.
func (h *localHost) Facts(ctx context.Context) (host.Facts, error) {
	if err := ctx.Err(); err != nil {
		return host.Facts{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.facts != nil {
		return *h.facts, nil
	}
	f, err := gatherFacts(ctx)
	if err != nil {
		return host.Facts{}, err
	}
	h.facts = &f
	return f, nil
}

// Close is a no-op: there is no connection to release.
func (h *localHost) Close() error { return nil }
