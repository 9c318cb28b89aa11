package limits

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Reading inputs. Every input wsu reads from a path (a playbook, a var
// file, an inventory, a join configuration, a saved plan) is read by Read,
// whatever the path is: a regular file, a pipe (--var-file <(sops -d x),
// /dev/stdin), a FIFO or a device. Read stops at its bound, so /dev/zero is
// refused like any file that is too large instead of filling memory, and
// it gives up when its context ends, so a FIFO nothing writes to cannot
// keep Ctrl-C or SIGTERM from ending the run.
//
// A pipe can be read only once, and a run reads some inputs more than
// once (the CLI looks whether its argument is a saved plan before reading
// it as a playbook; var files are read for their secrets, their values and
// the source lines diagnostics quote): Files reads each path once per run
// and gives every later reader the same content.

// ReadFile reads a file of at most MaxFileSize bytes: a larger one is
// refused without being read whole.
func ReadFile(path string) ([]byte, error) {
	return Read(context.Background(), path, MaxFileSize)
}

// Read reads path, refusing it with a *TooLargeError past max bytes
// (having read max+1), and with an *InterruptedError when ctx ends first
// (the open or read it waits in, on a FIFO with no writer, is abandoned).
func Read(ctx context.Context, path string, max int) ([]byte, error) {
	return NewFiles(ctx).ReadMax(path, max)
}

// TooLargeError is Read refusing an input beyond its bound.
type TooLargeError struct {
	Path string
	Max  int // 0: MaxFileSize
}

func (e *TooLargeError) Error() string {
	max := e.Max
	if max == 0 {
		max = MaxFileSize
	}
	return fmt.Sprintf("%s is larger than %d bytes (%d MiB), the most wsu reads; see Limits in docs/playbook-language.md", e.Path, max, max>>20)
}

// InterruptedError is Read giving up because the run was interrupted
// while it waited for the input.
type InterruptedError struct{ Path string }

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted while waiting to read %s (a FIFO or pipe nothing writes to?); no host was touched", e.Path)
}

// Interrupted reports whether err is a read given up on a signal.
func Interrupted(err error) bool {
	var ie *InterruptedError
	return errors.As(err, &ie)
}

// Files reads a run's inputs, each path once: a later Read of the same
// path gets what the first read (the same bytes, or the same error), so a
// pipe's content is not lost to the first reader. A path is read only as
// far as a reader needs (Head looks at a file's start without reading a
// device such as /dev/zero to the bound). A nil *Files reads from disk
// every time (bounded, but not interruptible).
type Files struct {
	ctx  context.Context
	mu   sync.Mutex
	read map[string]*readEntry
}

// NewFiles reads inputs until ctx ends.
func NewFiles(ctx context.Context) *Files {
	return &Files{ctx: ctx, read: map[string]*readEntry{}}
}

// Read is path's content, at most MaxFileSize bytes.
func (f *Files) Read(path string) ([]byte, error) {
	return f.ReadMax(path, MaxFileSize)
}

// ReadMax is path's content, at most max bytes. Past max the path is
// refused, and stays refused: reading stops there.
func (f *Files) ReadMax(path string, max int) ([]byte, error) {
	if f == nil {
		f = NewFiles(context.Background())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.fill(path, max+1)
	switch {
	case e.err != nil:
		return nil, e.err
	case len(e.data) > max:
		e.close()
		e.err = &TooLargeError{Path: path, Max: max}
		return nil, e.err
	}
	return e.data, nil
}

// Head is path's first n bytes (fewer when it is shorter); the rest is
// left for a later Read.
func (f *Files) Head(path string, n int) ([]byte, error) {
	if f == nil {
		f = NewFiles(context.Background())
		defer func() { f.read[path].close() }()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.fill(path, n)
	return e.data[:min(n, len(e.data))], e.err
}

// fill reads path on until at least n bytes of it are held, or all of
// it; f.mu is held.
func (f *Files) fill(path string, n int) *readEntry {
	e := f.read[path]
	if e == nil {
		e = &readEntry{}
		f.read[path] = e
	}
	if e.err == nil && !e.done && len(e.data) < n {
		e.readOn(f.ctx, path, n-len(e.data))
	}
	return e
}

// readEntry is one path as read so far: data, the file open to read on
// (nil before the first read and after the last), whether the end was
// reached, or the error that ended reading.
type readEntry struct {
	file *os.File
	data []byte
	done bool
	err  error
}

// readOn reads up to n more bytes, opening the file first if need be,
// and gives up when ctx ends: an open or read waiting on a FIFO nothing
// writes to is abandoned (the file is closed when it opens).
func (e *readEntry) readOn(ctx context.Context, path string, n int) {
	type result struct {
		b   []byte
		err error
	}
	res := make(chan result, 1)
	var mu sync.Mutex
	file, abandoned := e.file, false
	go func() {
		mu.Lock()
		f := file
		mu.Unlock()
		if f == nil {
			opened, err := os.Open(path) // blocks on a FIFO until a writer opens it
			if err != nil {
				res <- result{err: err}
				return
			}
			mu.Lock()
			file, f = opened, opened
			if abandoned {
				opened.Close()
			}
			mu.Unlock()
		}
		b, err := io.ReadAll(io.LimitReader(f, int64(n)))
		res <- result{b, err}
	}()
	select {
	case r := <-res:
		mu.Lock()
		e.file = file
		mu.Unlock()
		e.data = append(e.data, r.b...)
		if r.err != nil || len(r.b) < n {
			e.err, e.done = r.err, true
			e.close()
		}
	case <-ctx.Done():
		mu.Lock()
		abandoned = true
		if file != nil {
			file.Close() // ends a read waiting on a pipe
		}
		mu.Unlock()
		e.file, e.err, e.done = nil, &InterruptedError{Path: path}, true
	}
}

func (e *readEntry) close() {
	if e.file != nil {
		e.file.Close()
		e.file = nil
	}
}
