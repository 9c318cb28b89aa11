package main

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/test/standin/simhost"
)

func TestNetworkAndCNI(t *testing.T) {
	ctx := context.Background()
	h, err := sim.New(t.TempDir(), sim.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	subnet := netip.MustParsePrefix("10.244.1.0/24")

	// Without the Containers feature HNS is unavailable: it waits, and
	// goes on once the feature is enabled.
	require.NoError(t, h.SetOptionalFeature(sim.ContainersFeature, host.FeatureDisabled))
	_, err = tryNetwork(ctx, h, subnet, "10.1.0.5")
	require.ErrorIs(t, err, sim.ErrHNSUnavailable)
	type result struct {
		ep  host.HNSEndpoint
		err error
	}
	done := make(chan result, 1)
	go func() { ep, err := ensureNetwork(ctx, h, subnet, "10.1.0.5"); done <- result{ep, err} }()
	require.NoError(t, h.SetOptionalFeature(sim.ContainersFeature, host.FeatureEnabled))
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ensureNetwork did not go on once HNS was available")
	}
	require.NoError(t, r.err)
	ep := r.ep
	assert.Equal(t, "Calico_ep", ep.Name)
	assert.Equal(t, "10.244.1.2", ep.IP)
	again, err := ensureNetwork(ctx, h, netip.MustParsePrefix("10.244.1.0/24"), "10.1.0.5")
	require.NoError(t, err)
	assert.Equal(t, ep.ID, again.ID, "a restart reuses both")
	moved, err := ensureNetwork(ctx, h, netip.MustParsePrefix("10.244.7.0/24"), "10.1.0.5")
	require.NoError(t, err)
	assert.Equal(t, "10.244.7.2", moved.IP, "another subnet replaces the network")
	nets, err := h.HNSNetworks(ctx)
	require.NoError(t, err)
	require.Len(t, nets, 1)
	assert.Equal(t, host.HNSNetwork{ID: nets[0].ID, Name: "Calico", Type: "Overlay", ManagementIP: "10.1.0.5", Subnets: []string{"10.244.7.0/24"}}, nets[0])

	cfg := config{node: "win-1", binDir: `C:\opt\cni\bin`, netDir: `C:\etc\cni\net.d`, conflist: "10-calico.conflist", vni: "4096"}
	require.NoError(t, installCNI(&simhost.Paths{Host: h}, cfg, netip.MustParsePrefix("10.244.7.0/24")))
	for _, p := range []string{`C:\opt\cni\bin\calico.exe`, `C:\opt\cni\bin\calico-ipam.exe`} {
		lp, err := h.LocalPath(p)
		require.NoError(t, err)
		assert.FileExists(t, lp)
	}
	lp, err := h.LocalPath(`C:\etc\cni\net.d\10-calico.conflist`)
	require.NoError(t, err)
	b, err := os.ReadFile(lp)
	require.NoError(t, err)
	var conf map[string]any
	require.NoError(t, json.Unmarshal(b, &conf))
	assert.Equal(t, "Calico", conf["name"])
}
