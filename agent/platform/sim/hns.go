package sim

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"slices"
	"strings"

	"github.com/wsu-project/wsu/host"
)

// ErrHNSNotFound is HNS's answer for an unknown network or endpoint. It
// wraps fs.ErrNotExist.
var ErrHNSNotFound = fmt.Errorf("element not found (HNS): %w", fs.ErrNotExist)

// newGUID returns a random GUID in the upper-case form HNS shows.
func newGUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return strings.ToUpper(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]))
}

func (h *Host) HNSNetworks(ctx context.Context) ([]host.HNSNetwork, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []host.HNSNetwork
	err := h.view(func(t *tx) error {
		n, err := t.hns()
		if err == nil {
			for _, nw := range n.Networks {
				nw.Subnets = slices.Clone(nw.Subnets)
				out = append(out, nw)
			}
		}
		return err
	})
	return out, err
}

func (h *Host) HNSEndpoints(ctx context.Context) ([]host.HNSEndpoint, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []host.HNSEndpoint
	err := h.view(func(t *tx) error {
		n, err := t.hns()
		if err == nil {
			out = slices.Clone(n.Endpoints)
		}
		return err
	})
	return out, err
}

// AddHNSNetwork creates a network, as hybrid-overlay-node or a test
// harness would; the Host API itself cannot. An empty ID is assigned. A
// name already taken is an error wrapping fs.ErrExist.
func (h *Host) AddHNSNetwork(nw host.HNSNetwork) error {
	if nw.Name == "" {
		return errors.New("add HNS network: empty name")
	}
	for _, s := range nw.Subnets {
		if _, err := netip.ParsePrefix(s); err != nil {
			return fmt.Errorf("add HNS network %s: subnet: %w", nw.Name, err)
		}
	}
	if nw.ManagementIP != "" {
		if _, err := netip.ParseAddr(nw.ManagementIP); err != nil {
			return fmt.Errorf("add HNS network %s: management IP: %w", nw.Name, err)
		}
	}
	if nw.ID == "" {
		nw.ID = newGUID()
	}
	nw.Subnets = slices.Clone(nw.Subnets)
	err := h.update(func(t *tx) error {
		n, err := t.hns()
		if err != nil {
			return err
		}
		for _, o := range n.Networks {
			if o.Name == nw.Name || strings.EqualFold(o.ID, nw.ID) {
				return fmt.Errorf("network %s (%s) exists: %w", o.Name, o.ID, fs.ErrExist)
			}
		}
		n.Networks = append(n.Networks, nw)
		t.mark(tHNS)
		return nil
	})
	if err != nil {
		return fmt.Errorf("add HNS network %s: %w", nw.Name, err)
	}
	return nil
}

