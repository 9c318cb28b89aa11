// Package osnet implements the network probes of the Host API, and the
// address choice of the ipv4 fact, with the machine's own network stack, for
// the backends that run on the host itself (the Windows agent, the
// simulation, the local transport).
package osnet

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/wsu-project/wsu/host"
)

// DialTCP connects to address and closes the connection at once. A failed
// connection wraps host.ErrUnreachable and says why in the words of the OS;
// ctx ending is ctx's error, not an answer about the address.
func DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	if _, _, err := net.SplitHostPort(address); err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	dctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(dctx, "tcp", address)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %w", host.ErrUnreachable, err)
	}
	return conn.Close()
}
