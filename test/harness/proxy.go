package harness

import (
	"io"
	"net"
	"sync"
)

// FaultProxy is a TCP relay in front of a real server that can cut every
// connection at once, as a network reconfiguration on a Windows node does
// (hybrid-overlay, HNS removal). It is a fault injector, not a stand-in for
// anything: the bytes pass through unchanged.
type FaultProxy struct {
	Addr   string // where clients connect: 127.0.0.1:port
	target string
	ln     net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	cuts  int
	wg    sync.WaitGroup
}

// NewFaultProxy listens on 127.0.0.1 and relays to target.
func NewFaultProxy(target string) (*FaultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FaultProxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *FaultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, up)
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

func (p *FaultProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
}

func (p *FaultProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	io.Copy(dst, src)
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every open connection; new ones are accepted again at once.
// It returns how many connections it cut.
func (p *FaultProxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		c.Close()
		n++
	}
	p.conns = map[net.Conn]struct{}{}
	if n > 0 {
		p.cuts++
	}
	return n / 2
}

// Cuts is how many times Cut found connections to cut.
func (p *FaultProxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Close stops listening and cuts what is open.
func (p *FaultProxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
