//go:build linux

package e2e

import (
	"context"
	"crypto/x509/pkix"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestVanillaHostProcess: a kubeadm cluster with no OVN-Kubernetes at
// all, whose Windows network is Calico and kube-proxy-windows as
// HostProcess DaemonSets (the stand-ins the kubelet stand-in runs), with
// kube-controller-manager's csrapproving, bootstrapsigner, tokencleaner,
// nodeipam, daemonset and podgc controllers and the real scheduler. join
// leaves network unset (kubeadm's default, hostprocess).
func TestVanillaHostProcess(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1, Network: harness.NetworkHostProcess})
	h := env.Hosts[0]
	ctx := context.Background()
	before, err := env.Snapshot(h)
	require.NoError(t, err)

	t.Run("refused at plan without the network", func(t *testing.T) {
		ds := env.Cluster.Client.AppsV1().DaemonSets(kubetest.CalicoNamespace)
		calico, err := ds.Get(ctx, kubetest.CalicoNodeWindowsDaemonSet, metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, ds.Delete(ctx, calico.Name, metav1.DeleteOptions{}))
		plan := run(t, env, nil, "plan", "join")
		assert.Equal(t, 1, plan.ExitCode, "plan without a Windows CNI DaemonSet\n%s", plan.Failures())
		assert.Contains(t, plan.Stdout+plan.Stderr, "Windows CNI: no HostProcess DaemonSet selecting kubernetes.io/os=windows")
		assert.Contains(t, plan.Stdout+plan.Stderr, "windowsDataplane: HNS")
		apply := run(t, env, nil, "apply", "join", "--auto-approve")
		assert.Equal(t, 1, apply.ExitCode, "apply without a Windows CNI DaemonSet")
		assert.Contains(t, apply.Stdout+apply.Stderr, "Windows CNI: no HostProcess DaemonSet")

		// ovn-hybrid here: no OVN-Kubernetes, refused at once, naming
		// what fits.
		ovn := run(t, env, nil, "apply", "join", "--auto-approve", "-var", "network=ovn-hybrid")
		assert.Equal(t, 1, ovn.ExitCode, "ovn-hybrid on a cluster without OVN-Kubernetes")
		assert.Contains(t, ovn.Stdout+ovn.Stderr, "ovn-kubernetes/ovnkube-config")
		now, err := env.Snapshot(h)
		require.NoError(t, err)
		assert.Equal(t, before, now, "refused before any host change")

		require.NoError(t, env.Cluster.InstallWindowsNetwork(ctx, kubetest.WindowsNetworkOptions{}))
	})

	t.Run("join", func(t *testing.T) {
		// The plan holds the bootstrap kubeconfig to SYSTEM and
		// Administrators (win_file's tables show the apply does).
		plan := run(t, env, nil, "plan", "join")
		assert.Contains(t, plan.Stdout, host.AdminsOnlyACL().String(), "the bootstrap kubeconfig's ACL in the plan")
		r := run(t, env, nil, "apply", "join")
		requireSuccess(t, r)
		checkVanillaJoined(t, env, h)
		checkBootstrapCredentials(t, env, h)
	})
	if t.Failed() {
		return
	}

	t.Run("wsu's token is no kubeadm node token", func(t *testing.T) {
		checkTokenNotAutoApproved(t, env, h)
	})

	t.Run("rerun", func(t *testing.T) {
		r := run(t, env, nil, "apply", "join")
		requireSuccess(t, r)
		assert.Empty(t, r.Changed(h.Name), "a re-run changes nothing")
		plan := run(t, env, nil, "plan", "join", "--detailed-exitcode")
		assert.Equal(t, 0, plan.ExitCode, "plan after join: no changes\n%s", plan.Failures())
		assert.Len(t, wsuTokens(t, env), 1, "a joined node's re-run mints no token")
	})

	t.Run("remove", func(t *testing.T) {
		r := run(t, env, nil, "apply", "remove")
		requireSuccess(t, r)
		_, err := env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		assert.Truef(t, apierrors.IsNotFound(err), "Node still there after remove: %v", err)
		waitNoPodsOn(t, env, h.NodeName)
		after, err := env.Snapshot(h)
		require.NoError(t, err)
		assert.Empty(t, wsuLeftovers(before, after), "remove leaves nothing of wsu's (only what the CNI's pods wrote)")
		require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
			procs, err := s.ListProcesses(ctx)
			for _, p := range procs {
				t.Errorf("process left running after remove: %+v", p)
			}
			return err
		}))
	})
}

