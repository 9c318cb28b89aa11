package windows

import (
	"os/exec"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

func TestHNSNetwork(t *testing.T) {
	h := newHost(t)
	m := HNSNetwork{}
	read := cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal(overlay)})

	pr := plan(t, m, h, read)
	requireDiag(t, pr.Diagnostics, read, hcl.DiagError, "HNS network not found", "name")
	// A dry run with changes before it (the ones that start hybrid-overlay)
	// reads the network at apply instead.
	pr = m.Plan(ctx, modules.PlanRequest{Config: read, Host: h, Pending: true})
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	assert.Nil(t, pr.Change)
	assert.False(t, pr.Result.GetAttr("management_ip").IsKnown(), "known after apply")

	require.NoError(t, h.AddHNSNetwork(host.HNSNetwork{Name: overlay, Type: "Overlay", ManagementIP: "10.132.0.5", Subnets: []string{"10.132.1.0/24"}}))
	pr, _ = converge(t, m, h, read)
	assert.Nil(t, pr.Change, "reading never changes anything")
	assert.Equal(t, "10.132.0.5", pr.Result.GetAttr("management_ip").AsString())
	assert.Equal(t, cty.ListVal([]cty.Value{cty.StringVal("10.132.1.0/24")}), pr.Result.GetAttr("subnets"))

	remove := cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal(overlay), "state": cty.StringVal("absent")})
	pr, _ = converge(t, m, h, remove)
	assert.Equal(t, modules.Delete, action(pr.Change))
	nets, err := h.HNSNetworks(ctx)
	require.NoError(t, err)
	assert.Empty(t, nets)
}

func TestHNSEndpoint(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.AddHNSNetwork(host.HNSNetwork{Name: overlay, Type: "Overlay", Subnets: []string{"10.132.1.0/24"}}))
	m := HNSEndpoint{}
	cfg := cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("VIPEndpoint"), "network": cty.StringVal(overlay)})
	pr, ar := converge(t, m, h, cfg)
	assert.Equal(t, modules.Create, action(pr.Change))
	assert.False(t, pr.Result.GetAttr("ip").IsKnown(), "the VIP is known after apply")
	vip := ar.Result.GetAttr("ip").AsString()
	assert.NotEmpty(t, vip)
	// The existing endpoint's IP is what later runs read.
	again := plan(t, m, h, cfg)
	assert.Equal(t, vip, again.Result.GetAttr("ip").AsString())

	gone := cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("VIPEndpoint"), "network": cty.StringVal(overlay), "state": cty.StringVal("absent")})
	pr, _ = converge(t, m, h, gone)
	assert.Equal(t, modules.Delete, action(pr.Change))
}

func TestKill(t *testing.T) {
	h := newHost(t)
	m := Kill{}
	cfg := cfgFor(t, m, map[string]cty.Value{"image": cty.StringVal("containerd-shim-runhcs-v1")})
	pr := plan(t, m, h, cfg)
	assert.Nil(t, pr.Change, "nothing runs: no change")

	// A real process standing in for a leftover shim.
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	_, err := h.AddProcess(host.Process{PID: cmd.Process.Pid, Image: "containerd-shim-runhcs-v1.exe"})
	require.NoError(t, err)
	go func() { _ = cmd.Wait() }()

	pr, ar := converge(t, m, h, cfg)
	assert.Equal(t, modules.Run, action(pr.Change))
	assert.Equal(t, cty.NumberIntVal(1), ar.Result.GetAttr("killed"))

	bad := cfgFor(t, m, map[string]cty.Value{"image": cty.StringVal(`C:\k\x.exe`)})
	requireDiag(t, m.Validate(modules.ValidateRequest{Config: bad}), bad, hcl.DiagError, "Invalid image name", "image")
}
