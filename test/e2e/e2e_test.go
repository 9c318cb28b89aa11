//go:build linux

// Package e2e runs the stock playbooks end to end: wsu (the real binary)
// over a real OpenSSH sshd against simulated Windows hosts whose services
// are stand-in binaries, and a real kube-apiserver with the controllers it
// lacks played by test/kubetest. See test/harness.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/playbooks"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/test/payloadtest"
	"github.com/wsu-project/wsu/test/standin/metadata"
)

// wsuBin is built once for every test of the package.
var wsuBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wsu-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	wsuBin = filepath.Join(dir, "wsu")
	if err := harness.BuildWSU(context.Background(), wsuBin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func start(t *testing.T, opts harness.Options) *harness.Env {
	t.Helper()
	opts.WSU = wsuBin
	opts.Logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	env, err := harness.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range env.Hosts {
				logs, _ := filepath.Glob(filepath.Join(h.Root, "logs", "*.log"))
				for _, l := range logs {
					b, _ := os.ReadFile(l)
					t.Logf("%s %s:\n%s", h.Name, filepath.Base(l), tail(string(b), 40))
				}
			}
		}
		if err := env.Close(); err != nil {
			t.Errorf("harness close: %v", err)
		}
	})
	return env
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func run(t *testing.T, env *harness.Env, onEvent func(harness.Event), args ...string) *harness.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := env.RunJSON(ctx, onEvent, args...)
	require.NoError(t, err)
	return r
}

func requireSuccess(t *testing.T, r *harness.Result) {
	t.Helper()
	require.Equalf(t, 0, r.ExitCode, "wsu %s failed:\n%s\nstderr:\n%s\nlast events:\n%s", strings.Join(r.Args, " "), r.Failures(), r.Stderr, tail(r.Stdout, 12))
}

