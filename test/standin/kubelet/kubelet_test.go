package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/playbooks"
	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/test/standin"
	"github.com/wsu-project/wsu/test/standin/simhost"
)

func TestParseFlags(t *testing.T) {
	f, err := parseFlags([]string{
		`--config=C:\k\kubelet.conf`, "--windows-service", "--v", "3", "-node-ip=10.0.0.5",
		"--feature-gates=Foo=true", "--unknown-bool", "positional", "--hostname-override", "WIN-1",
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"config": `C:\k\kubelet.conf`, "windows-service": "true", "v": "3", "node-ip": "10.0.0.5", "hostname-override": "WIN-1",
	}, f, "unknown flags and arguments are ignored")
	_, err = parseFlags([]string{"--node-ip"})
	assert.ErrorContains(t, err, "needs a value")

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	o, err := loadOptions([]string{"--kubeconfig=" + kc, "--cert-dir=" + t.TempDir(), "--node-ip=10.0.0.5", "--hostname-override=WIN-1",
		"--node-labels=a=b,node.openshift.io/os_id=Windows", "--provider-id=aws:///us-east-1a/i-0abc"}, &simhost.Paths{})
	require.NoError(t, err)
	assert.Equal(t, "aws:///us-east-1a/i-0abc", o.providerID, "--provider-id is the Node's spec.providerID")
	assert.Equal(t, "win-1", o.nodeName, "the kubelet lower-cases the name")
	assert.Equal(t, map[string]string{"a": "b", "node.openshift.io/os_id": "Windows"}, o.nodeLabels)
	assert.Regexp(t, `^v1\.\d+\.\d+-wsu-standin$`, o.version)
	_, err = loadOptions([]string{`--kubeconfig=C:\k\kubeconfig`}, &simhost.Paths{})
	assert.ErrorContains(t, err, sim.EnvRoot, "a Windows path needs the simulated host")
	_, err = loadOptions([]string{"--kubeconfig=" + kc, "--cert-dir=/tmp", "--node-ip=10.0.0.5", "--config=/absent"}, &simhost.Paths{})
	assert.ErrorContains(t, err, "failed to load kubelet config file")
}

// kubeletConf renders the stock playbooks' kubelet.conf template, so the
// stand-in reads what configure-kubelet writes.
func kubeletConf(t *testing.T) []byte {
	t.Helper()
	src, err := playbooks.FS.ReadFile("templates/kubelet.conf.tftpl")
	require.NoError(t, err)
	tmpl, diags := hclsyntax.ParseTemplate(src, "kubelet.conf.tftpl", hcl.InitialPos)
	require.False(t, diags.HasErrors(), "%v", diags)
	taint := cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("os"), "value": cty.StringVal("Windows"), "effect": cty.StringVal("NoSchedule")})
	v, diags := tmpl.Value(&hcl.EvalContext{Variables: map[string]cty.Value{
		"cluster_dns":    cty.ListVal([]cty.Value{cty.StringVal("172.30.0.10")}),
		"cluster_domain": cty.StringVal("cluster.local"),
		"max_pods":       cty.NumberIntVal(250),
		"node_taints":    cty.ListVal([]cty.Value{taint}), // OpenShift's
	}, Functions: map[string]function.Function{"length": stdlib.LengthFunc}})
	require.False(t, diags.HasErrors(), "%v", diags)
	return []byte(v.AsString())
}

// node is the simulated Windows host with the stand-ins in place.
type node struct {
	h    *sim.Host
	name string
	ip   string
}

func (n node) local(t *testing.T, p string) string {
	t.Helper()
	lp, err := n.h.LocalPath(p)
	require.NoError(t, err)
	return lp
}

func (n node) put(t *testing.T, p string, data []byte, mode os.FileMode) {
	t.Helper()
	lp := n.local(t, p)
	require.NoError(t, os.MkdirAll(filepath.Dir(lp), 0o755))
	require.NoError(t, os.WriteFile(lp, data, mode))
}

