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

func TestFirstIPv4(t *testing.T) {
	ips := func(ss ...string) []net.IP {
		var out []net.IP
		for _, s := range ss {
			out = append(out, net.ParseIP(s))
		}
		return out
	}
	assert.Equal(t, "10.0.0.5", FirstIPv4(ips("fe80::1", "169.254.3.4", "10.0.0.5", "10.0.0.6")), "a global address beats a link-local one")
	assert.Equal(t, "169.254.3.4", FirstIPv4(ips("fe80::1", "169.254.3.4")), "link-local when there is nothing else")
	assert.Equal(t, "", FirstIPv4(ips("fe80::1")))
	assert.Equal(t, "", FirstIPv4(nil))
}
