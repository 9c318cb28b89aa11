package sim

import (
	"context"
	"io/fs"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

const overlay = "OVNKubernetesHybridOverlayNetwork"

func TestHNS(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	nets, err := h.HNSNetworks(ctx)
	require.NoError(t, err)
	assert.Empty(t, nets)

	base := host.HNSNetwork{Name: "BaseOVNKubernetesHybridOverlayNetwork", Type: "Overlay", Subnets: []string{"192.168.255.0/30"}}
	require.NoError(t, h.AddHNSNetwork(base))
	require.NoError(t, h.AddHNSNetwork(host.HNSNetwork{Name: overlay, Type: "Overlay", ManagementIP: "10.132.0.2", Subnets: []string{"10.132.0.0/24"}}))
	assert.ErrorIs(t, h.AddHNSNetwork(host.HNSNetwork{Name: overlay}), fs.ErrExist)
	assert.Error(t, h.AddHNSNetwork(host.HNSNetwork{Name: "bad", Subnets: []string{"10.0.0.0"}}))
	assert.Error(t, h.AddHNSNetwork(host.HNSNetwork{}))

	nets, err = h.HNSNetworks(ctx)
	require.NoError(t, err)
	require.Len(t, nets, 2)
	guid := regexp.MustCompile(`^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$`)
	assert.Regexp(t, guid, nets[1].ID)
	assert.Equal(t, overlay, nets[1].Name)

	tests := []struct {
		name    string
		spec    host.HNSEndpoint
		wantIP  string
		wantMAC string
		wantErr string
	}{
		// .1 is the gateway and .2 the management IP.
		{name: "first free address", spec: host.HNSEndpoint{Name: "VIPEndpoint", Network: overlay, HostAttach: true}, wantIP: "10.132.0.3", wantMAC: "00-15-5D-84-00-03"},
		{name: "next address", spec: host.HNSEndpoint{Name: "pod", Network: overlay}, wantIP: "10.132.0.4", wantMAC: "00-15-5D-84-00-04"},
		{name: "requested address", spec: host.HNSEndpoint{Name: "fixed", Network: overlay, IP: "10.132.0.100", MAC: "02-00-00-00-00-01"}, wantIP: "10.132.0.100", wantMAC: "02-00-00-00-00-01"},
		{name: "requested address in use", spec: host.HNSEndpoint{Name: "dup", Network: overlay, IP: "10.132.0.3"}, wantErr: "in use"},
		{name: "requested address outside", spec: host.HNSEndpoint{Name: "out", Network: overlay, IP: "10.0.0.1"}, wantErr: "not assignable"},
		{name: "unknown network", spec: host.HNSEndpoint{Name: "x", Network: "nope"}, wantErr: "not found"},
		{name: "small subnet", spec: host.HNSEndpoint{Name: "a", Network: base.Name}, wantIP: "192.168.255.2"},
		{name: "small subnet full", spec: host.HNSEndpoint{Name: "b", Network: base.Name}, wantErr: "no free address"},
	}
	var created []host.HNSEndpoint
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, err := h.HNSCreateEndpoint(ctx, tt.spec)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Regexp(t, guid, ep.ID)
			assert.Equal(t, tt.wantIP, ep.IP)
			if tt.wantMAC != "" {
				assert.Equal(t, tt.wantMAC, ep.MAC)
			}
			assert.Equal(t, tt.spec.Name, ep.Name)
			assert.Equal(t, tt.spec.HostAttach, ep.HostAttach)
			created = append(created, ep)
		})
	}
	eps, err := h.HNSEndpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, created, eps)

	require.NoError(t, h.HNSDeleteEndpoint(ctx, created[1].ID))
	assert.ErrorIs(t, h.HNSDeleteEndpoint(ctx, created[1].ID), fs.ErrNotExist)
	ep, err := h.HNSCreateEndpoint(ctx, host.HNSEndpoint{Name: "again", Network: overlay})
	require.NoError(t, err)
	assert.Equal(t, "10.132.0.4", ep.IP, "a freed address is reused")

	// Deleting a network deletes its endpoints.
	require.NoError(t, h.HNSDeleteNetwork(ctx, nets[1].ID))
	assert.ErrorIs(t, h.HNSDeleteNetwork(ctx, nets[1].ID), fs.ErrNotExist)
	eps, err = h.HNSEndpoints(ctx)
	require.NoError(t, err)
	assert.Equal(t, []host.HNSEndpoint{created[3]}, eps)

	require.NoError(t, h.RemoveHNSNetwork(base.Name))
	require.NoError(t, h.RemoveHNSNetwork(base.Name), "missing is fine")
	nets, err = h.HNSNetworks(ctx)
	require.NoError(t, err)
	assert.Empty(t, nets)
	eps, err = h.HNSEndpoints(ctx)
	require.NoError(t, err)
	assert.Empty(t, eps)
}
