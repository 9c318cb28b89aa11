package native

import (
	"context"
	"time"
)

// SystemTime is this machine's clock.
func (h *localHost) SystemTime(ctx context.Context) (time.Time, error) {
	return time.Now(), ctx.Err()
}
