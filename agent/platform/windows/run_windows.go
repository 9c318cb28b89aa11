//go:build windows

package windows

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

// waitDelay bounds how long Run waits for the output pipes after the child
// exits or is killed: a grandchild that inherited them must not hang us.
var waitDelay = 5 * time.Second

func (h *winHost) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return host.RunResult{}, errors.New("run: empty argv")
	}
	if err := ctx.Err(); err != nil {
		return host.RunResult{}, err
	}
	if req.Dir != "" {
		// exec blames the program for a bad working directory; name the
		// directory instead.
		if fi, err := os.Stat(req.Dir); err != nil {
			return host.RunResult{}, fmt.Errorf("run %s: working directory: %w", req.Argv[0], err)
		} else if !fi.IsDir() {
			return host.RunResult{}, fmt.Errorf("run %s: working directory %s is not a directory", req.Argv[0], req.Dir)
		}
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	defer cancel()

	limit := req.OutputLimit
	if limit <= 0 {
		limit = host.DefaultOutputLimit
	}
	stdout, stderr := &capture{limit: limit}, &capture{limit: limit}

	// exec.Cmd quotes each argument itself (syscall.EscapeArg): no shell.
	cmd := exec.CommandContext(runCtx, req.Argv[0], req.Argv[1:]...)
	cmd.Dir = req.Dir
	cmd.Env = append(os.Environ(), req.Env...)
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	tree := &processTree{}
	cmd.Cancel = func() error { return tree.kill(cmd.Process) }

	if err := cmd.Start(); err != nil {
		return host.RunResult{}, fmt.Errorf("run %s: %w", req.Argv[0], err)
	}
	tree.track(cmd.Process.Pid)
	defer tree.close()
	werr := cmd.Wait()

	res := host.RunResult{
		ExitCode:  -1,
		Stdout:    stdout.buf.Bytes(),
		Stderr:    stderr.buf.Bytes(),
		Truncated: stdout.truncated || stderr.truncated,
	}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case ctx.Err() != nil:
		// The caller gave up; that is an error, unlike our own timeout.
		return res, fmt.Errorf("run %s: %w", req.Argv[0], ctx.Err())
	case runCtx.Err() != nil:
		res.TimedOut, res.ExitCode = true, -1
		return res, nil
	}
	var exitErr *exec.ExitError
	if werr == nil || errors.As(werr, &exitErr) || errors.Is(werr, exec.ErrWaitDelay) {
		// A non-zero exit is an answer, not a failure to run.
		return res, nil
	}
	return res, fmt.Errorf("run %s: %w", req.Argv[0], werr)
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

// capture keeps the first limit bytes written to it and drops the rest while
// still accepting them, so the child never blocks on a full pipe.
type capture struct {
	buf       bytes.Buffer
	limit     int
	truncated bool
}

func (c *capture) Write(p []byte) (int, error) {
	room := c.limit - c.buf.Len()
	switch {
	case room >= len(p):
		c.buf.Write(p)
	case room > 0:
		c.buf.Write(p[:room])
		c.truncated = true
	case len(p) > 0:
		c.truncated = true
	}
	return len(p), nil
}
