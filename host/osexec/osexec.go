// Package osexec implements Run of the Host API with os/exec, once for the
// hosts that start processes in-process: transport/local, the simulated
// host and the agent's Win32 platform. Options hold what differs between
// them: how a command's process tree is killed.
package osexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/wsu-project/wsu/host"
)

// DefaultWaitDelay bounds how long Run waits for the output pipes after the
// child exits or is killed: a grandchild that inherited them must not hang
// us.
const DefaultWaitDelay = 5 * time.Second

// Options are the platform's part of Run.
type Options struct {
	// WaitDelay overrides DefaultWaitDelay when > 0.
	WaitDelay time.Duration
	// Prepare adjusts the command before it starts: how its process tree
	// is killed on timeout or cancel (cmd.Cancel, cmd.SysProcAttr) and,
	// where a platform needs it, how its command line is built.
	Prepare func(cmd *exec.Cmd)
	// Started is called once the process runs; the function it returns,
	// if not nil, is called after the process has been waited for.
	Started func(cmd *exec.Cmd) (done func())
}

// Run starts req.Argv[0] with the remaining arguments and waits for it to
// exit, for req.Timeout (TimedOut, not an error) or for ctx (an error).
// Each of stdout and stderr is captured up to req.OutputLimit.
func Run(ctx context.Context, req host.RunRequest, o Options) (host.RunResult, error) {
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

	// No shell: on Windows exec.Cmd quotes each argument itself
	// (syscall.EscapeArg).
	cmd := exec.CommandContext(runCtx, req.Argv[0], req.Argv[1:]...)
	cmd.Dir = req.Dir
	cmd.Env = append(os.Environ(), req.Env...)
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = DefaultWaitDelay
	if o.WaitDelay > 0 {
		cmd.WaitDelay = o.WaitDelay
	}
	if o.Prepare != nil {
		o.Prepare(cmd)
	}

	if err := cmd.Start(); err != nil {
		return host.RunResult{}, fmt.Errorf("run %s: %w", req.Argv[0], err)
	}
	if o.Started != nil {
		if done := o.Started(cmd); done != nil {
			defer done()
		}
	}
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
