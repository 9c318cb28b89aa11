//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osexec"
	"github.com/wsu-project/wsu/host/osnet"
)

// Run is osexec's, with the child tracked in a processTree so a timeout or
// cancel kills its descendants too.
func (h *winHost) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	if isWine && len(req.Argv) > 0 && isPowerShell(req.Argv[0]) {
		// Wine's powershell.exe is a stub that exits 0 whatever it is
		// asked: running it would pass silently.
		return host.RunResult{}, host.NotSupported("proc.run "+req.Argv[0], platform)
	}
	tree := &processTree{}
	return osexec.Run(ctx, req, osexec.Options{
		Prepare: func(cmd *exec.Cmd) {
			cmd.Cancel = func() error { return tree.kill(cmd.Process) }
		},
		Started: func(cmd *exec.Cmd) func() {
			tree.track(cmd.Process.Pid)
			return tree.close
		},
	})
}

// processTree kills a child and its descendants on timeout. A job object
// catches descendants that outlive their parent; where one cannot be used
// (an older Windows refusing nested jobs, Wine), the parent links in a
// process snapshot still find the rest. Both are best effort.
type processTree struct {
	mu  sync.Mutex
	job windows.Handle
}

func (t *processTree) track(pid int) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return
	}
	p, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(pid))
	if err != nil {
		windows.CloseHandle(job)
		return
	}
	defer windows.CloseHandle(p)
	if windows.AssignProcessToJobObject(job, p) != nil {
		windows.CloseHandle(job)
		return
	}
	t.mu.Lock()
	t.job = job
	t.mu.Unlock()
}

// close releases the job without killing anything: processes the command
// started on purpose (a detached server, say) keep running.
func (t *processTree) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.job != 0 {
		windows.CloseHandle(t.job)
		t.job = 0
	}
}

func (t *processTree) kill(p *os.Process) error {
	// Collect the descendants before killing their parent breaks the links.
	descendants := descendantsOf(uint32(p.Pid))
	t.mu.Lock()
	if t.job != 0 {
		windows.TerminateJobObject(t.job, 1)
	}
	t.mu.Unlock()
	err := p.Kill()
	for _, pid := range descendants {
		// Wait a little, so they are gone (and their files free) when
		// Run returns.
		terminate(pid, 2*time.Second)
	}
	return err
}

// descendantsOf lists the processes below root in a snapshot, parents first.
func descendantsOf(root uint32) []uint32 {
	procs, err := snapshot()
	if err != nil {
		return nil
	}
	children := map[uint32][]uint32{}
	for _, p := range procs {
		if p.ProcessID != p.ParentProcessID {
			children[p.ParentProcessID] = append(children[p.ParentProcessID], p.ProcessID)
		}
	}
	var out []uint32
	seen := map[uint32]bool{root: true}
	queue := []uint32{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// snapshot lists the running processes.
func snapshot() ([]windows.ProcessEntry32, error) {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return nil, fmt.Errorf("process snapshot: %w", err)
	}
	defer windows.CloseHandle(snap)
	var out []windows.ProcessEntry32
	e := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	err = windows.Process32First(snap, &e)
	for err == nil {
		out = append(out, e)
		err = windows.Process32Next(snap, &e)
	}
	if !errors.Is(err, windows.ERROR_NO_MORE_FILES) {
		return nil, fmt.Errorf("process snapshot: %w", err)
	}
	return out, nil
}

// isPowerShell: Windows PowerShell or PowerShell 7, by path or bare name.
func isPowerShell(argv0 string) bool {
	base := strings.ToLower(argv0[strings.LastIndexAny(argv0, `\/`)+1:])
	base = strings.TrimSuffix(base, ".exe")
	return base == "powershell" || base == "pwsh"
}

// DialTCP dials with Winsock, through Go's net package.
func (h *winHost) DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	return osnet.DialTCP(ctx, address, timeout)
}

// DoHTTP makes the request with osnet's HTTP/1.1 client over Winsock.
func (h *winHost) DoHTTP(ctx context.Context, req host.HTTPRequest) (host.HTTPResponse, error) {
	return osnet.DoHTTP(ctx, req)
}
