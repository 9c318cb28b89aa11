// Package notify carries what a transport has to tell the user while it
// connects — a host key it recorded on first use, a connection attempt that
// failed and will be retried — from the transport to whoever shows the
// run: the engine turns notices into events (host_warning,
// host_connect_retry), which the CLI's views print. The hook travels in
// the context, so the transports' Dial signature stays the same.
package notify

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Kind tells what a Notice reports.
type Kind string

const (
	// Warning is something the user must see even though the connection
	// goes on: a host key recorded by trust on first use, an inventory
	// option the transport ignores, messages sent unencrypted.
	Warning Kind = "warning"
	// Retry is a connection attempt that failed and will be made again
	// after Wait.
	Retry Kind = "retry"
)

// Notice is one thing a transport reports.
type Notice struct {
	Kind Kind
	// Host is the inventory name of the host being connected to.
	Host string
	// Summary is one line; Detail may add more.
	Summary string
	Detail  string

	// Retry only: the attempt that failed (1 is the first), its error and
	// how long the transport waits before the next one.
	Attempt int
	Err     error
	Wait    time.Duration
}

// String is the notice as text: "warning: host win01: summary\n  detail".
func (n Notice) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: host %s: %s", n.Kind, n.Host, n.Summary)
	for _, l := range strings.Split(strings.TrimSpace(n.Detail), "\n") {
		if l != "" {
			b.WriteString("\n  " + l)
		}
	}
	return b.String()
}

// Func receives notices. Transports may call it from several goroutines.
type Func func(Notice)

type ctxKey struct{}

// With returns ctx carrying f: transports dialled with it report to f.
func With(ctx context.Context, f Func) context.Context {
	return context.WithValue(ctx, ctxKey{}, f)
}

// From returns the Func ctx carries, or ToStderr when it carries none, so
// a notice is never dropped silently.
func From(ctx context.Context) Func {
	if f, ok := ctx.Value(ctxKey{}).(Func); ok && f != nil {
		return f
	}
	return ToStderr
}

// ToStderr writes n to os.Stderr, prefixed "wsu: ", in one write: an
// *os.File serialises its writes, so notices from goroutines never
// interleave, and no lock is shared beyond the file's own.
func ToStderr(n Notice) { fmt.Fprintf(os.Stderr, "wsu: %s\n", n) }

// To returns a Func writing each notice as a line (or lines) to w. The
// Func serialises its own writes (w need not be safe for concurrent use);
// two Funcs share nothing.
func To(w io.Writer) Func {
	var mu sync.Mutex
	return func(n Notice) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "wsu: %s\n", n)
	}
}