func copyFile(t *testing.T, src string) []byte {
	t.Helper()
	f, err := os.Open(src)
	require.NoError(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return b
}

func csrsOf(t *testing.T, c *kubetest.Cluster, signer string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	l, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	return slices.DeleteFunc(l.Items, func(c certificatesv1.CertificateSigningRequest) bool { return c.Spec.SignerName != signer })
}

func waitCSR(t *testing.T, c *kubetest.Cluster, signer string) certificatesv1.CertificateSigningRequest {
	t.Helper()
	var got []certificatesv1.CertificateSigningRequest
	require.Eventually(t, func() bool { got = csrsOf(t, c, signer); return len(got) > 0 }, 30*time.Second, 50*time.Millisecond,
		"no CSR for %s", signer)
	require.Len(t, got, 1)
	return got[0]
}

// approve approves name as wsu's k8s_csr_approve does: only after the
// CSR passes every rule in kube/csr.go.
func approve(t *testing.T, c *kubetest.Cluster, name, wantKind string, want kube.Expectation) {
	t.Helper()
	ctx := context.Background()
	s, err := kube.NodeCSRs(ctx, c.Client, want)
	require.NoError(t, err)
	csrs := s.CSRs
	i := slices.IndexFunc(csrs, func(x kube.NodeCSR) bool { return x.Name == name })
	require.GreaterOrEqual(t, i, 0, "CSR %s concerns node %s", name, want.NodeName)
	require.Equal(t, kube.CSRPending, csrs[i].State)
	require.NoError(t, csrs[i].Err, "the stand-in's %s CSR passes wsu's approval rules", wantKind)
	require.Equal(t, wantKind, csrs[i].Kind)
	require.NoError(t, kube.ApproveCSR(ctx, c.Client, name, want))
}

func processGone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || len(b) < i+3 || b[i+2] == 'Z'
}

