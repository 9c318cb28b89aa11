//go:build linux

package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/standin"
)

// winNode is a simulated Windows host with the stand-ins in C:\k.
type winNode struct {
	h        *sim.Host
	name, ip string
}

func (n winNode) local(t *testing.T, p string) string {
	t.Helper()
	lp, err := n.h.LocalPath(p)
	require.NoError(t, err)
	return lp
}

func (n winNode) put(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	lp := n.local(t, p)
	require.NoError(t, os.MkdirAll(filepath.Dir(lp), 0o755))
	require.NoError(t, os.WriteFile(lp, data, mode))
}

// startWindowsNode joins a simulated host as kubeadm join would leave it
// (kubelet-config read with the token as config.yaml, the bootstrap
// kubeconfig) and starts the kubelet stand-in as its service, with the
// HostProcess stand-ins beside it. It returns the token used.
func startWindowsNode(t *testing.T, c *Cluster, n winNode) *kube.BootstrapToken {
	t.Helper()
	ctx := context.Background()
	bins, err := standin.Build(ctx, t.TempDir(), "", "kubelet", "calicowindows", "kubeproxy")
	require.NoError(t, err)
	require.NoError(t, n.h.SetOptionalFeature(sim.ContainersFeature, host.FeatureEnabled))
	for name, p := range map[string]string{`C:\k\kubelet.exe`: bins["kubelet"], `C:\k\calicowindows`: bins["calicowindows"],
		`C:\k\kubeproxy`: bins["kubeproxy"]} {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		n.put(t, name, b, 0o755)
	}
	// kubeadm's node token: its group reads kubelet-config and is
	// auto-approved (wsu's own group is neither).
	tok, err := kube.CreateBootstrapToken(ctx, c.Client, kube.TokenRequest{TTL: time.Hour, Group: kube.KubeadmNodeTokenGroup})
	require.NoError(t, err)
	server, ca, err := kube.ClusterInfo(ctx, c.Client)
	require.NoError(t, err)
	bkc, err := kube.BootstrapKubeconfig(server, ca, tok.String())
	require.NoError(t, err)
	n.put(t, `C:\etc\kubernetes\bootstrap-kubelet.conf`, bkc, 0o600)
	// What kubeadm join reads with the token: the kubelet configuration.
	bcfg, err := clientcmd.RESTConfigFromKubeConfig(bkc)
	require.NoError(t, err)
	cm, err := clientset(t, bcfg).CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, KubeletConfigMap, metav1.GetOptions{})
	require.NoError(t, err, "Role kubeadm:kubelet-config lets the token read it")
	n.put(t, `C:\var\lib\kubelet\config.yaml`, []byte(cm.Data["kubelet"]), 0o644)

	t.Setenv("WSU_KUBELET_HEARTBEAT", "1s")
	require.NoError(t, n.h.CreateService(ctx, host.ServiceConfig{
		Name: "kubelet", BinaryPath: `C:\k\kubelet.exe`, StartType: host.StartAutomatic,
		Args: []string{`--config=C:\var\lib\kubelet\config.yaml`, `--bootstrap-kubeconfig=C:\etc\kubernetes\bootstrap-kubelet.conf`,
			`--kubeconfig=C:\etc\kubernetes\kubelet.conf`, `--cert-dir=C:\var\lib\kubelet\pki`,
			"--hostname-override=" + n.name, "--node-ip=" + n.ip, "--windows-service"},
	}))
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(n.h.Root(), "logs", "kubelet.log"))
			t.Logf("kubelet service output:\n%s", b)
			t.Logf("kube-controller-manager:\n%s", c.ComponentLog(KubeControllerManager, 40))
		}
	})
	require.NoError(t, n.h.StartService(ctx, "kubelet"))
	t.Cleanup(func() { _ = n.h.StopService(context.Background(), "kubelet", 20*time.Second) })
	return tok
}

