//go:build windows

package windows

import (
	"context"
	"sync"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
)

// winHost is the Windows machine the agent runs on, driven through Win32.
type winHost struct {
	osfs.FS // the file operations (winFS)

	mu    sync.Mutex
	facts *host.Facts // cached: the answer does not change while we run

	// envMu serialises read-modify-write of the machine environment.
	envMu sync.Mutex

	// shutdown makes the reboot call (system_windows.go).
	shutdown func(ShutdownCall) error
}

var _ host.Host = (*winHost)(nil)

// platform names this backend in not-supported errors; under Wine it says
// so, which explains most of them.
var platform = func() string {
	if isWine {
		return "windows (Wine)"
	}
	return "windows"
}()

// isWine: running under Wine, whose ntdll exports wine_get_version.
var isWine = windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil

// New returns the Host the agent serves on Windows.
func New() host.Host { return NewWithOptions(Options{}) }

func (h *winHost) Facts(ctx context.Context) (host.Facts, error) {
	if err := ctx.Err(); err != nil {
		return host.Facts{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.facts != nil {
		return *h.facts, nil
	}
	f, err := gatherFacts()
	if err != nil {
		return host.Facts{}, err
	}
	h.facts = &f
	return f, nil
}

// Close is a no-op: every call opens and closes its own handles.
func (h *winHost) Close() error { return nil }
