package agent

import (
	"fmt"
	"io"
	"sync"

	"github.com/wsu-project/wsu/agent/proto"
)

// grantStep is the least the agent grants back at once: one window frame
// per data chunk read, not one per small Read.
const grantStep = chunkSize

// inStream is a request's inbound stream. The read loop queues data frames
// here and never waits for the handler: a handler stuck on a slow disk (or a
// backend that stopped reading) must not keep the agent from reading the
// other requests' frames, a cancel for this one included. Memory stays
// bounded because the client sends at most proto.StreamWindow bytes beyond
// what the handler has read, which Read grants back through grant.
type inStream struct {
	grant func(n int) // sends a window frame; called without mu held

	mu        sync.Mutex
	chunks    [][]byte
	queued    int   // bytes in chunks
	ungranted int   // bytes read but not yet granted back
	err       error // why the stream ended (io.EOF: completely)
	gone      bool  // the handler finished: drop whatever comes
	ready     chan struct{}
}

func newInStream(grant func(int)) *inStream {
	return &inStream{grant: grant, ready: make(chan struct{}, 1)}
}

func (st *inStream) wake() {
	select {
	case st.ready <- struct{}{}:
	default:
	}
}

// push queues a data frame's payload (which the decoder allocated for it).
// More than the window is the client breaking the protocol.
func (st *inStream) push(p []byte) error {
	st.mu.Lock()
	if st.gone || st.err != nil {
		st.mu.Unlock()
		return nil
	}
	if st.queued+len(p) > proto.StreamWindow {
		st.mu.Unlock()
		return fmt.Errorf("%w: the client sent more than the %d-byte stream window", proto.ErrProtocol, proto.StreamWindow)
	}
	st.chunks = append(st.chunks, p)
	st.queued += len(p)
	st.mu.Unlock()
	st.wake()
	return nil
}

// end ends the stream: what is queued can still be read, then Read returns
// err (nil: io.EOF). Only the first end counts.
func (st *inStream) end(err error) {
	if err == nil {
		err = io.EOF
	}
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	st.mu.Unlock()
	st.wake()
}

// abort ends the stream at once, dropping what is queued: a cancelled
// request or a connection gone must not be read as more content.
func (st *inStream) abort(err error) {
	st.mu.Lock()
	st.chunks, st.queued = nil, 0
	st.err = err
	st.mu.Unlock()
	st.wake()
}

// close is called when the handler finished: later frames are dropped.
func (st *inStream) close() {
	st.mu.Lock()
	st.gone = true
	st.chunks, st.queued = nil, 0
	if st.err == nil {
		st.err = io.ErrClosedPipe
	}
	st.mu.Unlock()
}

func (st *inStream) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	for {
		st.mu.Lock()
		if len(st.chunks) > 0 {
			n := copy(b, st.chunks[0])
			if n == len(st.chunks[0]) {
				st.chunks[0] = nil
				st.chunks = st.chunks[1:]
			} else {
				st.chunks[0] = st.chunks[0][n:]
			}
			st.queued -= n
			st.ungranted += n
			g := 0
			if st.ungranted >= grantStep && st.err == nil {
				g, st.ungranted = st.ungranted, 0
			}
			st.mu.Unlock()
			if g > 0 {
				st.grant(g)
			}
			return n, nil
		}
		if err := st.err; err != nil {
			st.mu.Unlock()
			return 0, err
		}
		st.mu.Unlock()
		<-st.ready
	}
}