// checkVanillaJoined: the node as a vanilla cluster's Windows worker:
// containerd and the kubelet, the network from the cluster's DaemonSets.
func checkVanillaJoined(t *testing.T, env *harness.Env, h *harness.Host) {
	t.Helper()
	ctx := context.Background()
	node, err := env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	assert.True(t, ready, "Node Ready")
	assert.NotEmpty(t, node.Spec.PodCIDR, "node-ipam-controller gave the Node its pod network")
	for k := range node.Labels {
		assert.NotContains(t, k, "openshift.io", "no OpenShift label on a vanilla node")
	}
	for k := range node.Annotations {
		assert.NotContains(t, k, "openshift.io", "no OpenShift annotation on a vanilla node")
	}
	for _, taint := range node.Spec.Taints {
		// The cluster's own condition taints (node.kubernetes.io/not-ready
		// until a node-lifecycle controller clears it) are not wsu's.
		assert.Truef(t, strings.HasPrefix(taint.Key, "node.kubernetes.io/"), "taint %v: none of wsu's on vanilla (its default, as CAPZ)", taint)
	}
	assert.Equal(t, "hostprocess", node.Annotations["wsu.dev/network"], "kubeadm's default network, recorded")
	assert.Equal(t, env.Manifest.Version, node.Annotations["wsu.dev/version"])

	for _, ds := range []struct{ ns, name string }{{kubetest.CalicoNamespace, kubetest.CalicoNodeWindowsDaemonSet}, {"kube-system", kubetest.KubeProxyWindowsDaemonSet}} {
		pods := podsOn(t, env, ds.ns, h.NodeName)
		found := false
		for _, p := range pods {
			if strings.HasPrefix(p.Name, ds.name+"-") {
				found = true
				assert.Equalf(t, corev1.PodRunning, p.Status.Phase, "%s/%s's pod on the node", ds.ns, ds.name)
			}
		}
		assert.Truef(t, found, "%s/%s runs a pod on the node", ds.ns, ds.name)
	}

	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		ctrd, err := s.ReadFile(ctx, `C:\k\containerd\containerd_conf.toml`, 1<<20)
		require.NoError(t, err)
		toml := func(p string) string { return strings.ReplaceAll(p, `\`, `\\`) }
		assert.Contains(t, string(ctrd), fmt.Sprintf(`bin_dir = "%s"`, toml(kubetest.DefaultCNIBinDir)), "containerd's CNI bin dir is the DaemonSet's")
		assert.Contains(t, string(ctrd), fmt.Sprintf(`conf_dir = "%s"`, toml(kubetest.DefaultCNIConfDir)), "containerd's CNI conf dir is the DaemonSet's")
		conflist, err := s.Stat(ctx, kubetest.DefaultCNIConfDir+`\`+kubetest.CalicoConflist)
		require.NoError(t, err)
		assert.True(t, conflist.Exists, "the CNI DaemonSet's config is where containerd reads it")
		for _, name := range []string{"hybrid-overlay-node", "kube-proxy"} {
			info, err := s.QueryService(ctx, name)
			require.NoError(t, err)
			assert.Falsef(t, info.Exists, "no %s service with network hostprocess", name)
		}
		for _, name := range []string{"containerd", "kubelet"} {
			info, err := s.QueryService(ctx, name)
			require.NoError(t, err)
			assert.Equalf(t, host.ServiceRunning, info.State, "%s runs", name)
		}
		nets, err := s.HNSNetworks(ctx)
		require.NoError(t, err)
		var names []string
		for _, n := range nets {
			names = append(names, n.Name)
		}
		assert.Equal(t, []string{kubetest.CalicoHNSNetwork}, names, "only the CNI's network: no OVN hybrid overlay")
		conf, err := s.ReadFile(ctx, `C:\k\kubelet.conf`, 1<<20)
		require.NoError(t, err)
		assert.Contains(t, string(conf), "clusterDNS:\n- "+kubetest.ClusterDNSIP+"\n", "clusterDNS from the cluster's kubelet-config")
		assert.Contains(t, string(conf), "clusterDomain: "+kubetest.ClusterDomain+"\n", "clusterDomain from the cluster's kubelet-config")
		vxlan, err := s.FirewallRule(ctx, "wsu-vxlan")
		require.NoError(t, err)
		assert.Equal(t, "in allow udp 4789 (domain, private, public), enabled", vxlan.String(), "VXLAN's UDP port")
		return nil
	}))
}

func podsOn(t *testing.T, env *harness.Env, ns, node string) []corev1.Pod {
	t.Helper()
	pods, err := env.Cluster.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	require.NoError(t, err)
	return pods.Items
}

// waitNoPodsOn waits until the pod garbage collector has deleted the pods
// bound to a deleted Node.
func waitNoPodsOn(t *testing.T, env *harness.Env, node string) {
	t.Helper()
	var left []string
	require.Eventually(t, func() bool {
		left = nil
		for _, ns := range []string{kubetest.CalicoNamespace, "kube-system"} {
			for _, p := range podsOn(t, env, ns, node) {
				left = append(left, ns+"/"+p.Name)
			}
		}
		return len(left) == 0
	}, 3*time.Minute, 500*time.Millisecond, "the DaemonSet pods of the deleted Node are gone: %v", left)
}

// wsuLeftovers are what differs between two snapshots except what the
// cluster's HostProcess pods and the runtime left: the CNI's dirs and HNS
// network and endpoint (as kubeadm reset leaves /etc/cni/net.d), the pods'
// logs, and their containers' mount points (C:\C\<id>, where HostProcess
// containers see their volumes).
func wsuLeftovers(before, after map[string]string) []string {
	cni := []string{"fs:C/opt", "fs:C/etc", "fs:C/var/log/pods", "fs:C/C"}
	parents := map[string]bool{"fs:C/var": true, "fs:C/var/log": true, "fs:C/var/lib": true}
	var out []string
	for k, v := range after {
		if before[k] == v || parents[k] {
			continue
		}
		skip := strings.HasPrefix(k, "state:hns.")
		for _, p := range cni {
			skip = skip || k == p || strings.HasPrefix(k, p+"/")
		}
		if !skip {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k+" (gone)")
		}
	}
	sort.Strings(out)
	return out
}

// checkTokenNotAutoApproved: a client CSR for another node's name, made
// with the bootstrap token wsu gave the node, is approved by nobody, while
// the same CSR made with a kubeadm node token is auto-approved by the real
// csrapproving controller (the control that shows it runs).
func checkTokenNotAutoApproved(t *testing.T, env *harness.Env, h *harness.Host) {
	t.Helper()
	ctx := context.Background()
	// The node's bootstrap kubeconfig is gone; the token it held lives
	// until it expires. Read as the admin: wsu itself cannot.
	tokens := wsuTokens(t, env)
	require.Len(t, tokens, 1)
	wsuToken := string(tokens[0].Data["token-id"]) + "." + string(tokens[0].Data["token-secret"])
	kubeadmTok, err := kube.CreateBootstrapToken(ctx, env.Cluster.Client, kube.TokenRequest{TTL: time.Hour, Group: kube.KubeadmNodeTokenGroup})
	require.NoError(t, err)

	wsuCSR := nodeClientCSR(t, env, wsuToken, "not-"+h.NodeName)
	kubeadmCSR := nodeClientCSR(t, env, kubeadmTok.String(), "kubeadm-"+h.NodeName)
	csrs := env.Cluster.Client.CertificatesV1().CertificateSigningRequests()
	require.Eventually(t, func() bool {
		c, err := csrs.Get(ctx, kubeadmCSR, metav1.GetOptions{})
		return err == nil && approvedBy(c) == "AutoApproved"
	}, time.Minute, 200*time.Millisecond, "the csrapproving controller approves a kubeadm node token's CSR")
	c, err := csrs.Get(ctx, wsuCSR, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, approvedBy(c), "no one approves a CSR for another node made with wsu's token")
}

// checkBootstrapCredentials: the join minted one short-lived token in
// wsu's group, and once the kubelet had its client certificate the
// bootstrap kubeconfig holding it was removed from the node.
func checkBootstrapCredentials(t *testing.T, env *harness.Env, h *harness.Host) {
	t.Helper()
	tokens := wsuTokens(t, env)
	require.Len(t, tokens, 1, "one token for one join")
	exp, err := time.Parse(time.RFC3339, string(tokens[0].Data["expiration"]))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(30*time.Minute), exp, 30*time.Minute, "expires within the join's ttl (30m)")
	assert.Equal(t, kube.WSUBootstrapGroup, string(tokens[0].Data["auth-extra-groups"]))
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		boot, err := s.Stat(context.Background(), `C:\k\bootstrap-kubeconfig`)
		if err != nil {
			return err
		}
		assert.False(t, boot.Exists, "the bootstrap kubeconfig is removed once the kubelet has its client certificate")
		own, err := s.Stat(context.Background(), `C:\k\kubeconfig`)
		assert.True(t, own.Exists, "the kubelet's own kubeconfig")
		return err
	}))
}

// wsuTokens are the bootstrap token Secrets wsu's joins created (in its
// own group: checkTokenNotAutoApproved makes a kubeadm-group one through
// the same library), read as the admin.
func wsuTokens(t *testing.T, env *harness.Env) []corev1.Secret {
	t.Helper()
	list, err := env.Cluster.Client.CoreV1().Secrets(kube.BootstrapTokenNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: kube.ManagedByLabel + "=wsu"})
	require.NoError(t, err)
	var out []corev1.Secret
	for _, s := range list.Items {
		if string(s.Data["auth-extra-groups"]) == kube.WSUBootstrapGroup {
			out = append(out, s)
		}
	}
	return out
}

func approvedBy(c *certificatesv1.CertificateSigningRequest) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue {
			return cond.Reason
		}
	}
	return ""
}

// nodeClientCSR submits, as the bearer of token, a kubelet client CSR for
// node; it returns the CSR's name.
func nodeClientCSR(t *testing.T, env *harness.Env, token, node string) string {
	t.Helper()
	cfg := rest.AnonymousClientConfig(env.Cluster.Config)
	cfg.BearerToken = token
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	key, err := keyutil.MakeEllipticPrivateKeyPEM()
	require.NoError(t, err)
	pk, err := keyutil.ParsePrivateKeyPEM(key)
	require.NoError(t, err)
	der, err := cert.MakeCSR(pk, &pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, nil, nil)
	require.NoError(t, err)
	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    der,
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}
	got, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{})
	require.NoError(t, err)
	return got.Name
}
