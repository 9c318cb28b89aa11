package modutil

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
)

// The reads run at once (each waits until all have started), and the
// answer is the first failure in the reads' order, not in time.
func TestTogether(t *testing.T) {
	var started sync.WaitGroup
	started.Add(3)
	meet := func() bool {
		started.Done()
		done := make(chan struct{})
		go func() { started.Wait(); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}
	fail := func(summary string) hcl.Diagnostics {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary}}
	}
	d := Together(
		func() hcl.Diagnostics { assert.True(t, meet(), "ran alone"); return nil },
		func() hcl.Diagnostics {
			assert.True(t, meet(), "ran alone")
			time.Sleep(50 * time.Millisecond)
			return fail("second")
		},
		func() hcl.Diagnostics { assert.True(t, meet(), "ran alone"); return fail("third") },
	)
	assert.Equal(t, fail("second"), d)
	assert.Nil(t, Together(func() hcl.Diagnostics { return nil }))
}
