package host_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsu-project/wsu/host"
)

func TestCountersArithmetic(t *testing.T) {
	tests := []struct {
		name      string
		a, b      host.Counters
		sum, diff host.Counters
	}{
		{
			name: "zero",
		},
		{
			name: "ops on one side only",
			a:    host.Counters{RPCs: 3, RPCsByOp: map[string]int64{"fs.stat": 2, "fs.sha256": 1}, BytesSent: 10},
			sum:  host.Counters{RPCs: 3, RPCsByOp: map[string]int64{"fs.stat": 2, "fs.sha256": 1}, BytesSent: 10},
			diff: host.Counters{RPCs: 3, RPCsByOp: map[string]int64{"fs.stat": 2, "fs.sha256": 1}, BytesSent: 10},
		},
		{
			name: "ops unchanged in between drop out of a difference",
			a:    host.Counters{RPCs: 5, RPCsByOp: map[string]int64{"fs.stat": 3, "fs.write": 2}, BytesSent: 300, AgentBytes: 7},
			b:    host.Counters{RPCs: 3, RPCsByOp: map[string]int64{"fs.stat": 1, "fs.write": 2}, BytesSent: 100, AgentBytes: 7},
			sum:  host.Counters{RPCs: 8, RPCsByOp: map[string]int64{"fs.stat": 4, "fs.write": 4}, BytesSent: 400, AgentBytes: 14},
			diff: host.Counters{RPCs: 2, RPCsByOp: map[string]int64{"fs.stat": 2}, BytesSent: 200},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.sum, tt.a.Add(tt.b))
			assert.Equal(t, tt.diff, tt.a.Sub(tt.b))
			assert.Equal(t, tt.a, tt.a.Add(tt.b).Sub(tt.b), "Sub undoes Add")
		})
	}
}

func TestMeterConcurrent(t *testing.T) {
	var m host.Meter
	assert.Equal(t, host.Counters{}, m.Counters(), "the zero value counts nothing")
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				m.RPC("fs.stat")
				if j%10 == 0 {
					m.RPC("fs.write")
					m.Sent(3)
				}
			}
			m.AgentSent(5)
		}()
	}
	wg.Wait()
	assert.Equal(t, host.Counters{
		RPCs:       8800,
		RPCsByOp:   map[string]int64{"fs.stat": 8000, "fs.write": 800},
		BytesSent:  2400,
		AgentBytes: 40,
	}, m.Counters())
}
