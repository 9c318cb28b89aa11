//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

// killWait bounds how long Kill waits for a terminated process to be gone,
// so that its executable can be replaced right after.
const killWait = 5 * time.Second

func (h *winHost) ListProcesses(ctx context.Context) ([]host.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	procs, err := snapshot()
	if err != nil {
		return nil, err
	}
	out := make([]host.Process, 0, len(procs))
	for _, p := range procs {
		out = append(out, host.Process{PID: int(p.ProcessID), Image: windows.UTF16ToString(p.ExeFile[:])})
	}
	return out, nil
}

func (h *winHost) Kill(ctx context.Context, pid int, image string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if pid > 0 {
		ok, err := terminate(uint32(pid), killWait)
		if err != nil || !ok {
			return 0, err
		}
		return 1, nil
	}
	if image == "" {
		return 0, errors.New("kill: neither a pid nor an image name")
	}
	procs, err := snapshot()
	if err != nil {
		return 0, err
	}
	self := uint32(os.Getpid())
	n := 0
	var errs []error
	for _, p := range procs {
		if p.ProcessID == self || !sameImage(windows.UTF16ToString(p.ExeFile[:]), image) {
			continue
		}
		ok, err := terminate(p.ProcessID, killWait)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// sameImage matches an image name case-insensitively, with or without .exe.
func sameImage(exe, image string) bool {
	trim := func(s string) string {
		s = strings.ToLower(s)
		return strings.TrimSuffix(s, ".exe")
	}
	return trim(exe) == trim(image)
}

// terminate kills a process and waits up to wait for it to be gone. A
// process that no longer exists is (false, nil).
func terminate(pid uint32, wait time.Duration) (bool, error) {
	p, err := windows.OpenProcess(windows.PROCESS_TERMINATE|windows.SYNCHRONIZE, false, pid)
	if err != nil {
		if errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
			return false, nil // no such process
		}
		return false, fmt.Errorf("kill %d: %w", pid, err)
	}
	defer windows.CloseHandle(p)
	// A process that has exited lives on while someone holds a handle to it.
	if exited(p) {
		return false, nil
	}
	if err := windows.TerminateProcess(p, 1); err != nil {
		if errors.Is(err, windows.ERROR_ACCESS_DENIED) && exited(p) {
			return false, nil // it was already on its way out
		}
		return false, fmt.Errorf("kill %d: %w", pid, err)
	}
	if wait > 0 {
		windows.WaitForSingleObject(p, uint32(wait.Milliseconds()))
	}
	return true, nil
}

func exited(p windows.Handle) bool {
	ev, err := windows.WaitForSingleObject(p, 0)
	return err == nil && ev == windows.WAIT_OBJECT_0
}
