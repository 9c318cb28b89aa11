// Package agenttest runs an agent and a client connected by in-memory pipes,
// for tests that want the real protocol between a Host user and a backend.
package agenttest

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/wsu-project/wsu/agent"
	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/host"
)

// Options tune Start.
type Options struct {
	// Info is the agent's identity; a test default when zero.
	Info agent.ServerInfo
	// ToAgent and ToClient wrap the two directions of the transport, e.g.
	// to mangle bytes. The wrapper must pass Close through.
	ToAgent, ToClient func(io.WriteCloser) io.WriteCloser
}

// Conn is a running agent and its client.
type Conn struct {
	Client *client.Client
	served chan error
	err    error
	waited bool
}

// Start serves backend over pipes and dials it. The test's cleanup closes
// the client and waits for the agent to finish.
func Start(t testing.TB, backend host.Host, opts Options) *Conn {
	t.Helper()
	if opts.Info == (agent.ServerInfo{}) {
		opts.Info = agent.ServerInfo{Version: "test", SHA256: "0000", Platform: "test"}
	}
	wrap := func(f func(io.WriteCloser) io.WriteCloser, w io.WriteCloser) io.WriteCloser {
		if f == nil {
			return w
		}
		return f(w)
	}
	agentIn, clientOut := io.Pipe()
	clientIn, agentOut := io.Pipe()
	c := &Conn{served: make(chan error, 1)}
	go func() {
		err := agent.Serve(context.Background(), agentIn, wrap(opts.ToClient, agentOut), backend, opts.Info)
		agentIn.CloseWithError(io.ErrClosedPipe) // a client still writing fails instead of hanging
		agentOut.Close()                         // the client's reader sees EOF
		c.served <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, clientIn, wrap(opts.ToAgent, clientOut))
	if err != nil {
		clientOut.Close()
		t.Fatalf("dial: %v", err)
	}
	c.Client = cl
	t.Cleanup(func() {
		cl.Close()
		if err := c.Wait(); err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	return c
}

// Wait waits for the agent's Serve to return and returns its error; it
// fails after ten seconds.
func (c *Conn) Wait() error {
	if c.waited {
		return c.err
	}
	select {
	case c.err = <-c.served:
	case <-time.After(10 * time.Second):
		c.err = errTimeout
	}
	c.waited = true
	return c.err
}

var errTimeout = errors.New("agent did not stop within 10s")