// eventually polls cond every 100 ms until it holds or the deadline
// passes, then fails with what cond last said.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %s", what, within, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestWindowsNetworkHostProcess runs the kubeadm controllers, the
// scheduler and a kubelet stand-in on a simulated Windows host, and
// follows a node-only join to HostProcess networking: the node's client
// CSR approved by the real CSR approver, its podCIDR from real node IPAM,
// and the calico-node-windows and kube-proxy-windows DaemonSets' pods
// scheduled to it and run (by stand-ins) as their ServiceAccounts.
func TestWindowsNetworkHostProcess(t *testing.T) {
	ctx := context.Background()
	c := Start(t, WithKubeadmControllers(), WithScheduler())
	require.NoError(t, c.InitKubeadm(ctx))
	require.NoError(t, c.InitKubeadm(ctx), "idempotent")
	h, err := sim.New(t.TempDir(), sim.Options{Hostname: "WIN-CALICO", IPv4: "10.1.0.5"})
	require.NoError(t, err)
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	n := winNode{h: h, name: "win-calico", ip: "10.1.0.5"}
	tok := startWindowsNode(t, c, n)

	// The real CSR approver approves the node client CSR the kubeadm
	// token requested; the real signer issues it.
	csrs := c.Client.CertificatesV1().CertificateSigningRequests()
	eventually(t, time.Minute, "client CSR auto-approved", func() (bool, string) {
		l, err := csrs.List(ctx, metav1.ListOptions{})
		if err != nil || len(l.Items) == 0 {
			return false, fmt.Sprintf("no CSR yet (%v)", err)
		}
		csr := l.Items[0]
		assert.Equal(t, tok.Username(), csr.Spec.Username)
		assert.Contains(t, csr.Spec.Groups, KubeadmNodeTokenGroup)
		assert.Equal(t, certificatesv1.KubeAPIServerClientKubeletSignerName, csr.Spec.SignerName)
		for _, cond := range csr.Status.Conditions {
			if cond.Type == certificatesv1.CertificateApproved {
				return cond.Reason == "AutoApproved", "approved with reason " + cond.Reason
			}
		}
		return false, "CSR " + csr.Name + " pending"
	})
	// The real bootstrap signer signs cluster-info for the token.
	eventually(t, time.Minute, "cluster-info signed", func() (bool, string) {
		cm, err := c.Client.CoreV1().ConfigMaps(ClusterInfoNamespace).Get(ctx, ClusterInfoName, metav1.GetOptions{})
		return err == nil && cm.Data["jws-kubeconfig-"+tok.ID] != "", fmt.Sprintf("no jws-kubeconfig-%s (%v)", tok.ID, err)
	})

	// Real node IPAM gives the Node its pod subnet.
	var node *corev1.Node
	eventually(t, time.Minute, "node podCIDR", func() (bool, string) {
		node, err = c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		return err == nil && node.Spec.PodCIDR != "", fmt.Sprintf("node: %v", err)
	})
	podCIDR := netip.MustParsePrefix(node.Spec.PodCIDR)
	assert.True(t, netip.MustParsePrefix(KubeadmPodSubnet).Contains(podCIDR.Addr()), podCIDR)
	assert.Equal(t, KubeadmNodeCIDRMaskSize, podCIDR.Bits())

	require.NoError(t, c.InstallWindowsNetwork(ctx, WindowsNetworkOptions{}))
	require.NoError(t, c.InstallWindowsNetwork(ctx, WindowsNetworkOptions{}), "idempotent")
	calico := waitDaemonSetPod(t, c, CalicoNamespace, CalicoNodeWindowsDaemonSet, n.name)
	proxy := waitDaemonSetPod(t, c, metav1.NamespaceSystem, KubeProxyWindowsDaemonSet, n.name)

	// calico-node-windows' work on the host.
	var ep host.HNSEndpoint
	eventually(t, 30*time.Second, "HNS network and endpoint", func() (bool, string) {
		eps, err := h.HNSEndpoints(ctx)
		i := slices.IndexFunc(eps, func(e host.HNSEndpoint) bool { return e.Name == CalicoHNSEndpoint })
		if err != nil || i < 0 {
			return false, fmt.Sprintf("endpoints %v (%v)", eps, err)
		}
		ep = eps[i]
		return true, ""
	})
	nets, err := h.HNSNetworks(ctx)
	require.NoError(t, err)
	i := slices.IndexFunc(nets, func(nw host.HNSNetwork) bool { return nw.Name == CalicoHNSNetwork })
	require.GreaterOrEqual(t, i, 0, "%v", nets)
	assert.Equal(t, "Overlay", nets[i].Type)
	assert.Equal(t, []string{podCIDR.String()}, nets[i].Subnets)
	assert.Equal(t, n.ip, nets[i].ManagementIP)
	assert.Equal(t, CalicoHNSNetwork, ep.Network)
	assert.True(t, podCIDR.Contains(netip.MustParseAddr(ep.IP)), ep.IP)
	for _, f := range []string{DefaultCNIBinDir + `\calico.exe`, DefaultCNIBinDir + `\calico-ipam.exe`} {
		assert.FileExists(t, n.local(t, f))
	}
	b, err := os.ReadFile(n.local(t, DefaultCNIConfDir+`\`+CalicoConflist))
	require.NoError(t, err)
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	require.NoError(t, json.Unmarshal(b, &conf))
	assert.Equal(t, CalicoHNSNetwork, conf.Name)
	require.NotEmpty(t, conf.Plugins)
	assert.Equal(t, "calico", conf.Plugins[0].Type)
	assert.Contains(t, podLog(t, n, calico, "node"), "ready: node "+n.name)

	// kube-proxy listed and watched as its ServiceAccount, with the
	// endpoint's address as source VIP.
	eventually(t, 30*time.Second, "kube-proxy synced", func() (bool, string) {
		l := podLog(t, n, proxy, "kube-proxy")
		return strings.Contains(l, "synced: listed"), l
	})
	l := podLog(t, n, proxy, "kube-proxy")
	assert.Contains(t, l, "as system:serviceaccount:kube-system:kube-proxy")
	assert.Contains(t, l, fmt.Sprintf("source VIP %q", ep.IP))
	assert.FileExists(t, n.local(t, `C:\C\`+string(proxy.UID)+`\var\lib\kube-proxy\kubeconfig.conf`), "the ConfigMap volume")

	// Deleting a pod stops its process; the DaemonSet's new pod runs.
	pid := containerPID(t, proxy)
	require.NoError(t, c.Client.CoreV1().Pods(proxy.Namespace).Delete(ctx, proxy.Name, metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "old kube-proxy process gone", func() (bool, string) {
		return processGone(pid), "pid " + strconv.Itoa(pid) + " still there"
	})
	next := waitDaemonSetPod(t, c, metav1.NamespaceSystem, KubeProxyWindowsDaemonSet, n.name)
	assert.NotEqual(t, proxy.UID, next.UID)

	// kube-proxy as a node service with the kubelet's identity (gap 4 of
	// docs/vanilla-kubernetes.md): the Node authorizer lets a node list
	// Services but not EndpointSlices, and the stand-in fails on that.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(rctx, n.local(t, `C:\k\kubeproxy`), `--kubeconfig=C:\etc\kubernetes\kubelet.conf`, "--hostname-override="+n.name)
	cmd.Env = append(os.Environ(), sim.EnvRoot+"="+h.Root())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	assert.Equal(t, 1, exit.ExitCode(), "%s", out)
	assert.Contains(t, string(out), "failed to list/watch endpointslices.discovery.k8s.io as system:node:"+n.name, "%s", out)

	// Stopping the kubelet stops what it started.
	pids := []int{containerPID(t, calico), containerPID(t, next)}
	require.NoError(t, h.StopService(ctx, "kubelet", 20*time.Second))
	for _, p := range pids {
		eventually(t, 20*time.Second, "HostProcess stand-ins stopped with the kubelet", func() (bool, string) {
			return processGone(p), "pid " + strconv.Itoa(p) + " still there"
		})
	}
}

// waitDaemonSetPod waits until the DaemonSet has exactly one pod on the
// node, Running and Ready, and counts it ready.
func waitDaemonSetPod(t *testing.T, c *Cluster, ns, name, node string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	eventually(t, 2*time.Minute, "DaemonSet "+ns+"/"+name+" pod Running on "+node, func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + name})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		for i := range pods.Items {
			p := &pods.Items[i]
			states = append(states, fmt.Sprintf("%s on %q %s deleting=%v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil))
			if p.Spec.NodeName == node && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p) {
				pod = p
			}
		}
		return pod != nil, strings.Join(states, "; ")
	})
	eventually(t, time.Minute, "DaemonSet "+name+" status", func() (bool, string) {
		ds, err := c.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ds.Status.DesiredNumberScheduled == 1 && ds.Status.NumberReady == 1,
			fmt.Sprintf("desired %d ready %d", ds.Status.DesiredNumberScheduled, ds.Status.NumberReady)
	})
	return pod
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podLog is the output of the pod's container's first run, where the
// kubelet stand-in keeps it.
func podLog(t *testing.T, n winNode, p *corev1.Pod, container string) string {
	t.Helper()
	b, _ := os.ReadFile(n.local(t, fmt.Sprintf(`C:\var\log\pods\%s_%s_%s\%s\0.log`, p.Namespace, p.Name, p.UID, container)))
	return string(b)
}

// containerPID is the stand-in process of the pod's first container, from
// the container ID the kubelet stand-in reports (standin://<pid>).
func containerPID(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	require.NotEmpty(t, p.Status.ContainerStatuses)
	pid, err := strconv.Atoi(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "standin://"))
	require.NoError(t, err)
	return pid
}

// processGone reports whether pid has exited (or is a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || len(b) < i+3 || b[i+2] == 'Z'
}
