//go:build unix

package native

import (
	"context"

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
