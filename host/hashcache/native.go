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

var (
	_ host.Rebooter         = (*cache)(nil)
	_ host.OptionalFeatures = (*cache)(nil)
)

// Reboot passes the request to the wrapped backend (the cache wraps the
// agent's platform, so the agent's op handler would not see it otherwise).
func (c *cache) Reboot(ctx context.Context, req host.RebootRequest) error {
	rb, err := host.AsRebooter(c.Host)
	if err != nil {
		return err
	}
	return rb.Reboot(ctx, req)
}

// OptionalFeature passes through to the wrapped backend.
func (c *cache) OptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	f, err := host.AsOptionalFeatures(c.Host)
	if err != nil {
		return host.FeatureInfo{}, err
	}
	return f.OptionalFeature(ctx, name)
}

// EnableOptionalFeature passes through to the wrapped backend.
func (c *cache) EnableOptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	f, err := host.AsOptionalFeatures(c.Host)
	if err != nil {
		return host.FeatureInfo{}, err
	}
	return f.EnableOptionalFeature(ctx, name)
}
