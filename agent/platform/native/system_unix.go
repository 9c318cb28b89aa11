//go:build unix

package native

import (
	"context"
	"time"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
)

// DiskFree is statfs(2) of path's file system.
func (h *localHost) DiskFree(ctx context.Context, path string) (host.DiskSpace, error) {
	if err := ctx.Err(); err != nil {
		return host.DiskSpace{}, err
	}
	return osfs.DiskFree(path)
}

var _ host.ModTimeStepper = (*localHost)(nil)

// ModTimeStep is how coarsely path's file system stamps modification
// times (statfs(2)'s type; 0 when not known).
func (h *localHost) ModTimeStep(_ context.Context, path string) time.Duration {
	return osfs.ModTimeStep(path)
}
