//go:build linux

package ssh

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// tcpPair is a loopback TCP connection: ours, and what the peer read once
// ours is closed.
func tcpPair(t *testing.T) (net.Conn, func() []byte) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The listener closes once it has accepted: closed earlier (when this
	// function returns), a connection still in its accept queue is reset,
	// and the writer sees "connection reset by peer".
	t.Cleanup(func() { ln.Close() })
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []byte {
		select {
		case b := <-got:
			return b
		case <-time.After(30 * time.Second):
			t.Fatal("the peer read nothing to the end")
			return nil
		}
	}
}

// writeSyscalls is this process's count of write system calls (write,
// writev and the like: /proc/self/io syscw).
func writeSyscalls(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no syscw in /proc/self/io")
	return 0
}

// packet is a distinct payload per index, so order and loss show.
func packet(i, size int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }

// TestCoalescingConnSendsAPacketInOneWrite: x/crypto/ssh's two writes of a
// 32 KiB packet (its 4096-byte buffer, then the rest) leave in one system
// call, every byte in order.
func TestCoalescingConnSendsAPacketInOneWrite(t *testing.T) {
	const packets = 100
	nc, received := tcpPair(t)
	c := newCoalescingConn(nc)
	// What is measured is the pairing of a packet's two writes, not the
	// timer (TestCoalescingConnSendsALoneHeldWrite): on a loaded machine
	// the test's goroutine can be descheduled for more than the 1 ms hold
	// between them, and the held half would leave alone.
	c.hold = time.Minute
	var want []byte
	before := writeSyscalls(t)
	for i := range packets {
		for _, p := range [][]byte{packet(i, coalesceSize), packet(i+packets, 32<<10+20-coalesceSize)} {
			if _, err := c.Write(p); err != nil {
				t.Fatal(err)
			}
			want = append(want, p...)
		}
	}
	calls := writeSyscalls(t) - before
	if calls > packets+packets/10 { // a few for the runtime's own writes
		t.Errorf("%d packets (%d writes) took %d write system calls, want about %d", packets, 2*packets, calls, packets)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := received(); !bytes.Equal(got, want) {
		t.Errorf("the peer received %d bytes differing from the %d written", len(got), len(want))
	}
}

// TestCoalescingConnSendsALoneHeldWrite: a buffer-sized write that ends a
// packet is not kept waiting for a write that never comes.
func TestCoalescingConnSendsALoneHeldWrite(t *testing.T) {
	ours, peer := net.Pipe()
	defer peer.Close()
	c := newCoalescingConn(ours)
	defer c.Close()
	want := packet(1, coalesceSize)
	if _, err := c.Write(want); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	peer.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatalf("the held write never arrived: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Error("the held write arrived changed")
	}
}

// TestCoalescingConnClosesAfterSendingWhatIsHeld: what was written before
// Close reaches the peer, then the end of the stream.
func TestCoalescingConnClosesAfterSendingWhatIsHeld(t *testing.T) {
	nc, received := tcpPair(t)
	c := newCoalescingConn(nc)
	want := append(packet(1, 10), packet(2, coalesceSize)...)
	for _, p := range [][]byte{want[:10], want[10:]} {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := received(); !bytes.Equal(got, want) {
		t.Errorf("the peer received %d bytes, want the %d written before Close", len(got), len(want))
	}
}

// failConn fails every write.
type failConn struct {
	net.Conn
	err error
}

func (f failConn) Write([]byte) (int, error) { return 0, f.err }
func (f failConn) Close() error              { return nil }

// TestCoalescingConnReportsErrors: a failed write is the caller's error,
// and held bytes that failed to go out late fail the next Write.
func TestCoalescingConnReportsErrors(t *testing.T) {
	reset := errors.New("connection reset")
	c := newCoalescingConn(failConn{err: reset})
	if _, err := c.Write(packet(1, 10)); !errors.Is(err, reset) {
		t.Errorf("Write: %v, want %v", err, reset)
	}
	if _, err := c.Write(packet(2, coalesceSize)); err != nil {
		t.Fatalf("a held write failed before it was sent: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Write(packet(3, 10))
		if errors.Is(err, reset) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("Write after held bytes failed to go out: %v, want %v", err, reset)
		}
		time.Sleep(coalesceHold)
	}
}

// TestCoalescingConnCloseEndsABlockedWrite: Close does not wait for a write
// stuck on a peer that reads nothing; closing is what ends it (the SSH
// handshake's timeout closes the connection to stop a handshake).
func TestCoalescingConnCloseEndsABlockedWrite(t *testing.T) {
	ours, peer := net.Pipe() // a Write on a pipe waits for the peer's Read
	defer peer.Close()
	c := newCoalescingConn(ours)
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() { _, werr = c.Write(packet(1, 10)) })
	for c.mu.TryLock() { // until the write holds the lock
		c.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for a write the peer never reads")
	}
	wg.Wait()
	if werr == nil {
		t.Error("the blocked write succeeded though the connection was closed")
	}
}
