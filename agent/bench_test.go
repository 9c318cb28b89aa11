package agent_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/wsu-project/wsu/agent"
	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/transport/local"
)

// BenchmarkRoundTrip measures one fs.stat request and its response over OS
// pipes, the agent's real stdin/stdout plumbing.
func BenchmarkRoundTrip(b *testing.B) {
	agentIn, clientOut, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	clientIn, agentOut, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- agent.Serve(context.Background(), agentIn, agentOut, local.New(), agent.ServerInfo{Version: "bench"})
		agentOut.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, clientIn, clientOut)
	if err != nil {
		b.Fatal(err)
	}
	path := b.TempDir()
	start := time.Now()
	for b.Loop() {
		if _, err := c.Stat(context.Background(), path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "roundtrips/s")
	b.StopTimer()
	c.Close()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	agentIn.Close()
	clientIn.Close()
}
