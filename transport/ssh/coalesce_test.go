package ssh

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"testing"
	"time"
)

// gateConn is a net.Conn whose writes are recorded and, while the gate is
// shut, wait for it: a kernel that is busy with the previous write.
type gateConn struct {
	net.Conn // nil: only Write and Close are used
	gate     chan struct{}
	mu       sync.Mutex
	writes   [][]byte
	failWith error
	closed   bool
}

func newGateConn() *gateConn { return &gateConn{gate: make(chan struct{})} }

func (g *gateConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	g.writes = append(g.writes, bytes.Clone(p))
	err := g.failWith
	g.mu.Unlock()
	<-g.gate
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (g *gateConn) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	return nil
}

func (g *gateConn) recorded() ([][]byte, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]byte(nil), g.writes...), g.closed
}

// waitWrites waits until the conn has seen n writes begin.
func (g *gateConn) waitWrites(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if w, _ := g.recorded(); len(w) >= n {
			return
		}
	}
	t.Fatalf("fewer than %d writes reached the connection", n)
}

// packet is a distinct payload per index, so order and loss show.
func packet(i, size int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }

func TestCoalescingConnJoinsWritesMadeDuringAWrite(t *testing.T) {
	g := newGateConn()
	c := newCoalescingConn(g)
	var want []byte
	for i := range 9 { // 4 + 32 KiB, like x/crypto/ssh's bufio split of a packet, and more
		p := packet(i, 4<<10)
		if i == 0 {
			p = packet(i, 4)
		}
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p...)
		if i == 0 {
			g.waitWrites(t, 1) // the first write is in the "kernel"
		}
	}
	close(g.gate)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	writes, closed := g.recorded()
	if len(writes) != 2 {
		t.Errorf("9 writes reached the connection as %d writes, want 2 (the first, then the rest at once)", len(writes))
	}
	if got := bytes.Join(writes, nil); !bytes.Equal(got, want) {
		t.Errorf("the connection received %d bytes differing from the %d written", len(got), len(want))
	}
	if !closed {
		t.Error("Close did not close the connection")
	}
}

func TestCoalescingConnBoundsWhatIsPending(t *testing.T) {
	g := newGateConn()
	c := newCoalescingConn(g)
	if _, err := c.Write(packet(1, 10)); err != nil {
		t.Fatal(err)
	}
	g.waitWrites(t, 1)
	if _, err := c.Write(packet(2, coalesceLimit-10)); err != nil {
		t.Fatal(err)
	}
	returned := make(chan error, 1)
	go func() { _, err := c.Write(packet(3, 20)); returned <- err }()
	select {
	case err := <-returned:
		t.Fatalf("a write past the limit returned (%v) while the connection took nothing", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(g.gate)
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	writes, _ := g.recorded()
	if n := len(bytes.Join(writes, nil)); n != coalesceLimit+20 {
		t.Errorf("the connection received %d bytes, want %d", n, coalesceLimit+20)
	}
}

func TestCoalescingConnReportsAWriteErrorOnLaterWrites(t *testing.T) {
	g := newGateConn()
	g.failWith = errors.New("connection reset")
	close(g.gate)
	c := newCoalescingConn(g)
	if _, err := c.Write(packet(1, 10)); err != nil {
		t.Fatal(err) // queued: the error is not known yet
	}
	<-c.done // the writer ended on the error
	if _, err := c.Write(packet(2, 10)); !errors.Is(err, g.failWith) {
		t.Errorf("Write after a failed write: %v, want %v", err, g.failWith)
	}
	c.Close()
	if _, err := c.Write(packet(3, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close of a failed connection: %v, want net.ErrClosed", err)
	}
}

func TestCoalescingConnCloseEndsAWriteThePeerNeverReads(t *testing.T) {
	ours, peer := net.Pipe() // a Write on a pipe waits for the peer's Read
	defer peer.Close()
	c := newCoalescingConn(ours)
	if _, err := c.Write(packet(1, 10)); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(coalesceDrain + 10*time.Second):
		t.Fatal("Close did not return though the peer never reads")
	}
	<-c.done
	if _, err := c.Write(packet(2, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
}
