package kube

import (
	"context"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Changes wakes the waiters of one run when objects of one kind change
// (Nodes, CSRs), from one watch shared by all of them: a hundred hosts
// waiting for their Nodes cost one stream, not a hundred polls. A waiter
// names the object it waits on, so a busy fleet's events wake only the
// waiter each concerns.
//
// It only wakes: a waiter still looks itself, on its own interval too, so
// a watch that cannot run (RBAC without the watch verb, a proxy that cuts
// streams, an API server restarting) costs speed, never correctness. The
// watch runs while anyone is subscribed and stops with the last release;
// a watch the server refuses (Forbidden, NotFound, MethodNotSupported,
// Unauthorized) is not tried again by this Changes, so a denied watch is
// one request per run, not a loop.
type Changes struct {
	watch func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	// types are the event types that count (nil: all).
	types []watch.EventType
	// keys are the names an object's change wakes the waiters of (nil:
	// its own name).
	keys func(runtime.Object) []string

	mu       sync.Mutex
	refs     int
	cancel   context.CancelFunc
	anyObj   chan struct{}            // closes at any change
	byName   map[string]chan struct{} // closes at a change of that object
	disabled bool
}

// Backoff of a watch that ended or failed: it starts again after
// changesMinBackoff, doubling to changesMaxBackoff while it keeps failing.
const (
	changesMinBackoff = 100 * time.Millisecond
	changesMaxBackoff = 5 * time.Second
)

// NewChanges returns a Changes over a typed client's Watch; only events of
// types count (none given: all).
func NewChanges(w func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error), types ...watch.EventType) *Changes {
	return &Changes{watch: w, types: types, anyObj: make(chan struct{}), byName: map[string]chan struct{}{}}
}

// NodeChanges is a Changes of every Node: created, changed, deleted.
func NodeChanges(kc kubernetes.Interface) *Changes { return NewChanges(kc.CoreV1().Nodes().Watch) }

// NodePodChanges is a Changes of the pods bound to one node (a watch with
// a field selector, so a busy cluster's other pods cost nothing), keyed
// by that node's name: for a waiter on the node's DaemonSet pods.
func NodePodChanges(kc kubernetes.Interface, node string) *Changes {
	c := NewChanges(func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = "spec.nodeName=" + node
		return kc.CoreV1().Pods("").Watch(ctx, opts)
	})
	c.keys = func(runtime.Object) []string { return []string{node} }
	return c
}

// CSRChanges is a Changes of CertificateSigningRequests created, keyed by
// the node names each may concern (a waiter names its node): what a
// waiter for a node's CSRs needs, their approval being its own doing.
func CSRChanges(kc kubernetes.Interface) *Changes {
	c := NewChanges(kc.CertificatesV1().CertificateSigningRequests().Watch, watch.Added)
	c.keys = func(o runtime.Object) []string {
		if csr, ok := o.(*certificatesv1.CertificateSigningRequest); ok {
			return concernedNames(csr)
		}
		return nil
	}
	return c
}

// Subscribe starts the shared watch if it is not running and returns next
// and release. next(name)'s channel closes at the next change of the
// object of that name (any object: "") after the call: take it before
// looking, so a change during the look is not missed. Call release once
// when done waiting. A nil Changes gives channels that never close: the
// waiter polls.
func (c *Changes) Subscribe() (next func(name string) <-chan struct{}, release func()) {
	if c == nil {
		return func(string) <-chan struct{} { return nil }, func() {}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs++
	if c.refs == 1 && !c.disabled {
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		go c.run(ctx)
	}
	var once sync.Once
	return c.next, func() { once.Do(c.release) }
}

func (c *Changes) next(name string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if name == "" {
		return c.anyObj
	}
	ch, ok := c.byName[name]
	if !ok {
		ch = make(chan struct{})
		c.byName[name] = ch
	}
	return ch
}

func (c *Changes) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs == 0 && c.cancel != nil {
		c.cancel()
		c.cancel = nil
	}
}

// wake wakes the waiters on names, and every waiter when all is set.
func (c *Changes) wake(names []string, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.anyObj)
	c.anyObj = make(chan struct{})
	for name, ch := range c.byName {
		if all || slices.Contains(names, name) {
			close(ch)
			delete(c.byName, name)
		}
	}
}

// run keeps a watch open until ctx ends or the server refuses it. A watch
// that (re)starts wakes everyone once: what changed while none was open
// is not known.
func (c *Changes) run(ctx context.Context) {
	backoff := changesMinBackoff
	for ctx.Err() == nil {
		w, err := c.watch(ctx, metav1.ListOptions{})
		if err != nil && refused(err) {
			c.mu.Lock()
			c.disabled = true
			c.mu.Unlock()
			return
		}
		if err == nil {
			if c.drain(ctx, w) {
				backoff = changesMinBackoff
			}
			c.wake(nil, true)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, changesMaxBackoff)
	}
}

// drain reads w until it ends, waking once per burst of events (the
// initial ADDED events of every existing object arrive as one burst).
// It says whether any event came.
func (c *Changes) drain(ctx context.Context, w watch.Interface) bool {
	defer w.Stop()
	got := false
	for {
		var names []string
		select {
		case <-ctx.Done():
			return got
		case e, ok := <-w.ResultChan():
			if !ok || e.Type == watch.Error {
				return got
			}
			got = true
			names = c.counted(names, e)
		}
		for more := true; more; {
			select {
			case e, ok := <-w.ResultChan():
				if !ok || e.Type == watch.Error {
					return got // run wakes everyone
				}
				names = c.counted(names, e)
			default:
				more = false
			}
		}
		if len(names) > 0 {
			c.wake(names, false)
		}
	}
}

// counted adds e's object name to names when e is of a type that counts.
func (c *Changes) counted(names []string, e watch.Event) []string {
	if e.Type == watch.Bookmark || (c.types != nil && !slices.Contains(c.types, e.Type)) {
		return names
	}
	if c.keys != nil {
		return append(names, c.keys(e.Object)...)
	}
	if m, err := meta.Accessor(e.Object); err == nil {
		return append(names, m.GetName())
	}
	return names
}

// refused: the server will not serve this watch to these credentials.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) ||
		apierrors.IsUnauthorized(err)
}
