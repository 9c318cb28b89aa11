//go:build linux

package machineapi

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/userdata"
)

// SimCloud is the cloud of the harness's simulated hosts: each Windows
// Machine gets the next unused host of Hosts, its InternalIP that host's
// IPv4 and its providerID sim:///NAME; "booting" it authorises on the
// harness's sshd the key of the user data its providerSpec names
// (userDataSecret, read from the Machine's namespace). Deleting its VM
// shuts the host down (its processes end); the host is never handed out
// again. A Machine of another OS gets an address only.
type SimCloud struct {
	Env *harness.Env
	// Hosts are the hosts to hand out, in order (the harness's).
	Hosts []*harness.Host
	// Client reads the user-data Secret.
	Client client.Client

	mu     sync.Mutex
	next   int
	others int
	byAddr map[string]*harness.Host
}

// ErrNoHost: every host was handed out.
var ErrNoHost = errors.New("machineapi: the sim cloud has no host left")

// Create implements Cloud.
func (c *SimCloud) Create(ctx context.Context, m *unstructured.Unstructured) (VM, error) {
	if m.GetLabels()[OSIDLabel] != "Windows" {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.others++
		return VM{ProviderID: fmt.Sprintf("sim:///linux/%d", c.others), Address: fmt.Sprintf("127.0.200.%d", c.others)}, nil
	}
	pub, err := c.userDataKey(ctx, m)
	if err != nil {
		return VM{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next >= len(c.Hosts) {
		return VM{}, ErrNoHost
	}
	h := c.Hosts[c.next]
	if err := c.Env.SSHD.AuthorizeKey(pub); err != nil {
		return VM{}, err
	}
	c.next++
	if c.byAddr == nil {
		c.byAddr = map[string]*harness.Host{}
	}
	c.byAddr[h.IPv4] = h
	return VM{ProviderID: "sim:///" + h.Name, Address: h.IPv4}, nil
}

// Delete implements Cloud.
func (c *SimCloud) Delete(ctx context.Context, vm VM) error {
	c.mu.Lock()
	h := c.byAddr[vm.Address]
	delete(c.byAddr, vm.Address)
	c.mu.Unlock()
	if h == nil {
		return nil
	}
	return c.Env.WithSim(h, func(s *sim.Host) error { return s.Shutdown(ctx) })
}

// HostOf is the host of a Windows Machine's VM at address, nil if none.
func (c *SimCloud) HostOf(address string) *harness.Host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byAddr[address]
}

// authorizedKey finds the key line the user-data script writes.
var authorizedKey = regexp.MustCompile(`-Value '([^']+)'`)

// userDataKey is the key m's user data authorises: its providerSpec's
// userDataSecret, read from m's namespace.
func (c *SimCloud) userDataKey(ctx context.Context, m *unstructured.Unstructured) (ssh.PublicKey, error) {
	name, _, _ := unstructured.NestedString(m.Object, "spec", "providerSpec", "value", "userDataSecret", "name")
	if name == "" {
		return nil, fmt.Errorf("machineapi: %s: its providerSpec names no userDataSecret", m.GetName())
	}
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, types.NamespacedName{Namespace: m.GetNamespace(), Name: name}, s); err != nil {
		return nil, fmt.Errorf("machineapi: %s: the user data: %w", m.GetName(), err)
	}
	got := authorizedKey.FindSubmatch(s.Data[userdata.SecretKey])
	if got == nil {
		return nil, fmt.Errorf("machineapi: %s: the user data %s authorises no key", m.GetName(), name)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(got[1])
	return pub, err
}