// RemoveHNSNetwork removes a network by name, with its endpoints; a
// missing one is not an error.
func (h *Host) RemoveHNSNetwork(name string) error {
	err := h.update(func(t *tx) error {
		n, err := t.hns()
		if err != nil {
			return err
		}
		if i := slices.IndexFunc(n.Networks, func(nw host.HNSNetwork) bool { return nw.Name == name }); i >= 0 {
			t.deleteNetwork(n, i)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove HNS network %s: %w", name, err)
	}
	return nil
}

func (t *tx) deleteNetwork(n *hnsTable, i int) {
	name := n.Networks[i].Name
	n.Networks = slices.Delete(n.Networks, i, i+1)
	n.Endpoints = slices.DeleteFunc(n.Endpoints, func(ep host.HNSEndpoint) bool { return ep.Network == name })
	t.mark(tHNS)
}

// HNSDeleteNetwork deletes a network by ID, with its endpoints.
func (h *Host) HNSDeleteNetwork(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := h.update(func(t *tx) error {
		n, err := t.hns()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(n.Networks, func(nw host.HNSNetwork) bool { return strings.EqualFold(nw.ID, id) })
		if i < 0 {
			return ErrHNSNotFound
		}
		t.deleteNetwork(n, i)
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete HNS network %s: %w", id, err)
	}
	return nil
}

// HNSCreateEndpoint creates an endpoint on the named network. It gets an
// ID, the first free address of the network's first subnet (after the
// gateway, .1) unless spec.IP asks for one, and a Hyper-V MAC derived
// from the address.
func (h *Host) HNSCreateEndpoint(ctx context.Context, spec host.HNSEndpoint) (host.HNSEndpoint, error) {
	if err := ctx.Err(); err != nil {
		return host.HNSEndpoint{}, err
	}
	ep := spec
	err := h.update(func(t *tx) error {
		n, err := t.hns()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(n.Networks, func(nw host.HNSNetwork) bool { return nw.Name == spec.Network })
		if i < 0 {
			return fmt.Errorf("network %q not found: %w", spec.Network, ErrHNSNotFound)
		}
		nw := n.Networks[i]
		if len(nw.Subnets) == 0 {
			return fmt.Errorf("network %s has no subnet", nw.Name)
		}
		prefix, err := netip.ParsePrefix(nw.Subnets[0])
		if err != nil {
			return err
		}
		prefix = prefix.Masked()
		used := map[netip.Addr]bool{}
		macs := map[string]bool{}
		if a, err := netip.ParseAddr(nw.ManagementIP); err == nil {
			used[a] = true
		}
		for _, o := range n.Endpoints {
			if a, err := netip.ParseAddr(o.IP); err == nil {
				used[a] = true
			}
			macs[strings.ToUpper(o.MAC)] = true
		}
		if ep.IP, err = pickIP(prefix, spec.IP, used); err != nil {
			return err
		}
		if ep.MAC == "" {
			ep.MAC = pickMAC(netip.MustParseAddr(ep.IP), macs)
		}
		ep.ID = newGUID()
		n.Endpoints = append(n.Endpoints, ep)
		t.mark(tHNS)
		return nil
	})
	if err != nil {
		return host.HNSEndpoint{}, fmt.Errorf("create HNS endpoint %s: %w", spec.Name, err)
	}
	return ep, nil
}

// pickIP validates a requested address or finds the first free one,
// skipping the network address, the gateway and the broadcast address.
func pickIP(prefix netip.Prefix, want string, used map[netip.Addr]bool) (string, error) {
	first := prefix.Addr().Next().Next()
	last := func(a netip.Addr) bool { // the IPv4 broadcast address
		return a.Is4() && !prefix.Contains(a.Next())
	}
	if want != "" {
		a, err := netip.ParseAddr(want)
		switch {
		case err != nil:
			return "", err
		case !prefix.Contains(a) || a.Less(first) || last(a):
			return "", fmt.Errorf("address %s is not assignable in %s", a, prefix)
		case used[a]:
			return "", fmt.Errorf("address %s is in use", a)
		}
		return a.String(), nil
	}
	for a := first; a.IsValid() && prefix.Contains(a) && !last(a); a = a.Next() {
		if !used[a] {
			return a.String(), nil
		}
	}
	return "", fmt.Errorf("no free address in %s", prefix)
}

// pickMAC uses Hyper-V's OUI and the address's low bytes, as unique as the
// addresses within a /8; a clash falls back to random bytes.
func pickMAC(a netip.Addr, used map[string]bool) string {
	b := a.AsSlice()
	b = b[len(b)-3:]
	for {
		mac := fmt.Sprintf("00-15-5D-%02X-%02X-%02X", b[0], b[1], b[2])
		if !used[mac] {
			return mac
		}
		b = make([]byte, 3)
		rand.Read(b)
	}
}

// HNSDeleteEndpoint deletes an endpoint by ID.
func (h *Host) HNSDeleteEndpoint(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := h.update(func(t *tx) error {
		n, err := t.hns()
		if err != nil {
			return err
		}
		i := slices.IndexFunc(n.Endpoints, func(ep host.HNSEndpoint) bool { return strings.EqualFold(ep.ID, id) })
		if i < 0 {
			return ErrHNSNotFound
		}
		n.Endpoints = slices.Delete(n.Endpoints, i, i+1)
		t.mark(tHNS)
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete HNS endpoint %s: %w", id, err)
	}
	return nil
}
