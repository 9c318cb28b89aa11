//go:build unix

package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFile takes an exclusive flock on path, calling waiting once if another
// process holds it. The kernel drops the lock if the holder dies, so a killed
// build never wedges later runs.
func lockFile(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("kubetest: locking %s: %w", path, err)
		}
		if !told {
			waiting()
			told = true
		}
		// Polling rather than a blocking flock keeps ctx honoured.
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("kubetest: waiting for %s: %w", path, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