// TestKubeletJoin runs kube-log-runner → kubelet as the simulated host's
// kubelet service against a real kube-apiserver, with a kubeadm bootstrap
// token made by the code k8s_bootstrap_token runs, and follows the join
// from the API's side.
func TestKubeletJoin(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	bins, err := standin.Build(ctx, t.TempDir(), "", "kubelet", "logrunner")
	require.NoError(t, err)
	t.Logf("stand-ins built in %s", time.Since(start).Round(time.Millisecond))

	c := kubetest.Start(t)
	require.NoError(t, c.InitKubeadm(ctx))
	require.NoError(t, c.InstallWSUBootstrappers(ctx))
	pctx, stopParts := context.WithCancel(ctx)
	partsDone := make(chan error, 1)
	go func() { partsDone <- c.RunParts(pctx, kubetest.PartsOptions{}) }()
	t.Cleanup(func() { stopParts(); <-partsDone })

	h, err := sim.New(t.TempDir(), sim.Options{Hostname: "WIN-E2E", IPv4: "192.168.50.5"})
	require.NoError(t, err)
	t.Cleanup(func() { h.Shutdown(context.Background()) })
	n := node{h: h, name: "win-e2e", ip: "192.168.50.5"}
	n.put(t, `C:\k\kubelet.exe`, copyFile(t, bins["kubelet"]), 0o755)
	n.put(t, `C:\k\kube-log-runner.exe`, copyFile(t, bins["logrunner"]), 0o755)
	n.put(t, `C:\k\kubelet.conf`, kubeletConf(t), 0o644)
	// copy-payload's directories; kube-log-runner does not make its own.
	for _, d := range []string{`C:\var\log\kubelet`, `C:\var\lib\kubelet\pki`} {
		require.NoError(t, os.MkdirAll(n.local(t, d), 0o755))
	}

	// The bootstrap kubeconfig exactly as k8s_bootstrap_token builds it.
	tok, err := kube.CreateBootstrapToken(ctx, c.Client, kube.TokenRequest{TTL: time.Hour})
	require.NoError(t, err)
	server, ca, err := kube.ClusterInfo(ctx, c.Client)
	require.NoError(t, err)
	bkc, err := kube.BootstrapKubeconfig(server, ca, tok.String())
	require.NoError(t, err)
	n.put(t, `C:\k\bootstrap-kubeconfig`, bkc, 0o600)

	// configure-kubelet's service, extra arguments included.
	t.Setenv(envHeartbeat, "500ms")
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{
		Name: "kubelet", BinaryPath: `C:\k\kube-log-runner.exe`, StartType: host.StartAutomatic,
		Args: []string{
			`-log-file=C:\var\log\kubelet\kubelet.log`, `C:\k\kubelet.exe`,
			`--config=C:\k\kubelet.conf`, `--bootstrap-kubeconfig=C:\k\bootstrap-kubeconfig`, `--kubeconfig=C:\k\kubeconfig`,
			`--cert-dir=c:\var\lib\kubelet\pki\`, "--windows-service", "--node-labels=node.openshift.io/os_id=Windows",
			"--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS", "--v=2", "--hostname-override=WIN-E2E", "--node-ip=192.168.50.5",
			"--feature-gates=SomeGate=true", "--an-unknown-flag",
		},
	}))
	want := kube.Expectation{NodeName: n.name, Addresses: []string{n.ip}, Hostnames: []string{n.name}, ClientRequesters: []string{tok.Username()},
		NotBefore: time.Now()}
	logs := func() string {
		b, _ := os.ReadFile(n.local(t, `C:\var\log\kubelet\kubelet.log`))
		return string(b)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kubelet.log:\n%s", logs())
			b, _ := os.ReadFile(filepath.Join(h.Root(), "logs", "kubelet.log"))
			t.Logf("service output:\n%s", b)
		}
	})

	startedAt := time.Now()
	require.NoError(t, h.StartService(ctx, "kubelet"))

	// 1. The client CSR, requested with the bootstrap token.
	client := waitCSR(t, c, certificatesv1.KubeAPIServerClientKubeletSignerName)
	t.Logf("client CSR %s after %s", client.Name, time.Since(startedAt).Round(time.Millisecond))
	assert.True(t, strings.HasPrefix(client.Name, "node-csr-"), client.Name)
	assert.Equal(t, tok.Username(), client.Spec.Username, "requested by the bootstrap identity")
	assert.Contains(t, client.Spec.Groups, kube.DefaultBootstrapGroup)
	assert.ElementsMatch(t, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, client.Spec.Usages,
		"an ECDSA key: no key encipherment, as the kubelet")
	// It waits: nothing is signed and nothing registers until approval.
	time.Sleep(time.Second)
	got, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, client.Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, kube.CSRPending, kube.CSRState(got))
	assert.Empty(t, got.Status.Certificate)
	_, err = c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Node before the certificate: %v", err)
	// A restart while it waits finds its own CSR again (same key, same
	// digested name) instead of making another.
	require.NoError(t, h.StopService(ctx, "kubelet", 20*time.Second))
	require.NoError(t, h.StartService(ctx, "kubelet"))
	require.Eventually(t, func() bool { return strings.Count(logs(), "waiting for CSR "+client.Name) == 2 }, 20*time.Second, 50*time.Millisecond)
	assert.Contains(t, logs(), "reusing the key of an unfinished bootstrap")
	assert.Len(t, csrsOf(t, c, certificatesv1.KubeAPIServerClientKubeletSignerName), 1, "a restart while pending makes no new CSR")
	approve(t, c, client.Name, kube.CSRClient, want)

	// 2. The Node, registered by the node itself, Ready, heartbeating.
	var nd *corev1.Node
	require.Eventually(t, func() bool {
		nd, err = c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		return err == nil && ready(nd)
	}, 30*time.Second, 50*time.Millisecond, "node %s Ready", n.name)
	t.Logf("node Ready after %s", time.Since(startedAt).Round(time.Millisecond))
	assert.Equal(t, "windows", nd.Labels["kubernetes.io/os"])
	assert.Equal(t, "Windows", nd.Labels["node.openshift.io/os_id"])
	assert.Equal(t, n.name, nd.Labels["kubernetes.io/hostname"])
	assert.Equal(t, "10.0.20348", nd.Labels["node.kubernetes.io/windows-build"])
	assert.Contains(t, nd.Spec.Taints, corev1.Taint{Key: "os", Value: "Windows", Effect: corev1.TaintEffectNoSchedule}, "registerWithTaints from kubelet.conf")
	assert.ElementsMatch(t, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.ip}, {Type: corev1.NodeHostName, Address: n.name}}, nd.Status.Addresses)
	assert.Equal(t, "windows", nd.Status.NodeInfo.OperatingSystem)
	assert.Contains(t, nd.Status.NodeInfo.KubeletVersion, "standin")
	assert.Equal(t, "250", nd.Status.Capacity.Pods().String(), "maxPods from kubelet.conf")
	firstBeat := readyCond(nd).LastHeartbeatTime
	require.Eventually(t, func() bool {
		nd, err = c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		return err == nil && readyCond(nd).LastHeartbeatTime.After(firstBeat.Time)
	}, 10*time.Second, 100*time.Millisecond, "the heartbeat advances")
	lease, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, n.name, metav1.GetOptions{})
	require.NoError(t, err, "the node lease")
	assert.Equal(t, n.name, *lease.Spec.HolderIdentity)

	// The kubeconfig it wrote authenticates as the node.
	kcfg, err := clientcmd.BuildConfigFromFlags("", n.local(t, `C:\k\kubeconfig`))
	require.NoError(t, err)
	ncs, err := kubernetes.NewForConfig(kcfg)
	require.NoError(t, err)
	r, err := ncs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:node:"+n.name, r.Status.UserInfo.Username)
	clientPEM := n.local(t, `c:\var\lib\kubelet\pki\kubelet-client-current.pem`)
	assert.FileExists(t, clientPEM)

	// 3. The serving CSR, requested as the node.
	serving := waitCSR(t, c, certificatesv1.KubeletServingSignerName)
	t.Logf("serving CSR %s after %s", serving.Name, time.Since(startedAt).Round(time.Millisecond))
	assert.Equal(t, "system:node:"+n.name, serving.Spec.Username)
	approve(t, c, serving.Name, kube.CSRServing, want)
	servingPEM := n.local(t, `c:\var\lib\kubelet\pki\kubelet-server-current.pem`)
	require.Eventually(t, func() bool { _, err := os.Stat(servingPEM); return err == nil }, 20*time.Second, 50*time.Millisecond)
	t.Logf("serving certificate stored after %s", time.Since(startedAt).Round(time.Millisecond))
	cert := leafOf(t, servingPEM)
	assert.Equal(t, []string{n.name}, cert.DNSNames)
	require.Len(t, cert.IPAddresses, 1)
	assert.Equal(t, n.ip, cert.IPAddresses[0].String())
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(c.SignerCA()))
	_, err = cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err)

	var signed []string
	for _, e := range c.PartEvents() {
		if e.Part == kubetest.PartCSRSigner {
			signed = append(signed, e.Object)
		}
	}
	assert.ElementsMatch(t, []string{client.Name, serving.Name}, signed, "the signer part issued both")
	assert.Contains(t, logs(), "ignoring flag \"--an-unknown-flag\"")

	// 4. A service stop: SIGTERM to kube-log-runner's group, both exit.
	info, err := h.QueryService(ctx, "kubelet")
	require.NoError(t, err)
	kubeletPID := childOf(t, info.PID)
	stopAt := time.Now()
	require.NoError(t, h.StopService(ctx, "kubelet", 20*time.Second))
	stopTook := time.Since(stopAt)
	t.Logf("service stopped in %s", stopTook.Round(time.Millisecond))
	assert.Less(t, stopTook, 3*time.Second, "a stop does not wait for the kill")
	assert.True(t, processGone(info.PID), "kube-log-runner exited")
	assert.True(t, processGone(kubeletPID), "the kubelet exited")
	assert.Contains(t, logs(), "got a stop signal: exiting")

	// 5. A restart reuses both certificates: no new CSR.
	restartAt := time.Now()
	require.NoError(t, h.StartService(ctx, "kubelet"))
	require.Eventually(t, func() bool {
		nd, err = c.Client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		return err == nil && readyCond(nd).LastHeartbeatTime.After(restartAt.Add(time.Second))
	}, 20*time.Second, 100*time.Millisecond, "heartbeats again after the restart")
	assert.Contains(t, logs(), "reusing the client certificate")
	assert.Contains(t, logs(), "reusing the serving certificate")
	all, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, all.Items, 2, "a restart creates no CSR")
	require.NoError(t, h.StopService(ctx, "kubelet", 20*time.Second))

	t.Run("denied", func(t *testing.T) {
		// Another host whose client CSR is denied: the kubelet gives up
		// with a clear error, and kube-log-runner passes its exit code on.
		h2, err := sim.New(t.TempDir(), sim.Options{})
		require.NoError(t, err)
		d := node{h: h2, name: "win-denied"}
		d.put(t, `C:\k\bootstrap-kubeconfig`, bkc, 0o600)
		require.NoError(t, os.MkdirAll(d.local(t, `C:\var\log\kubelet`), 0o755))
		cmd := exec.Command(bins["logrunner"], `-log-file=C:\var\log\kubelet\kubelet.log`, bins["kubelet"],
			`--bootstrap-kubeconfig=C:\k\bootstrap-kubeconfig`, `--kubeconfig=C:\k\kubeconfig`, "--hostname-override="+d.name, "--node-ip=10.0.0.6")
		cmd.Env = append(os.Environ(), sim.EnvRoot+"="+h2.Root())
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var csr certificatesv1.CertificateSigningRequest
		require.Eventually(t, func() bool {
			for _, x := range csrsOf(t, c, certificatesv1.KubeAPIServerClientKubeletSignerName) {
				if x.Name != client.Name {
					csr = x
					return true
				}
			}
			return false
		}, 30*time.Second, 50*time.Millisecond)
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue, Reason: "Test", Message: "not this one"})
		_, err = c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{})
		require.NoError(t, err)
		select {
		case err := <-exited:
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 1, exit.ExitCode())
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatal("the kubelet kept running after its CSR was denied")
		}
		b, err := os.ReadFile(d.local(t, `C:\var\log\kubelet\kubelet.log`))
		require.NoError(t, err)
		assert.Regexp(t, `fatal: client CSR node-csr-\S+: .*denied`, string(b))
		t.Logf("kubelet.log:\n%s", b)
	})
}

func readyCond(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func ready(n *corev1.Node) bool { return readyCond(n).Status == corev1.ConditionTrue }

func leafOf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

// childOf finds the one child of pid (the kubelet under kube-log-runner),
// whichever of its threads started it.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	require.NoError(t, err)
	var kids []string
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		kids = append(kids, strings.Fields(string(b))...)
	}
	require.Len(t, kids, 1, "kube-log-runner runs one child")
	child, err := strconv.Atoi(kids[0])
	require.NoError(t, err)
	return child
}
