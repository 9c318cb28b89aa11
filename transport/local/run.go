package local

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

// waitDelay bounds how long Run waits for the output pipes after the child
// exits or is killed: a grandchild that inherited them must not hang us.
// A variable so tests can shorten it.
var waitDelay = 5 * time.Second

func (h *localHost) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
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

	cmd := exec.CommandContext(runCtx, req.Argv[0], req.Argv[1:]...)
	cmd.Dir = req.Dir
	cmd.Env = append(os.Environ(), req.Env...)
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = waitDelay
	killTree(cmd)

	if err := cmd.Start(); err != nil {
		return host.RunResult{}, fmt.Errorf("run %s: %w", req.Argv[0], err)
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
