package agent

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/proto"
)

// grants records what an inStream grants back.
type grants struct {
	mu sync.Mutex
	n  []int
}

func (g *grants) add(n int) { g.mu.Lock(); g.n = append(g.n, n); g.mu.Unlock() }

func TestInStream(t *testing.T) {
	t.Run("reads in order, grants in steps, then EOF", func(t *testing.T) {
		var g grants
		st := newInStream(g.add)
		chunk := make([]byte, grantStep/2)
		for i := range 4 {
			chunk := append([]byte(nil), chunk...)
			chunk[0] = byte(i)
			require.NoError(t, st.push(chunk))
		}
		got := make([]byte, 2*grantStep)
		_, err := io.ReadFull(st, got)
		require.NoError(t, err)
		st.end(nil)
		n, err := st.Read(make([]byte, 1))
		assert.Equal(t, 0, n)
		assert.Equal(t, io.EOF, err)
		for i := range 4 {
			assert.Equal(t, byte(i), got[i*len(chunk)])
		}
		var total int
		for _, n := range g.n {
			assert.GreaterOrEqual(t, n, grantStep, "no tiny window frames")
			total += n
		}
		assert.Equal(t, 2*grantStep, total, "everything read is granted back")
	})
	t.Run("more than the window is a protocol error", func(t *testing.T) {
		st := newInStream(func(int) {})
		require.NoError(t, st.push(make([]byte, proto.StreamWindow)))
		assert.ErrorIs(t, st.push([]byte{1}), proto.ErrProtocol)
	})
	t.Run("abort drops what is queued", func(t *testing.T) {
		st := newInStream(func(int) {})
		require.NoError(t, st.push([]byte("half a file")))
		st.abort(context.Canceled)
		_, err := st.Read(make([]byte, 64))
		assert.ErrorIs(t, err, context.Canceled)
	})
	t.Run("a blocked read wakes on end", func(t *testing.T) {
		st := newInStream(func(int) {})
		res := make(chan error, 1)
		go func() {
			_, err := st.Read(make([]byte, 64))
			res <- err
		}()
		st.end(nil)
		assert.Equal(t, io.EOF, <-res)
	})
	t.Run("frames after the handler finished are dropped", func(t *testing.T) {
		st := newInStream(func(int) {})
		st.close()
		for range 3 {
			require.NoError(t, st.push(make([]byte, proto.StreamWindow)), "not counted against the window")
		}
	})
}
