package hashcache

import (
	"context"

	"github.com/wsu-project/wsu/host"
)

var _ host.NativePather = (*cache)(nil)

// NativePath passes the wrapped backend's answer through (the agent wraps
// the simulation in the cache); a backend without one uses the path as is.
func (c *cache) NativePath(ctx context.Context, path string) (string, error) {
	if np, ok := c.Host.(host.NativePather); ok {
		return np.NativePath(ctx, path)
	}
	return path, nil
}
