package hashcache

import (
	"context"

	"github.com/wsu-project/wsu/host"
)

var _ host.CertStore = (*cache)(nil)

// The certificate stores pass through to the wrapped backend (the agent
// wraps its platform in the cache); a backend without them is not
// supported.

func (c *cache) certStore(ctx context.Context) (host.CertStore, error) {
	if cs, ok := c.Host.(host.CertStore); ok {
		return cs, nil
	}
	facts, _ := c.Host.Facts(ctx)
	return nil, host.NotSupported("certificate store", facts.OS)
}

func (c *cache) Certificates(ctx context.Context, store string) ([]string, error) {
	cs, err := c.certStore(ctx)
	if err != nil {
		return nil, err
	}
	return cs.Certificates(ctx, store)
}

func (c *cache) AddCertificate(ctx context.Context, store string, der []byte) error {
	cs, err := c.certStore(ctx)
	if err != nil {
		return err
	}
	return cs.AddCertificate(ctx, store, der)
}

func (c *cache) DeleteCertificate(ctx context.Context, store, thumbprint string) error {
	cs, err := c.certStore(ctx)
	if err != nil {
		return err
	}
	return cs.DeleteCertificate(ctx, store, thumbprint)
}
