package wsmantest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Signals a Handler's context is cancelled with (context.Cause).
var (
	ErrTerminated = errors.New("terminated by the client (signal terminate)")
	ErrCtrlC      = errors.New("interrupted by the client (signal ctrl_c)")
	ErrShellGone  = errors.New("the shell was deleted or the endpoint closed")
)

// errPipeClosed is what a Send into a finished command's stdin gets.
var errPipeClosed = errors.New("the pipe is being closed")

// maxBuffered bounds a command's output the client has not received yet; a
// handler writing more blocks, as a process does on a full pipe.
const maxBuffered = 4 << 20

// shell is one rsp:Shell with its commands.
type shell struct {
	id    string
	owner string

	mu       sync.Mutex
	commands map[string]*command
}

// command is one rsp:Command: a Handler run with stdin fed by Send and
// output drained by Receive.
type command struct {
	id     string
	line   string
	ctx    context.Context
	cancel context.CancelCauseFunc
	stdinR *io.PipeReader
	stdinW *io.PipeWriter

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	stdout   []byte
	stderr   []byte
	finished bool // the handler returned
	exitCode int
}

func newCommand(parent context.Context, line string) *command {
	ctx, cancel := context.WithCancelCause(parent)
	r, w := io.Pipe()
	return &command{
		id: newUUID(), line: line, ctx: ctx, cancel: cancel,
		stdinR: r, stdinW: w, changed: make(chan struct{}),
	}
}

// notify wakes everyone waiting on c.changed; c.mu must be held.
func (c *command) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// run executes the handler and records its exit.
func (c *command) run(h Handler) {
	code := h(c.ctx, &Cmd{
		Line:   c.line,
		Stdin:  c.stdinR,
		Stdout: &outWriter{c: c},
		Stderr: &outWriter{c: c, stderr: true},
	})
	c.stdinR.CloseWithError(errPipeClosed)
	c.mu.Lock()
	c.finished, c.exitCode = true, code
	c.notify()
	c.mu.Unlock()
}

// outWriter queues a handler's output for Receive.
type outWriter struct {
	c      *command
	stderr bool
}

func (w *outWriter) Write(p []byte) (int, error) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if err := context.Cause(c.ctx); err != nil {
			return 0, err
		}
		if len(c.stdout)+len(c.stderr) < maxBuffered {
			break
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-c.ctx.Done():
		}
		c.mu.Lock()
	}
	if w.stderr {
		c.stderr = append(c.stderr, p...)
	} else {
		c.stdout = append(c.stdout, p...)
	}
	c.notify()
	return len(p), nil
}

// send writes to the command's stdin; it blocks until the handler has read
// the data, which is how a full pipe pushes back on the client.
func (c *command) send(data []byte, end bool) error {
	c.mu.Lock()
	finished := c.finished
	c.mu.Unlock()
	if finished {
		return errPipeClosed
	}
	if len(data) > 0 {
		if _, err := c.stdinW.Write(data); err != nil {
			return errPipeClosed
		}
	}
	if end {
		c.stdinW.Close()
	}
	return nil
}

// output is what one Receive returns.
type output struct {
	stdout, stderr []byte
	done           bool
	exitCode       int
}

// receive waits up to timeout for output or the command's end, and takes at
// most budget bytes. ok is false when the timeout passed with nothing to
// say (the caller answers w:TimedOut).
func (c *command) receive(ctx context.Context, timeout time.Duration, budget int) (out output, ok bool, err error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.stdout) == 0 && len(c.stderr) == 0 && !c.finished {
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			c.mu.Lock()
			return output{}, false, nil
		case <-ctx.Done():
			c.mu.Lock()
			return output{}, false, ctx.Err()
		}
		c.mu.Lock()
	}
	n := min(budget, len(c.stdout))
	out.stdout = append([]byte(nil), c.stdout[:n]...)
	c.stdout = c.stdout[n:]
	budget -= n
	n = min(budget, len(c.stderr))
	out.stderr = append([]byte(nil), c.stderr[:n]...)
	c.stderr = c.stderr[n:]
	if c.finished && len(c.stdout) == 0 && len(c.stderr) == 0 {
		out.done, out.exitCode = true, c.exitCode
	}
	c.notify() // room for blocked writers
	return out, true, nil
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	// Windows spells shell and command ids in upper case.
	return strings.ToUpper(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))
}