// wantServices are the reference's services, in the form join creates them.
// apiServer is the URL nodes use (cluster-info's).
func wantServices(h *harness.Host, apiServer string) map[string]host.ServiceConfig {
	return map[string]host.ServiceConfig{
		"containerd": {BinaryPath: `C:\k\containerd\containerd.exe`,
			Args: []string{"--config", `C:\k\containerd\containerd_conf.toml`, "--log-file", `C:\var\log\containerd\containerd.log`, "--run-service", "--log-level", "info"}},
		"kubelet": {BinaryPath: `C:\k\kube-log-runner.exe`, Dependencies: []string{"containerd"},
			Args: []string{`-log-file=C:\var\log\kubelet\kubelet.log`, `C:\k\kubelet.exe`, `--config=C:\k\kubelet.conf`,
				`--bootstrap-kubeconfig=C:\k\bootstrap-kubeconfig`, `--kubeconfig=C:\k\kubeconfig`, `--cert-dir=c:\var\lib\kubelet\pki\`,
				"--windows-service", "--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS", // kubeadm: no OpenShift label
				"--v=2", "--hostname-override=" + h.NodeName, "--node-ip=" + h.IPv4}},
		"hybrid-overlay-node": {BinaryPath: `C:\k\hybrid-overlay-node.exe`, Dependencies: []string{"kubelet"},
			Args: []string{"--node", h.NodeName, `--bootstrap-kubeconfig=C:\k\kubeconfig`, `--cert-dir=C:\k\cni\config`, "--cert-duration=24h",
				"--windows-service", "--logfile", `C:\var\log\hybrid-overlay\hybrid-overlay.log`, "--k8s-apiserver=" + apiServer, "--k8s-cacert", `C:\k\bootstrap-ca.crt`}},
		"kube-proxy": {BinaryPath: `C:\k\kube-log-runner.exe`, Dependencies: []string{"hybrid-overlay-node"},
			Args: []string{`-log-file=C:\var\log\kube-proxy\kube-proxy.log`, `C:\k\kube-proxy.exe`, "--config", `C:\k\kube-proxy.conf`, "--windows-service"}},
		"csi-proxy": {BinaryPath: `C:\k\csi-proxy.exe`,
			Args: []string{`-log_file=C:\var\log\csi-proxy\csi-proxy.log`, "-logtostderr=false", "-windows-service", "--v=2"}},
	}
}

// serviceCIDR is the test cluster's primary service network.
func serviceCIDR(t *testing.T, env *harness.Env) string {
	t.Helper()
	sc, err := env.Cluster.Client.NetworkingV1().ServiceCIDRs().Get(context.Background(), "kubernetes", metav1.GetOptions{})
	require.NoError(t, err)
	return sc.Spec.CIDRs[0]
}

// clusterDNS is the .10 address of the test cluster's service network.
func clusterDNS(t *testing.T, env *harness.Env) string {
	t.Helper()
	p := netip.MustParsePrefix(serviceCIDR(t, env)).Masked()
	a := p.Addr()
	for range 10 {
		a = a.Next()
	}
	return a.String()
}

// checkJoined asserts what a join leaves on the host and in the cluster.
func checkJoined(t *testing.T, env *harness.Env, h *harness.Host) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		for name, want := range wantServices(h, env.Cluster.Config.Host) {
			info, err := s.QueryService(ctx, name)
			require.NoError(t, err)
			require.Truef(t, info.Exists, "service %s missing", name)
			assert.Equalf(t, host.ServiceRunning, info.State, "service %s state", name)
			assert.Equalf(t, want.BinaryPath, info.Config.BinaryPath, "service %s binary", name)
			assert.Equalf(t, want.Args, info.Config.Args, "service %s arguments", name)
			assert.ElementsMatchf(t, want.Dependencies, info.Config.Dependencies, "service %s dependencies", name)
			assert.Equalf(t, host.StartAutomatic, info.Config.StartType, "service %s start mode", name)
		}
		nets, err := s.HNSNetworks(ctx)
		require.NoError(t, err)
		var names []string
		for _, n := range nets {
			names = append(names, n.Name)
		}
		assert.ElementsMatch(t, []string{"BaseOVNKubernetesHybridOverlayNetwork", "OVNKubernetesHybridOverlayNetwork"}, names)
		// The service network and DNS address are the cluster's, read by
		// k8s_cluster_network (the test cluster has no DNS Service: .10).
		conf, err := s.ReadFile(ctx, `C:\k\kubelet.conf`, 1<<20)
		require.NoError(t, err)
		// kubeadm: the cluster's kube-system/kubelet-config made fit for
		// Windows (k8s_kubelet_config), not WMCO's template.
		assert.Contains(t, string(conf), "clusterDNS:\n- "+clusterDNS(t, env)+"\n", "kubelet clusterDNS from the cluster")
		assert.Contains(t, string(conf), "cgroupsPerQOS: false\n", "Windows has no cgroups")
		assert.Contains(t, string(conf), "clientCAFile: C:\\k\\kubelet-ca.crt\n", "wsu's kubelet CA")
		assert.NotContains(t, string(conf), "registerWithTaints", "no OpenShift taint on kubeadm")
		ctrd, err := s.ReadFile(ctx, `C:\k\containerd\containerd_conf.toml`, 1<<20)
		require.NoError(t, err)
		assert.Contains(t, string(ctrd), `image_pull_progress_timeout = "30m0s"`, "WMCO's pull progress timeout")
		proxyLog, err := s.Stat(ctx, `C:\var\log\kube-proxy\kube-proxy.log`)
		require.NoError(t, err)
		assert.True(t, proxyLog.Exists, "kube-proxy logs to its file through kube-log-runner")
		cni, err := s.ReadFile(ctx, `C:\k\cni\config\cni.conf`, 1<<20)
		require.NoError(t, err)
		assert.Contains(t, string(cni), `"Exceptions": ["`+serviceCIDR(t, env)+`"]`, "CNI NAT exception for the cluster's service network")
		// The cluster reaches the kubelet and the exporter through the
		// firewall, as WMCO opens them.
		for name, port := range map[string]string{"wsu-kubelet": "10250", "wsu-windows-exporter": "9182"} {
			r, err := s.FirewallRule(ctx, name)
			require.NoError(t, err)
			assert.Truef(t, r.Exists && r.Enabled, "firewall rule %s", name)
			assert.Equalf(t, "in allow tcp "+port+" (domain, private, public), enabled", r.String(), "firewall rule %s", name)
			assert.Equalf(t, "wsu", r.Group, "firewall rule %s carries wsu's group (remove deletes it)", name)
		}
		for _, p := range []string{`C:\k\kubelet.conf`, `C:\k\kube-proxy.conf`, `C:\k\cni\config\cni.conf`, `C:\k\kubeconfig`,
			`C:\k\bootstrap-ca.crt`, `C:\k\cni\config\ovnkube-client-current.pem`} {
			fi, err := s.Stat(ctx, p)
			require.NoError(t, err)
			assert.Truef(t, fi.Exists, "%s missing", p)
		}
		// The bootstrap credential goes once the kubelet has its own.
		fi, err := s.Stat(ctx, `C:\k\bootstrap-kubeconfig`)
		require.NoError(t, err)
		assert.False(t, fi.Exists, "the bootstrap kubeconfig is removed once the kubelet has its client certificate")
		return nil
	}))

	node, err := env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
	require.NoError(t, err, "the Node the kubelet stand-in registers")
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	assert.True(t, ready, "Node Ready")
	assert.NotContains(t, node.Labels, "node.openshift.io/os_id", "OpenShift's label: not on a kubeadm cluster")
	assert.NotContains(t, node.Spec.Taints, corev1.Taint{Key: "os", Value: "Windows", Effect: corev1.TaintEffectNoSchedule}, "no OpenShift taint on a kubeadm cluster")
	role, ok := node.Labels["node-role.kubernetes.io/worker"]
	assert.True(t, ok && role == "", "worker role label set through the API, as WMCO does")
	assert.NotContains(t, node.Labels, "windowsmachineconfig.openshift.io/byoh", "the BYOH label is OpenShift's: not on a kubeadm cluster")
	assert.Equal(t, env.Manifest.Version, node.Annotations["wsu.dev/version"], "version annotation (kubeadm: wsu's name)")
	assert.NotContains(t, node.Annotations, "windowsmachineconfig.openshift.io/version", "OpenShift's annotation: not on a kubeadm cluster")

	// Both of the node's CSRs were approved, by wsu, after passing its rules.
	csrs, err := env.Cluster.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	approved := map[string]bool{}
	ovnIdentity := 0
	for _, c := range csrs.Items {
		if c.Spec.SignerName == certificatesv1.KubeAPIServerClientSignerName && c.Spec.Username == "system:node:"+h.NodeName {
			// hybrid-overlay-node's own identity, approved by the cluster's
			// OVN-Kubernetes identity approver (the test bed's stand-in).
			ovnIdentity++
			if assert.NotEmpty(t, c.Status.Conditions) {
				assert.Equal(t, kubetest.OVNIdentityApprovalReason, c.Status.Conditions[0].Reason, "hybrid-overlay identity approved by the OVN-K approver")
			}
			continue
		}
		if !strings.Contains(string(c.Spec.Username), h.NodeName) && c.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName {
			continue
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue {
				approved[c.Spec.SignerName] = true
				assert.Equal(t, kube.ApprovalReason, cond.Reason, "approved by wsu")
			}
		}
	}
	assert.True(t, approved[certificatesv1.KubeAPIServerClientKubeletSignerName], "client CSR approved")
	assert.True(t, approved[certificatesv1.KubeletServingSignerName], "serving CSR approved")
	assert.Equal(t, 1, ovnIdentity, "hybrid-overlay-node asked once for its own identity, with the kubelet's credentials")

	checkExporter(t, env, h)
}

// siteExporter is the description of the windows_exporter a test installs
// as the site's own, before wsu came.
const siteExporter = "Exports Windows metrics to Prometheus"

// checkExporter: windows_exporter runs as wsu's service (or the site's own
// is left as it was), and the windows-exporter Service is published, as
// WMCO publishes it.
func checkExporter(t *testing.T, env *harness.Env, h *harness.Host) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		info, err := s.QueryService(ctx, "windows_exporter")
		require.NoError(t, err)
		require.True(t, info.Exists)
		if info.Config.Description == siteExporter {
			assert.Equal(t, host.ServiceStopped, info.State, "the site's exporter is left as it was")
			assert.Equal(t, `C:\Program Files\windows_exporter\windows_exporter.exe`, info.Config.BinaryPath)
			return nil
		}
		assert.Equal(t, host.ServiceRunning, info.State, "wsu's exporter runs")
		assert.Equal(t, `C:\k\windows_exporter.exe`, info.Config.BinaryPath)
		assert.Equal(t, []string{"--collectors.enabled", "cpu,logical_disk,net,os,service,system,container,memory,cpu_info",
			"--web.listen-address", ":9182", "--log.level", "info", "--log.file", `C:\var\log\windows_exporter\windows_exporter.log`}, info.Config.Args)
		return nil
	}))
	svc, err := env.Cluster.Client.CoreV1().Services("kube-system").Get(ctx, "windows-exporter", metav1.GetOptions{})
	require.NoError(t, err, "the windows-exporter Service")
	assert.Empty(t, svc.Spec.Selector)
	// The test bed's hosts have loopback addresses, which the API server
	// refuses as endpoints: join publishes the Service without the node and
	// says so (modules/kube TestMetricsEndpoint covers the slices of
	// routable addresses against the same API server).
	_, err = env.Cluster.Client.DiscoveryV1().EndpointSlices("kube-system").Get(ctx, "windows-exporter-"+h.NodeName, metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "no EndpointSlice for the loopback address %s: %v", h.IPv4, err)
}

// TestJoinRerunRemove: join over OpenSSH, a re-run that changes nothing and
// sends nothing, then remove back to the pre-join state.
func TestJoinRerunRemove(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	// The site's own exporter, installed before wsu came: remove deletes
	// only what wsu created, so it must survive (the snapshot holds it).
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		ctx := context.Background()
		exe := `C:\Program Files\windows_exporter\windows_exporter.exe`
		if err := s.MkdirAll(ctx, `C:\Program Files\windows_exporter`, 0o755); err != nil {
			return err
		}
		if err := s.WriteFile(ctx, exe, strings.NewReader("MZ the site's own exporter"), 0o755); err != nil {
			return err
		}
		return s.CreateService(ctx, host.ServiceConfig{Name: "windows_exporter", DisplayName: "windows_exporter",
			Description: siteExporter, BinaryPath: exe, StartType: host.StartManual})
	}))
	before, err := env.Snapshot(h)
	require.NoError(t, err)

	t.Run("plan", func(t *testing.T) {
		// A fresh host: everything is planned, nothing fails (handlers of
		// services the plan creates included), nothing is touched.
		r := run(t, env, nil, "plan", "join", "--detailed-exitcode")
		require.Equalf(t, 2, r.ExitCode, "plan on a fresh host: changes, no errors\n%s\n%s", r.Failures(), tail(r.Stdout, 12))
		recap, _ := r.Recap(h.Name)
		assert.Zero(t, recap.Failed)
		assert.NotZero(t, recap.Changed)
		now, err := env.Snapshot(h)
		require.NoError(t, err)
		assert.Equal(t, before, now, "a plan changes nothing")

		// On AWS the node must register the instance metadata name: a node
		// that cannot reach the metadata service (a closed port on
		// 127.0.0.1 here) fails the plan, saying what to do instead.
		md := metadata.Start(metadata.Options{})
		md.Close()
		aws := run(t, env, nil, "plan", "join", "-var", "platform=AWS", "-var", "instance_metadata_url="+md.URL)
		assert.Equal(t, 1, aws.ExitCode, "plan on AWS without a metadata service\n%s", aws.Failures())
		assert.Contains(t, aws.Stdout+aws.Stderr, "Cannot read the instance metadata")
		assert.Contains(t, aws.Stdout+aws.Stderr, "set node_name instead")
	})

	t.Run("join", func(t *testing.T) {
		// A former installation's CNI state: the first join clears it.
		plantCNILease(t, env, h, "stale")
		r := run(t, env, nil, "apply", "join")
		requireSuccess(t, r)
		recap, ok := r.Recap(h.Name)
		require.True(t, ok)
		assert.Zero(t, recap.Failed+recap.Unreachable)
		assert.NotZero(t, recap.Changed)
		checkJoined(t, env, h)
		assert.Empty(t, cniLeases(t, env, h), `the first join removes C:\var\lib\cni`)
		assert.Empty(t, defenderPolicy(t, env, h), "no Defender (no WinDefend service): no exclusion policy")
	})
	if t.Failed() {
		return
	}

	t.Run("rerun", func(t *testing.T) {
		// A running pod's lease: a re-run of the joined node keeps it.
		plantCNILease(t, env, h, "live")
		r := run(t, env, nil, "apply", "join")
		requireSuccess(t, r)
		assert.Equal(t, []string{"live"}, cniLeases(t, env, h), "a re-run keeps the pods' IPAM state")
		assert.Empty(t, r.Changed(h.Name), "a re-run changes nothing")
		recap, _ := r.Recap(h.Name)
		assert.Zero(t, recap.Changed)
		assert.Zero(t, recap.BytesSent, "a re-run sends no payload bytes")
		plan := run(t, env, nil, "plan", "join", "--detailed-exitcode")
		assert.Equal(t, 0, plan.ExitCode, "plan after join: no changes\n%s", plan.Failures())
		// --tags naming no task's tag would check nothing: an error before
		// any host is touched (engine's TestFactsForOutputsWhenTagsSkipEverything
		// covers outputs of includes whose tasks --tags skips).
		tagged := run(t, env, nil, "plan", "join", "--tags", "no-such-tag")
		assert.Equal(t, 1, tagged.ExitCode, "plan with --tags selecting nothing\n%s", tagged.Failures())
		assert.Contains(t, tagged.Stdout+tagged.Stderr, "Unknown tag", "the error names the problem (a diagnostic event with -o json)")
	})

	t.Run("remove", func(t *testing.T) {
		r := run(t, env, nil, "apply", "remove")
		requireSuccess(t, r)
		_, err := env.Cluster.Client.CoreV1().Nodes().Get(context.Background(), h.NodeName, metav1.GetOptions{})
		assert.Truef(t, apierrors.IsNotFound(err), "Node still there after remove: %v", err)
		_, err = env.Cluster.Client.DiscoveryV1().EndpointSlices("kube-system").Get(context.Background(), "windows-exporter-"+h.NodeName, metav1.GetOptions{})
		assert.Truef(t, apierrors.IsNotFound(err), "the node's exporter endpoint is gone after remove: %v", err)
		after, err := env.Snapshot(h)
		require.NoError(t, err)
		assert.Equal(t, before, after, "remove returns the host to its pre-join state")
		assert.Contains(t, r.Stdout, "Service not managed by wsu", "remove says why it kept windows_exporter")
		require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
			procs, err := s.ListProcesses(context.Background())
			for _, p := range procs {
				t.Errorf("process left running after remove: %+v", p)
			}
			return err
		}))
	})
}

// defenderKey is where Group Policy keeps Windows Defender's exclusions.
const defenderKey = `HKLM\SOFTWARE\Policies\Microsoft\Windows Defender\`

// defenderPolicy is the Defender exclusion policy values join writes that
// exist on h, as "<key under defenderKey>\<name>" → "<type> <data>".
func defenderPolicy(t *testing.T, env *harness.Env, h *harness.Host) map[string]string {
	t.Helper()
	got := map[string]string{}
	values := map[string][]string{
		`Exclusions`:           {"Exclusions_Processes", "Exclusions_Paths"},
		`Exclusions\Processes`: {`C:\k\containerd\containerd.exe`},
		`Exclusions\Paths`:     {`C:\ProgramData\containerd`},
	}
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		for key, names := range values {
			for _, n := range names {
				v, err := s.RegistryGet(context.Background(), defenderKey+key, n)
				if err != nil {
					return err
				}
				if v.Exists {
					got[key+`\`+n] = fmt.Sprintf("%s %s", v.Type, regData(v))
				}
			}
		}
		return nil
	}))
	return got
}

func regData(v host.RegistryValue) string {
	if v.Type == host.RegDWORD || v.Type == host.RegQWORD {
		return fmt.Sprint(v.Integer)
	}
	return v.String
}

// cniLeaseDir is where host-local IPAM keeps the overlay network's leases.
const cniLeaseDir = `C:\var\lib\cni\networks\OVNKubernetesHybridOverlayNetwork`

// plantCNILease writes a host-local lease file named name.
func plantCNILease(t *testing.T, env *harness.Env, h *harness.Host, name string) {
	t.Helper()
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		ctx := context.Background()
		if err := s.MkdirAll(ctx, cniLeaseDir, 0o755); err != nil {
			return err
		}
		return s.WriteFile(ctx, cniLeaseDir+`\`+name, strings.NewReader("pod container id\r\neth0"), 0o644)
	}))
}

// cniLeases lists the lease files there.
func cniLeases(t *testing.T, env *harness.Env, h *harness.Host) []string {
	t.Helper()
	var names []string
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		lp, err := s.LocalPath(cniLeaseDir)
		if err != nil {
			return err
		}
		entries, err := os.ReadDir(lp)
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}))
	return names
}

// TestUpgradeOneHostAtATime: three joined hosts (and one that cannot be
// reached, which fails alone); one payload component changes; the plan
// shows exactly that file and the restart it causes; upgrade goes one host
// at a time.
func TestUpgradeOneHostAtATime(t *testing.T) {
	env := start(t, harness.Options{Hosts: 3, Unreachable: []string{"win-gone"}})

	r := run(t, env, nil, "apply", "join")
	assert.NotEqual(t, 0, r.ExitCode, "a host failed: the exit code says so")
	gone, ok := r.Recap("win-gone")
	require.True(t, ok, "the unreachable host is in the recap")
	assert.Equal(t, 1, gone.Unreachable)
	for _, h := range env.Hosts {
		recap, ok := r.Recap(h.Name)
		require.True(t, ok)
		require.Zerof(t, recap.Failed+recap.Unreachable, "%s:\n%s", h.Name, r.Failures())
		checkJoined(t, env, h)
	}
	if t.Failed() {
		return
	}

	// A new kube-proxy build.
	m, err := env.BumpPayload(context.Background(), "kube-proxy", "v1.37.2-standin")
	require.NoError(t, err)
	limit := []string{"--limit", "windows:!win-gone"}

	plan := run(t, env, nil, append([]string{"plan", "join"}, limit...)...)
	for _, h := range env.Hosts {
		changed := plan.Changed(h.Name)
		assert.Lenf(t, changed, 2, "%s: the new file and the annotation: %v", h.Name, changed)
		var subjects []string
		for _, ev := range plan.Tasks(h.Name) {
			if ev.Status == "changed" && ev.Change != nil {
				subjects = append(subjects, ev.Change.Subject)
				if ev.Module == "win_copy" {
					assert.Contains(t, string(ev.Raw), "kube-proxy", "the plan says the service restarts")
				}
			}
		}
		assert.Contains(t, subjects, `C:\k\kube-proxy.exe`)
	}

	var order []string
	up := run(t, env, func(ev harness.Event) {
		if ev.Type == "task_result" && ev.Status != "skipped" && (ev.Task == "cordon" || ev.Task == "uncordon") {
			order = append(order, ev.Task+" "+ev.Host)
		}
	}, append([]string{"apply", "upgrade"}, limit...)...)
	requireSuccess(t, up)
	var want []string
	for _, h := range env.Hosts {
		want = append(want, "cordon "+h.Name, "uncordon "+h.Name)
	}
	assert.Equal(t, want, order, "one host at a time: each is uncordoned before the next is cordoned")
	for _, h := range env.Hosts {
		node, err := env.Cluster.Client.CoreV1().Nodes().Get(context.Background(), h.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, m.Version, node.Annotations["wsu.dev/version"])
		assert.False(t, node.Spec.Unschedulable)
		checkJoined(t, env, h)
	}

	// Every node is at the payload's version: a second upgrade takes none
	// out of service and changes nothing.
	again := run(t, env, nil, append([]string{"apply", "upgrade"}, limit...)...)
	requireSuccess(t, again)
	for _, h := range env.Hosts {
		assert.Emptyf(t, again.Changed(h.Name), "%s", h.Name)
		for _, ev := range again.Tasks(h.Name) {
			if ev.Task == "cordon" || ev.Task == "drain" || ev.Task == "uncordon" {
				assert.Equalf(t, "skipped", ev.Status, "%s %s", h.Name, ev.Task)
			}
		}
	}
}

// TestUpgradeKubeletAndContainerd: an upgrade that brings a new kubelet and
// a new containerd. Both are services others depend on (kube-proxy needs
// hybrid-overlay-node, which needs the kubelet, which needs containerd),
// and the SCM, as the simulation, refuses to stop one while a dependent
// runs. The plan names every service each copy restarts, dependents
// included, in stop order; the upgrade stops them deepest first, replaces
// the binaries, starts them again in dependency order, and the node comes
// back Ready at the new version with csi-proxy (no dependency) untouched.
func TestUpgradeKubeletAndContainerd(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	requireSuccess(t, run(t, env, nil, "apply", "join"))
	checkJoined(t, env, h)
	if t.Failed() {
		return
	}
	before := servicePIDs(t, env, h)

	_, err := env.BumpPayload(context.Background(), payloadtest.Kubelet, "v1.31.5-standin")
	require.NoError(t, err)
	m, err := env.BumpPayload(context.Background(), payloadtest.Containerd, "v1.7.25-standin")
	require.NoError(t, err)

	plan := run(t, env, nil, "plan", "upgrade")
	requireSuccess(t, plan)
	restarts := map[string][]string{}
	for _, ev := range plan.Tasks(h.Name) {
		if ev.Module == "win_copy" && ev.Status == "changed" && ev.Change != nil {
			restarts[ev.Change.Subject] = ev.Change.Restarts
		}
	}
	assert.Equal(t, map[string][]string{
		`C:\k\kubelet.exe`:               {"kube-proxy", "hybrid-overlay-node", "kubelet"},
		`C:\k\containerd\containerd.exe`: {"kube-proxy", "hybrid-overlay-node", "kubelet", "containerd"},
	}, restarts, "each copy's plan names every service it restarts, dependents first")

	up := run(t, env, nil, "apply", "upgrade")
	requireSuccess(t, up)
	checkJoined(t, env, h)
	assert.Equal(t, m.Version, env.Manifest.Version)
	after := servicePIDs(t, env, h)
	for _, s := range []string{"containerd", "kubelet", "hybrid-overlay-node", "kube-proxy"} {
		assert.NotEqualf(t, before[s], after[s], "%s was restarted", s)
	}
	assert.Equal(t, before["csi-proxy"], after["csi-proxy"], "csi-proxy depends on neither: left running")

	again := run(t, env, nil, "apply", "upgrade")
	requireSuccess(t, again)
	assert.Empty(t, again.Changed(h.Name), "a second upgrade changes nothing")
}

// servicePIDs is the pid of each of the node's services.
func servicePIDs(t *testing.T, env *harness.Env, h *harness.Host) map[string]int {
	t.Helper()
	pids := map[string]int{}
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		for name := range wantServices(h, env.Cluster.Config.Host) {
			info, err := s.QueryService(context.Background(), name)
			if err != nil {
				return err
			}
			pids[name] = info.PID
		}
		return nil
	}))
	return pids
}

// TestConnectionCutDuringHybridOverlay: starting hybrid-overlay drops the
// management connection (cut here by a fault proxy); wsu reconnects and
// the join converges.
func TestConnectionCutDuringHybridOverlay(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1, FaultProxy: true})
	h := env.Hosts[0]
	cut := 0
	r := run(t, env, func(ev harness.Event) {
		if ev.Type == "task_result" && ev.Task == "hybrid-overlay service" && cut == 0 {
			cut = env.Proxy.Cut()
		}
	}, "apply", "join")
	requireSuccess(t, r)
	require.Positive(t, cut, "the connection was cut")
	checkJoined(t, env, h)
	again := run(t, env, nil, "apply", "join")
	requireSuccess(t, again)
	assert.Empty(t, again.Changed(h.Name))
}

// TestLogRotationFlags: join's log rotation variables reach kube-log-runner,
// before the binary it runs, for both services it wraps (WMCO's
// SERVICES_LOG_FILE_* settings).
func TestLogRotationFlags(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	requireSuccess(t, run(t, env, nil, "apply", "join", "-var", "log_file_size=100M", "-var", "log_file_age=168h", "-var", "log_flush_interval=5s"))
	flags := []string{"-log-file-size=100M", "-log-file-age=168h", "-flush-interval=5s"}
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		for svc, binary := range map[string]string{"kubelet": `C:\k\kubelet.exe`, "kube-proxy": `C:\k\kube-proxy.exe`} {
			info, err := s.QueryService(context.Background(), svc)
			require.NoError(t, err)
			assert.Equalf(t, `C:\k\kube-log-runner.exe`, info.Config.BinaryPath, "%s runs under kube-log-runner", svc)
			args := info.Config.Args
			require.GreaterOrEqualf(t, len(args), 5, "%s: %v", svc, args)
			assert.Equalf(t, flags, args[1:4], "%s: the runner's flags, after -log-file", svc)
			assert.Equalf(t, binary, args[4], "%s: then the binary it runs", svc)
		}
		return nil
	}))
}

// TestPreflightRefusals: each problem the preflight finds fails the join
// before anything on the host changes, with its own located message; once
// the problem is gone the same host joins.
func TestPreflightRefusals(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	ctx := context.Background()
	tests := []struct {
		name      string
		setup     func(s *sim.Host) error
		undo      func(s *sim.Host) error
		vars      []string
		want      string
		wantAttrs string
	}{
		{name: "node name", vars: []string{"-var", "node_name=Win_01"}, want: "Invalid node name", wantAttrs: "node_name"},
		{name: "old Windows", setup: func(s *sim.Host) error { return s.SetBuild("14393") }, undo: func(s *sim.Host) error { return s.SetBuild("") },
			want: "Windows build not supported", wantAttrs: "min_build"},
		{name: "clock", setup: func(s *sim.Host) error { return s.SetClockOffset(-3 * time.Minute) }, undo: func(s *sim.Host) error { return s.SetClockOffset(0) },
			want: "Host clock off the API server's", wantAttrs: "max_clock_skew"},
		{name: "disk", setup: func(s *sim.Host) error { return s.SetDiskFree(1 << 20) }, undo: func(s *sim.Host) error { return s.SetDiskFree(1 << 62) },
			want: "Not enough free disk space", wantAttrs: "disk_path"},
		{name: "foreign kubelet", setup: func(s *sim.Host) error {
			return s.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\kubelet\kubelet.exe`, Description: "kubelet", StartType: host.StartManual})
		}, undo: func(s *sim.Host) error { return s.DeleteService(ctx, "kubelet", time.Minute) },
			want: "Service kubelet is not wsu's", wantAttrs: "services"},
		{name: "API server unreachable", vars: []string{"-var", "api_server=https://127.0.0.1:1"},
			want: "API server unreachable from the node", wantAttrs: "api_server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				require.NoError(t, env.WithSim(h, tt.setup))
			}
			before, err := env.Snapshot(h)
			require.NoError(t, err)
			r, err := env.Run(ctx, io.Discard, append([]string{"apply", "join"}, tt.vars...)...)
			require.NoError(t, err)
			assert.NotEqual(t, 0, r.ExitCode, "the join is refused")
			assert.Contains(t, r.Stdout+r.Stderr, tt.want)
			assert.Contains(t, r.Stdout+r.Stderr, "preflight.hcl", "the message points at the preflight task")
			assert.Contains(t, r.Stdout+r.Stderr, fmt.Sprintf("preflight.hcl line %d", argumentLine(t, "preflight.hcl", tt.wantAttrs)), "and at the argument %s", tt.wantAttrs)
			after, err := env.Snapshot(h)
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing on the host changed")
			if tt.undo != nil {
				require.NoError(t, env.WithSim(h, tt.undo))
			}
		})
	}
	// With every problem gone, plan shows the preflight's findings.
	r, err := env.Run(ctx, io.Discard, "plan", "join")
	require.NoError(t, err)
	assert.Contains(t, r.Stdout, "6 checks passed", "plan shows the preflight results:\n%s", tail(r.Stdout, 40))
}

// argumentLine is the line of a stock playbook where the argument name is
// set (name = ...), for checking where a diagnostic points.
func argumentLine(t *testing.T, file, name string) int {
	t.Helper()
	src, err := fs.ReadFile(playbooks.FS, file)
	require.NoError(t, err)
	for i, line := range strings.Split(string(src), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name && f[1] == "=" {
			return i + 1
		}
	}
	t.Fatalf("%s sets no argument %s", file, name)
	return 0
}
