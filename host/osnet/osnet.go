// Package osnet implements the network probes of the Host API with the
// machine's own network stack, for the backends that run on the host itself
// (the Windows agent, the simulation, the local transport).
package osnet

import (
	"context"
	"fmt"
	"net"
	"time"
)

// DialTCP connects to address and closes the connection at once. The error
// names the address and says why, in the words of the OS.
func DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	if _, _, err := net.SplitHostPort(address); err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return err
	}
	return conn.Close()
}
