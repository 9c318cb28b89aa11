package osnet

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestDialTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	open := ln.Addr().String()
	accepted := make(chan struct{})
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			close(accepted)
		}
	}()
	require.NoError(t, DialTCP(context.Background(), open, 5*time.Second))
	<-accepted // the probe really connected

	require.NoError(t, ln.Close())
	err = DialTCP(context.Background(), open, 5*time.Second)
	assert.True(t, errors.Is(err, syscall.ECONNREFUSED), "a closed port is refused: %v", err)
	assert.ErrorIs(t, err, host.ErrUnreachable)

	err = DialTCP(context.Background(), "127.0.0.1", time.Second)
	assert.ErrorContains(t, err, "missing port")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = DialTCP(ctx, open, 0)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, host.ErrUnreachable, "the caller gave up: no answer about the port")
}
