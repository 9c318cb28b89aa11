package ssh

import (
	"net"
	"sync"
	"time"
)

// Write coalescing under x/crypto/ssh.
//
// x/crypto/ssh writes every packet to its net.Conn as it seals it, through a
// 4 KiB bufio.Writer that it flushes after each packet: a 32 KiB channel data
// packet (the most OpenSSH accepts on a session channel) costs two write
// system calls, and a 256 KiB fs.write frame sixteen. coalescingConn sits
// between the SSH transport and the TCP connection and turns that into as
// few large writes as the network takes: Write copies into a bounded buffer
// and returns; one goroutine per connection writes whatever has gathered
// while its previous write was in the kernel. Nothing waits for a timer, so
// a lone small packet (a keepalive, an RPC) leaves at once.
//
// The semantics callers rely on are kept:
//   - back-pressure: Write blocks while coalesceLimit bytes are pending, so
//     memory per connection is bounded and a peer that stops reading stalls
//     the writer as a full socket buffer would;
//   - errors: the first failed write is returned by every later Write (the
//     bytes pending then are lost, as they would be in a socket buffer of a
//     broken connection);
//   - close: Close lets what was written before it reach the kernel (for at
//     most coalesceDrain, in case the peer reads nothing) and then closes
//     the connection, which also ends a write blocked in the kernel.
type coalescingConn struct {
	net.Conn

	mu      sync.Mutex
	more    sync.Cond // pending grew, or closing
	space   sync.Cond // pending was taken, or err set
	pending []byte
	spare   []byte // the buffer last written if it was large, reused for the next batch
	err     error  // the first write error; sticky
	closing bool
	done    chan struct{} // closed when the writer goroutine has ended
}

// coalesceLimit bounds the bytes pending per connection (two buffers of it
// at most: the one being written and the one filling; an idle connection
// keeps neither). Two 32 KiB packets (four writes of x/crypto/ssh) per
// write is most of the gain; the bound keeps 100 connections copying at
// once within ~13 MB.
const coalesceLimit = 64 << 10

// coalesceDrain is how long Close waits for pending bytes to be written.
const coalesceDrain = 2 * time.Second

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c, done: make(chan struct{})}
	cc.more.L, cc.space.L = &cc.mu, &cc.mu
	go cc.writeLoop()
	return cc
}

// Write queues p, waiting while the buffer is full. A p larger than the
// limit is queued whole once nothing else is pending.
func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.err == nil && !c.closing && len(c.pending) > 0 && len(c.pending)+len(p) > coalesceLimit {
		c.space.Wait()
	}
	if c.closing {
		return 0, net.ErrClosed
	}
	if c.err != nil {
		return 0, c.err
	}
	c.pending = append(c.pending, p...)
	c.more.Signal()
	return len(p), nil
}

// writeLoop writes the pending bytes in batches until the connection is
// closing and nothing is pending, or a write fails.
func (c *coalescingConn) writeLoop() {
	defer close(c.done)
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(c.pending) == 0 && !c.closing {
			c.more.Wait()
		}
		if len(c.pending) == 0 {
			return
		}
		batch := c.pending
		c.pending, c.spare = c.spare[:0], nil
		c.space.Broadcast()
		c.mu.Unlock()
		_, err := c.Conn.Write(batch)
		c.mu.Lock()
		if len(batch) >= coalesceLimit/2 {
			c.spare = batch // a bulk transfer: the next batch will be as large
		}
		if err != nil {
			c.err, c.pending = err, nil
			c.space.Broadcast()
			return
		}
	}
}

// Close writes what is pending (bounded by coalesceDrain) and closes the
// connection. Writes after Close fail with net.ErrClosed.
func (c *coalescingConn) Close() error {
	c.mu.Lock()
	c.closing = true
	c.more.Signal()
	c.space.Broadcast()
	c.mu.Unlock()
	t := time.NewTimer(coalesceDrain)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	return c.Conn.Close()
}
