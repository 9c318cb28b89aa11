package windows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/agenttest"
	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// withoutUnchangedPlanRow are the modules that have no unchanged plan to
// measure, and why.
var withoutUnchangedPlanRow = map[string]string{
	"win_reboot":            "a reboot is always a change when asked for; its cost is the reboot (TestReboot*)",
	"win_instance_metadata": "reads the cloud's metadata service over HTTP from the node: one http.get, measured in its own tests",
}

// TestUnchangedPlanRPCs pins what planning a task that has nothing to do
// costs through the agent, op by op: a re-run of a playbook is mostly such
// tasks, and every RPC is a round trip to the node. The goal is at most
// one; rows with more say why.
func TestUnchangedPlanRPCs(t *testing.T) {
	tests := []struct {
		module modules.Module
		name   string
		setup  func(t *testing.T, h *sim.Host)
		attrs  func(t *testing.T, h *sim.Host) map[string]cty.Value
		want   map[string]int64
	}{
		{
			module: Directory{}, name: "present",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(`C:\k\etc`)}
			},
			want: map[string]int64{"fs.stat": 1},
		},
		{
			// A listing of one entry answers missing, empty and not empty
			// at once: no stat first.
			module: Directory{}, name: "absent only if empty, not empty",
			setup: func(t *testing.T, h *sim.Host) { writeFile(t, h, `C:\var\log\other.log`, "not ours") },
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(`C:\var`), "state": cty.StringVal("absent"), "only_if_empty": cty.True}
			},
			want: map[string]int64{"fs.list": 1},
		},
		{
			module: Directory{}, name: "absent only if empty, missing",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(`C:\Temp`), "state": cty.StringVal("absent"), "only_if_empty": cty.True}
			},
			want: map[string]int64{"fs.list": 1},
		},
		{
			module: File{}, name: "same content",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(`C:\k\kubelet.conf`), "content": cty.StringVal("hello")}
			},
			want: map[string]int64{"fs.sha256": 1},
		},
		{
			module: File{}, name: "absent",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(`C:\k\old.conf`), "state": cty.StringVal("absent")}
			},
			want: map[string]int64{"fs.sha256": 1},
		},
		{
			module: Copy{}, name: "same file",
			attrs: func(t *testing.T, _ *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"src": cty.StringVal(localSrc(t, "hello")), "dest": cty.StringVal(kubeProxy)}
			},
			want: map[string]int64{"fs.sha256": 1},
		},
		{
			module: Copy{}, name: "same file of a running service",
			setup: func(t *testing.T, h *sim.Host) { runningService(t, h, "kube-proxy", kubeProxy) },
			attrs: func(t *testing.T, h *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"src": cty.StringVal(localSrc(t, "MZ stand-in for kube-proxy")), "dest": cty.StringVal(kubeProxy), "service": cty.StringVal("kube-proxy")}
			},
			want: map[string]int64{"fs.sha256": 1},
		},
		{
			module: Env{}, name: "set",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal("KUBECONFIG"), "value": cty.StringVal(`C:\k\config`)}
			},
			want: map[string]int64{"env.get": 1},
		},
		{
			module: Path{}, name: "present",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"entry": cty.StringVal(`C:\k`)}
			},
			want: map[string]int64{"env.get": 1},
		},
		{
			module: Registry{}, name: "dword",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"key": cty.StringVal(`HKLM\SYSTEM\CurrentControlSet\Services\hns\State`), "name": cty.StringVal("EnableCompartmentNamespace"), "type": cty.StringVal("REG_DWORD"), "value": cty.NumberIntVal(1)}
			},
			want: map[string]int64{"reg.get": 1},
		},
		{
			module: Service{}, name: "running",
			setup: func(t *testing.T, h *sim.Host) { writeFile(t, h, kubeletExe, "MZ kubelet") },
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe), "args": strs("--windows-service")}
			},
			want: map[string]int64{"svc.query": 1},
		},
		{
			// The query reports the failure actions too (on Windows from
			// the SCM): no registry reads.
			module: Service{}, name: "running with recovery",
			setup: func(t *testing.T, h *sim.Host) { writeFile(t, h, kubeletExe, "MZ kubelet") },
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal("kubelet"), "path": cty.StringVal(kubeletExe), "recovery": cty.ObjectVal(map[string]cty.Value{"restart_delays": nums(5, 10)})}
			},
			want: map[string]int64{"svc.query": 1},
		},
		{
			module: Service{}, name: "absent",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal("kubelet"), "state": cty.StringVal("absent")}
			},
			want: map[string]int64{"svc.query": 1},
		},
		{
			module: HNSNetwork{}, name: "read",
			setup: func(t *testing.T, h *sim.Host) {
				require.NoError(t, h.AddHNSNetwork(host.HNSNetwork{Name: overlay, Type: "Overlay", Subnets: []string{"10.132.1.0/24"}}))
			},
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal(overlay)}
			},
			want: map[string]int64{"hns.networks": 1},
		},
		{
			module: HNSEndpoint{}, name: "present",
			setup: func(t *testing.T, h *sim.Host) {
				require.NoError(t, h.AddHNSNetwork(host.HNSNetwork{Name: overlay, Type: "Overlay", Subnets: []string{"10.132.1.0/24"}}))
			},
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal("VIPEndpoint"), "network": cty.StringVal(overlay)}
			},
			want: map[string]int64{"hns.endpoints": 1},
		},
		{
			module: Kill{}, name: "nothing runs",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"image": cty.StringVal("containerd-shim-runhcs-v1")}
			},
			want: map[string]int64{"proc.list": 1},
		},
		{
			module: Wait{}, name: "service already running",
			setup: func(t *testing.T, h *sim.Host) { runningService(t, h, "kubelet", kubeletExe) },
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return waitAttrs(map[string]cty.Value{"service": cty.StringVal("kubelet")})
			},
			want: map[string]int64{"svc.query": 1},
		},
		{
			module: Wait{}, name: "file already there",
			setup: func(t *testing.T, h *sim.Host) { writeFile(t, h, `C:\k\ready`, "") },
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return waitAttrs(map[string]cty.Value{"file": cty.StringVal(`C:\k\ready`)})
			},
			want: map[string]int64{"fs.stat": 1},
		},
		{
			module: Wait{}, name: "network already there",
			setup: func(t *testing.T, h *sim.Host) {
				require.NoError(t, h.AddHNSNetwork(host.HNSNetwork{Name: overlay, Type: "Overlay"}))
			},
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return waitAttrs(map[string]cty.Value{"hns_network": cty.StringVal(overlay)})
			},
			want: map[string]int64{"hns.networks": 1},
		},
		{
			module: Command{}, name: "creates exists",
			setup: func(t *testing.T, h *sim.Host) { writeFile(t, h, `C:\k\done`, "") },
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"argv": strs("true"), "creates": cty.StringVal(`C:\k\done`)}
			},
			want: map[string]int64{"fs.stat": 1},
		},
		{
			module: Stat{}, name: "a file",
			setup: func(t *testing.T, h *sim.Host) { writeFile(t, h, `C:\k\kubeconfig`, "x") },
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"path": cty.StringVal(`C:\k\kubeconfig`)}
			},
			want: map[string]int64{"fs.stat": 1},
		},
		{
			module: ServiceInfo{}, name: "a service",
			setup: func(t *testing.T, h *sim.Host) { runningService(t, h, "kube-proxy", kubeProxy) },
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal("kube-proxy")}
			},
			want: map[string]int64{"svc.query": 1},
		},
		{
			module: FirewallRule{}, name: "the rule as wanted",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal("wsu kubelet"), "localport": cty.StringVal("10250")}
			},
			want: map[string]int64{"fw.rule.get": 1},
		},
		{
			module: OptionalFeature{}, name: "enabled",
			setup: func(t *testing.T, h *sim.Host) {
				require.NoError(t, h.SetOptionalFeature(sim.ContainersFeature, host.FeatureEnabled))
			},
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"name": cty.StringVal("containers")}
			},
			want: map[string]int64{"feature.get": 1},
		},
		{
			module: Certificate{}, name: "bundle installed",
			attrs: func(t *testing.T, _ *sim.Host) map[string]cty.Value {
				ca, _ := newCA(t, "rpc")
				return map[string]cty.Value{"bundle": cty.StringVal(ca)}
			},
			// The store's certificates, then wsu's registry record of what
			// it added (to remove only its own).
			want: map[string]int64{"cert.list": 1, "reg.get": 1},
		},
		{
			module: AuthorizedKey{}, name: "key present",
			attrs: func(t *testing.T, _ *sim.Host) map[string]cty.Value {
				key, _ := testKey(t, "rpc")
				return map[string]cty.Value{"key": cty.StringVal(key)}
			},
			// The file's size bound, its content, and its ACL (sshd ignores
			// an administrators_authorized_keys others may write).
			want: map[string]int64{"fs.stat": 1, "fs.read": 1, "fs.acl.get": 1},
		},
		{
			module: ContainerdMirrors{}, name: "mirrors as wanted",
			attrs: func(*testing.T, *sim.Host) map[string]cty.Value {
				return map[string]cty.Value{"mirrors": mirrorList(mirrorVal("mcr.microsoft.com/oss/kubernetes/pause", true, "mirror.example:5000/windows/oss/kubernetes/pause"))}
			},
			// The wanted hosts.toml's stat and content, then the certs.d
			// directory's stat and listing (hosts.toml files wsu wrote for
			// registries no longer mirrored).
			want: map[string]int64{"fs.list": 1, "fs.stat": 2, "fs.read": 1},
		},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.module.Schema().Name] = true
	}
	for _, m := range Modules(nil) {
		name := m.Schema().Name
		_, exempt := withoutUnchangedPlanRow[name]
		assert.Truef(t, covered[name] || exempt, "module %s has no row in TestUnchangedPlanRPCs (modules/windows/rpc_test.go): add one, or name it in withoutUnchangedPlanRow with the reason", name)
	}
	for _, tt := range tests {
		t.Run(tt.module.Schema().Name+"/"+tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			cfg := cfgFor(t, tt.module, tt.attrs(t, h))
			converge(t, tt.module, h, cfg)

			c := agenttest.Start(t, h, agenttest.Options{}).Client
			resp := tt.module.Plan(ctx, modules.PlanRequest{Config: cfg, Host: c})
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			require.Nil(t, resp.Change, "nothing to do")
			got := c.Counters()
			assert.Equal(t, tt.want, got.RPCsByOp)
			assert.Zero(t, got.BytesSent)
		})
	}
}

// What removing an empty directory with only_if_empty costs through the
// agent: the plan's listing, then Apply's own listing and the remove.
func TestDirectoryOnlyIfEmptyRPCs(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.MkdirAll(ctx, `C:\Temp`, 0o755))
	cfg := cfgFor(t, Directory{}, map[string]cty.Value{"path": cty.StringVal(`C:\Temp`), "state": cty.StringVal("absent"), "only_if_empty": cty.True})
	c := agenttest.Start(t, h, agenttest.Options{}).Client

	pr := Directory{}.Plan(ctx, modules.PlanRequest{Config: cfg, Host: c})
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	require.NotNil(t, pr.Change)
	planned := c.Counters()
	assert.Equal(t, map[string]int64{"fs.list": 1}, planned.RPCsByOp)

	ar := Directory{}.Apply(ctx, modules.ApplyRequest{Config: cfg, Host: c, Change: pr.Change})
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.Equal(t, map[string]int64{"fs.list": 1, "fs.remove": 1}, c.Counters().Sub(planned).RPCsByOp)
}
