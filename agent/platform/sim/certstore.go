package sim

import (
	"context"
	"crypto/x509"
	"fmt"
	"sort"
	"strings"

	"github.com/wsu-project/wsu/host"
)

var _ host.CertStore = (*Host)(nil)

// certTable models the LocalMachine system certificate stores: store name
// (upper-cased: Windows ignores case) → thumbprint → DER. Like the real
// stores it takes only what parses as an X.509 certificate, and a fresh
// host's are empty (a real ROOT holds Microsoft's roots; no test depends
// on them).
type certTable struct {
	Stores map[string]map[string][]byte `json:"stores"`
}

func (t *tx) certs() (*certTable, error) {
	c, err := table[certTable](t, tCerts)
	if err == nil && c.Stores == nil {
		c.Stores = map[string]map[string][]byte{}
	}
	return c, err
}

// Certificates lists a store's thumbprints, sorted.
func (h *Host) Certificates(ctx context.Context, store string) ([]string, error) {
	if err := checkStore(ctx, store); err != nil {
		return nil, err
	}
	var out []string
	err := h.view(func(t *tx) error {
		tab, err := t.certs()
		if err != nil {
			return err
		}
		for tp := range tab.Stores[strings.ToUpper(store)] {
			out = append(out, tp)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

// AddCertificate adds a certificate unless the store has it.
func (h *Host) AddCertificate(ctx context.Context, store string, der []byte) error {
	if err := checkStore(ctx, store); err != nil {
		return err
	}
	if _, err := x509.ParseCertificate(der); err != nil {
		return fmt.Errorf("add certificate to %s: not a DER X.509 certificate: %w", store, err)
	}
	return h.update(func(t *tx) error {
		tab, err := t.certs()
		if err != nil {
			return err
		}
		s := tab.Stores[strings.ToUpper(store)]
		if s == nil {
			s = map[string][]byte{}
			tab.Stores[strings.ToUpper(store)] = s
		}
		s[host.Thumbprint(der)] = append([]byte(nil), der...)
		t.mark(tCerts)
		return nil
	})
}

// DeleteCertificate removes a certificate; a missing one is not an error.
func (h *Host) DeleteCertificate(ctx context.Context, store, thumbprint string) error {
	if err := checkStore(ctx, store); err != nil {
		return err
	}
	if err := host.CheckThumbprint(thumbprint); err != nil {
		return err
	}
	return h.update(func(t *tx) error {
		tab, err := t.certs()
		if err != nil {
			return err
		}
		delete(tab.Stores[strings.ToUpper(store)], strings.ToUpper(thumbprint))
		t.mark(tCerts)
		return nil
	})
}

func checkStore(ctx context.Context, store string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return host.CheckStoreName(store)
}
