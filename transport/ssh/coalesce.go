package ssh

import (
	"net"
	"sync"
	"time"
)

// Write coalescing under x/crypto/ssh.
//
// x/crypto/ssh writes every packet to its net.Conn through a bufio.Writer
// of bufio's default size (4096 bytes) that it flushes after each packet. A
// packet larger than that — every 32 KiB channel data packet of a file
// copy — reaches the connection as two writes: the buffer, filled and
// flushed in the middle of the packet, and then the rest of the packet,
// written directly. coalescingConn holds back a write of exactly the
// buffer's size and sends it together with the next write, in one
// writev(2): one system call per packet instead of two, and no copy.
//
// A write of exactly 4096 bytes can also end a packet (not with AES-GCM or
// ChaCha20-Poly1305, whose packets never total 4096 bytes, but possibly
// with some MAC ciphers); then nothing follows at once, and the held bytes
// are sent after coalesceHold. Nothing else is delayed. Errors are
// returned by the write that fails, or, for held bytes sent late, by the
// next Write; Close sends what is held first. Only x/crypto/ssh's
// transport writes here, one packet at a time under its own lock.
type coalescingConn struct {
	net.Conn

	mu    sync.Mutex
	held  []byte
	hold  time.Duration // how long held bytes wait for the rest: coalesceHold
	timer *time.Timer   // sends held bytes nothing followed
	err   error         // of sending held bytes late; sticky
}

// coalesceSize is the size of x/crypto/ssh's write buffer: bufio.NewWriter's
// default.
const coalesceSize = 4096

// coalesceHold is the longest a write of coalesceSize bytes is held back.
const coalesceHold = time.Millisecond

func newCoalescingConn(c net.Conn) *coalescingConn {
	cc := &coalescingConn{Conn: c, hold: coalesceHold}
	cc.timer = time.AfterFunc(time.Hour, cc.sendHeld)
	cc.timer.Stop()
	return cc
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if len(c.held) > 0 {
		c.timer.Stop()
		bufs := net.Buffers{c.held, p}
		n, err := bufs.WriteTo(c.Conn) // writev on a TCP connection
		held := int64(len(c.held))
		c.held = c.held[:0]
		if err != nil {
			return int(max(n-held, 0)), err
		}
		return len(p), nil
	}
	if len(p) == coalesceSize {
		c.held = append(c.held[:0], p...)
		c.timer.Reset(c.hold)
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// sendHeld sends held bytes that no write followed.
func (c *coalescingConn) sendHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flushLocked()
}

func (c *coalescingConn) flushLocked() {
	if len(c.held) == 0 || c.err != nil {
		return
	}
	_, c.err = c.Conn.Write(c.held)
	c.held = c.held[:0]
}

// Close sends what is held (waiting at most coalesceHold for a peer that
// does not read) and closes the connection. It never waits for a write in
// progress: closing the connection is what ends a write blocked in the
// kernel, as the SSH handshake's timeout relies on.
func (c *coalescingConn) Close() error {
	if c.mu.TryLock() {
		c.timer.Stop()
		if len(c.held) > 0 && c.err == nil {
			held := c.held
			c.held, c.err = nil, net.ErrClosed
			sent := make(chan struct{})
			go func() { c.Conn.Write(held); close(sent) }()
			t := time.NewTimer(c.hold)
			select {
			case <-sent:
			case <-t.C:
			}
			t.Stop()
		}
		c.mu.Unlock()
	}
	return c.Conn.Close()
}
