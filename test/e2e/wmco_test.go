//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules/windows"
	"github.com/wsu-project/wsu/test/harness"
)

// What WMCO leaves on a BYOH host and its Node, as the stand-in fixture
// below writes it (from WMCO's pkg/windows and pkg/services: the service
// commands its services ConfigMap holds, WICD's service, the files under
// C:\k, the Node's labels and annotations).
const (
	wicdService    = "windows-instance-config-daemon"
	wicdBinary     = `C:\k\windows-instance-config-daemon.exe`
	wicdKubeconfig = `C:\k\wicd-kubeconfig`
	// wmcoVersion is the version WMCO recorded: not the payload's.
	wmcoVersion = "10.17.0-wmco"
)

// wmcoStandIn turns a host wsu joined into the host WMCO would have left:
// a stand-in fixture, not WMCO itself. The host is joined first (so its
// kubelet holds real certificates of the test bed and its Node is
// registered and Ready), then every mark of wsu's is replaced by WMCO's:
//
//   - services: the description WMCO gives its services ("OpenShift
//     managed NAME"); the kubelet's command as WMCO's services ConfigMap
//     has it on platform None (--node-labels=node.openshift.io/os_id=Windows,
//     no --hostname-override); windows_exporter's as WMCO runs it (its
//     collectors and --web.config.file, no listen address or log file);
//     containerd's, hybrid-overlay-node's, kube-proxy's and csi-proxy's are
//     the same command lines as wsu's already;
//   - WICD: service windows-instance-config-daemon (`controller
//     --windows-service --log-dir C:\var\log\wicd --kubeconfig
//     C:\k\wicd-kubeconfig --namespace openshift-windows-machine-config-operator`),
//     running, its binary and kubeconfig under C:\k;
//   - firewall: WMCO's rules ContainerLogsPort (TCP 10250) and
//     WindowsExporter (TCP 9182) instead of wsu's;
//   - Node: no wsu.dev/owner or wsu.dev/network; WMCO's version,
//     desired-version, pub-key-hash and username annotations, its byoh
//     label.
//
// Limits: WICD's binary is not a program (the sim records a running
// process for it); the services' recovery settings, the HNS networks, the
// CNI and kubelet configuration files are wsu's own (WMCO writes the same
// paths from the same templates); WMCO's TLS files for the exporter and
// its C:\Temp scripts are not written; the cluster is the kubeadm test bed
// (join's version annotation set to WMCO's name, as on OpenShift), not
// OpenShift.
func wmcoStandIn(t *testing.T, env *harness.Env, h *harness.Host) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		for _, name := range []string{"containerd", "kubelet", "hybrid-overlay-node", "kube-proxy", "csi-proxy", "windows_exporter"} {
			info, err := s.QueryService(ctx, name)
			if err != nil {
				return err
			}
			require.Truef(t, info.Exists, "service %s", name)
			c := info.Config
			c.Description = kube.WMCOServiceMarker + " " + name
			switch name {
			case "kubelet":
				c.Args = []string{`-log-file=C:\var\log\kubelet\kubelet.log`, `C:\k\kubelet.exe`, `--config=C:\k\kubelet.conf`,
					`--bootstrap-kubeconfig=C:\k\bootstrap-kubeconfig`, `--kubeconfig=C:\k\kubeconfig`, `--cert-dir=c:\var\lib\kubelet\pki\`,
					"--windows-service", "--node-labels=node.openshift.io/os_id=Windows", "--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS",
					"--v=2", "--node-ip=" + h.IPv4}
			case "windows_exporter":
				c.Args = []string{"--collectors.enabled", "cpu,logical_disk,net,os,service,system,container,memory,cpu_info",
					"--web.config.file", `C:\k\tls\windows-exporter-webconfig.yaml`}
			}
			if err := s.UpdateService(ctx, c); err != nil {
				return err
			}
		}
		if err := s.WriteFile(ctx, wicdBinary, strings.NewReader("MZ WICD stand-in"), 0o755); err != nil {
			return err
		}
		if err := s.WriteFile(ctx, wicdKubeconfig, strings.NewReader("apiVersion: v1\nkind: Config\n# WICD's ServiceAccount token\n"), 0o600); err != nil {
			return err
		}
		if err := s.CreateService(ctx, host.ServiceConfig{Name: wicdService, BinaryPath: wicdBinary, StartType: host.StartAutomatic,
			Description: kube.WMCOServiceMarker + " " + wicdService,
			Args: []string{"controller", "--windows-service", "--log-dir", `C:\var\log\wicd`, "--kubeconfig", wicdKubeconfig,
				"--namespace", "openshift-windows-machine-config-operator"}}); err != nil {
			return err
		}
		if err := s.StartService(ctx, wicdService); err != nil {
			return err
		}
		for name, port := range map[string]string{"ContainerLogsPort": "10250", "WindowsExporter": "9182"} {
			if err := s.SetFirewallRule(ctx, host.FirewallRule{Name: name, Direction: host.FirewallIn, Action: host.FirewallAllow,
				Protocol: host.FirewallTCP, LocalPorts: port, Enabled: true}); err != nil {
				return err
			}
		}
		for _, name := range []string{"wsu-kubelet", "wsu-windows-exporter"} {
			if err := s.DeleteFirewallRule(ctx, name); err != nil {
				return err
			}
		}
		return nil
	}))
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": map[string]any{kube.WMCOPrefix + "byoh": "true"},
		"annotations": map[string]any{
			kube.OwnerAnnotation: nil, "wsu.dev/network": nil,
			kube.WMCOVersionAnnotation:          wmcoVersion,
			kube.WMCOPrefix + "desired-version": wmcoVersion,
			kube.WMCOPrefix + "pub-key-hash":    "4d2c1f9e0b7a...",
			kube.WMCOPrefix + "username":        "c2VhbGVkIGJ5IFdNQ08=",
		}}})
	require.NoError(t, err)
	_, err = env.Cluster.Client.CoreV1().Nodes().Patch(ctx, h.NodeName, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// kubeletClientCSRs counts the node's kubelet client CSRs: a re-join
// (a new bootstrap) would add one.
func kubeletClientCSRs(t *testing.T, env *harness.Env) int {
	t.Helper()
	csrs, err := env.Cluster.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	n := 0
	for _, c := range csrs.Items {
		if c.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName {
			n++
		}
	}
	return n
}

// TestAdoptWMCOHost: a host WMCO configured (the stand-in fixture above),
// its Node registered and a pod on it, moves to wsu without being removed
// and joined again: the plan says it adopts WMCO's services and lists each
// difference, apply converges the host and the Node, the Node keeps its
// UID and its pod, no new kubelet certificate is requested, and a re-plan
// is empty.
func TestAdoptWMCOHost(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	ctx := context.Background()
	nodes := env.Cluster.Client.CoreV1().Nodes()
	// On OpenShift join keeps its version in WMCO's annotation.
	join := func(mode string, extra ...string) []string {
		return append([]string{mode, "join", "-var", "version_annotation=" + kube.WMCOVersionAnnotation}, extra...)
	}
	requireSuccess(t, run(t, env, nil, join("apply")...))
	wmcoStandIn(t, env, h)

	node, err := nodes.Get(ctx, h.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, env.Cluster.EnsureNamespace(ctx, "workload"))
	pod, err := env.Cluster.Client.CoreV1().Pods("workload").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "workload"},
		Spec: corev1.PodSpec{NodeName: h.NodeName, Containers: []corev1.Container{{Name: "app", Image: "mcr.microsoft.com/windows/nanoserver:ltsc2022"}},
			Tolerations: []corev1.Toleration{{Key: "os", Value: "Windows", Effect: corev1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, env.Cluster.SetPodRunning(ctx, "workload", "app"))
	csrsBefore := kubeletClientCSRs(t, env)
	before, err := env.Snapshot(h)
	require.NoError(t, err)

	t.Run("refused with adopt_wmco off", func(t *testing.T) {
		r := run(t, env, nil, join("plan", "-var", "adopt_wmco=false")...)
		assert.Equal(t, 1, r.ExitCode, "refused\n%s", r.Failures())
		assert.Contains(t, r.Stdout+r.Stderr, "WMCO created it: set adopt_wmco = true")
	})

	t.Run("plan", func(t *testing.T) {
		r := run(t, env, nil, join("plan", "--detailed-exitcode")...)
		require.Equalf(t, 2, r.ExitCode, "plan: changes, no errors\n%s\n%s", r.Failures(), tail(r.Stdout, 12))
		now, err := env.Snapshot(h)
		require.NoError(t, err)
		assert.Equal(t, before, now, "a plan changes nothing")

		assert.Contains(t, r.Stdout, `adopting WMCO's containerd (binary C:\\k\\containerd\\containerd.exe), WMCO's kubelet (binary C:\\k\\kube-log-runner.exe)`,
			"preflight says it adopts WMCO's services")
		kubelet := serviceChange(r, h.Name, "kubelet service")
		assert.Contains(t, kubelet, `description: "OpenShift managed kubelet" -> "`+windows.ManagedDescription+`"`)
		assert.Contains(t, kubelet, "--hostname-override="+h.NodeName, "the kubelet's command gains wsu's --hostname-override")
		assert.Contains(t, serviceChange(r, h.Name, "exporter service"), "--web.config.file", "WMCO's TLS flag goes without metrics_tls_cert")
		for _, task := range []string{"containerd service", "hybrid-overlay service", "kube-proxy service", "csi-proxy service"} {
			assert.Contains(t, serviceChange(r, h.Name, task), `description: "OpenShift managed`, "%s: WMCO's description replaced by wsu's marker", task)
		}
		assert.Contains(t, changesOf(r, h.Name, "wmco node daemon"), "delete", "WICD is removed")
		assert.Len(t, strings.Split(strings.TrimSpace(changesOf(r, h.Name, "wmco node daemon files")), "\n"), 2, "WICD's binary and kubeconfig are removed")
		owner := serviceChange(r, h.Name, "node name")
		assert.Contains(t, owner, `annotations["wsu.dev/owner"]`, "WMCO's Node is marked as wsu's")
		labels := serviceChange(r, h.Name, "labels and version annotation")
		for _, a := range []string{"desired-version", "pub-key-hash", "username"} {
			assert.Contains(t, labels, kube.WMCOPrefix+a, "WMCO's %s annotation is removed", a)
		}
		assert.Contains(t, labels, wmcoVersion, "the version annotation moves from WMCO's version to the payload's")
		for _, task := range []string{"stale cni state", "bootstrap kubeconfig removed"} {
			assert.Empty(t, changesOf(r, h.Name, task), "%s: a running node's state is kept", task)
		}
		// Exactly these, and nothing else: WMCO laid out the same files
		// from the same templates, so no file of the payload or the
		// configuration changes.
		assert.ElementsMatch(t, []string{
			`node name/task["node name"]`,
			`wmco leftovers/task["wmco node daemon"]`,
			`wmco leftovers/task["wmco node daemon files"]["C:\\k\\wicd-kubeconfig"]`,
			`wmco leftovers/task["wmco node daemon files"]["C:\\k\\windows-instance-config-daemon.exe"]`,
			`firewall/task["inbound ports"]["wsu-kubelet"]`,
			`firewall/task["inbound ports"]["wsu-windows-exporter"]`,
			`check-runtime/include.runtime.task["containerd service"]`,
			`configure-kubelet/include.kubelet.task["kubelet service"]`,
			`bootstrap credentials/task["node owner"]`,
			`hybrid-overlay/include.overlay.task["hybrid-overlay service"]`,
			`kube-proxy/include.kube_proxy.task["kube-proxy service"]`,
			`csi-proxy/include.csi.task["csi-proxy service"]`,
			`ready/task["labels and version annotation"]`,
			`windows-exporter/include.monitoring.task["exporter service"]`,
		}, r.Changed(h.Name))
		for _, ev := range r.Tasks(h.Name) {
			if ev.Change != nil && len(ev.Change.Restarts) > 0 {
				t.Logf("%s restarts %v", ev.Task, ev.Change.Restarts)
			}
		}
	})
	if t.Failed() {
		return
	}

	t.Run("apply", func(t *testing.T) {
		r := run(t, env, nil, join("apply")...)
		requireSuccess(t, r)
		after, err := nodes.Get(ctx, h.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, node.UID, after.UID, "the Node is kept: not deleted and registered again")
		assert.False(t, after.Spec.Unschedulable, "not cordoned")
		assert.Equal(t, "wsu", after.Annotations[kube.OwnerAnnotation])
		assert.Equal(t, env.Manifest.Version, after.Annotations[kube.WMCOVersionAnnotation])
		for _, a := range []string{"desired-version", "pub-key-hash", "username"} {
			assert.NotContains(t, after.Annotations, kube.WMCOPrefix+a)
		}
		got, err := env.Cluster.Client.CoreV1().Pods("workload").Get(ctx, "app", metav1.GetOptions{})
		require.NoError(t, err, "the pod is still there: no drain")
		assert.Equal(t, pod.UID, got.UID)
		assert.Equal(t, csrsBefore, kubeletClientCSRs(t, env), "no new kubelet client certificate: the kubelet kept its credentials")

		require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
			for name, want := range wantServices(h, env.Cluster.Config.Host) {
				info, err := s.QueryService(ctx, name)
				require.NoError(t, err)
				assert.Equalf(t, windows.ManagedDescription, info.Config.Description, "service %s is wsu's", name)
				assert.Equalf(t, host.ServiceRunning, info.State, "service %s runs", name)
				if name != "kubelet" {
					assert.Equalf(t, want.Args, info.Config.Args, "service %s arguments", name)
				}
			}
			wicd, err := s.QueryService(ctx, wicdService)
			require.NoError(t, err)
			assert.False(t, wicd.Exists, "WICD removed")
			for _, p := range []string{wicdBinary, wicdKubeconfig} {
				fi, err := s.Stat(ctx, p)
				require.NoError(t, err)
				assert.Falsef(t, fi.Exists, "%s removed", p)
			}
			for _, name := range []string{"wsu-kubelet", "wsu-windows-exporter", "ContainerLogsPort", "WindowsExporter"} {
				fw, err := s.FirewallRule(ctx, name)
				require.NoError(t, err)
				assert.Truef(t, fw.Exists, "firewall rule %s (WMCO's are left: an admin's rules are not wsu's to delete)", name)
			}
			return nil
		}))
		checkExporter(t, env, h)
	})
	if t.Failed() {
		return
	}

	t.Run("replan", func(t *testing.T) {
		r := run(t, env, nil, join("plan", "--detailed-exitcode")...)
		assert.Equalf(t, 0, r.ExitCode, "plan after adopting: no changes\n%s\n%v", r.Failures(), r.Changed(h.Name))
	})
}

// changesOf is a task's planned changes on a host, one "action subject"
// line each.
func changesOf(r *harness.Result, hostName, task string) string {
	var b strings.Builder
	for _, ev := range r.Tasks(hostName) {
		if ev.Task == task && ev.Change != nil {
			fmt.Fprintf(&b, "%s %s\n", ev.Change.Action, ev.Change.Subject)
		}
	}
	return b.String()
}
