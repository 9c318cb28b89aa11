//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/test/kubetest"
)

var built struct {
	once sync.Once
	dir  string
	out  []byte
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// build compiles the stand-in once per test run.
func build(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "hybridoverlay-standin-"); built.err == nil {
			built.out, built.err = exec.Command("go", "build", "-o", built.dir, ".").CombinedOutput()
		}
	})
	require.NoError(t, built.err, "go build: %s", built.out)
	return filepath.Join(built.dir, "hybridoverlay")
}

// identityArgs are the per-node identity flags, as the playbook passes them.
var identityArgs = []string{"--node", "n", "--bootstrap-kubeconfig=C:\\k\\kubeconfig", "--cert-dir=C:\\k\\cni\\config",
	"--cert-duration=24h", "--k8s-cacert", `C:\k\bootstrap-ca.crt`, "--windows-service", "--k8s-apiserver=https://127.0.0.1:6443"}

func TestArguments(t *testing.T) {
	exe := build(t)
	root := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{identityArgs[2:], root, "--node is required"},
		{[]string{"--node", "n", "--cert-dir", `C:\k\cni\config`}, root, "--bootstrap-kubeconfig and --cert-dir are required"},
		{[]string{"--node", "n", "--k8s-kubeconfig", `C:\k\kubeconfig`}, root, "flag provided but not defined: -k8s-kubeconfig"},
		{append(identityArgs[:8:8], "--k8s-apiserver=http://127.0.0.1:1"), root, "--k8s-apiserver (https) and --k8s-cacert are required"},
		{append(identityArgs, "--hybrid-overlay-vxlan-port", "70000"), root, "cannot be greater than 65535"},
		{append(identityArgs, "--no-such-flag"), root, "flag provided but not defined: -no-such-flag"},
		{identityArgs, "", "runs only as a service of the simulated Windows host"},
	} {
		cmd := exec.Command(exe, tc.args...)
		cmd.Env = append(os.Environ(), sim.EnvRoot+"="+tc.env)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%v: %v\n%s", tc.args, err, out)
		assert.Equal(t, 2, exit.ExitCode(), "%v", tc.args)
		assert.Contains(t, string(out), tc.want, "%v", tc.args)
	}
}

// TestAgainstAPIServer runs the stand-in as the simulated host's service
// hybrid-overlay-node against a real API server, where the test bed plays
// the CSR signer and OVN-Kubernetes' identity approver and the test the
// OVN-Kubernetes master: it gets its own certificate with the kubelet's
// credentials, then works as system:ovn-node:<node>.
func TestAgainstAPIServer(t *testing.T) {
	const (
		nodeName = "win-ho-1"
		nodeIP   = "127.0.0.42"
		subnet   = "10.132.1.0/24"
		delay    = 300 * time.Millisecond
	)
	exe := build(t)
	c := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go c.RunParts(ctx, kubetest.PartsOptions{NoOVNMaster: true})
	_, err := c.CreateNode(ctx, nodeName, nil)
	require.NoError(t, err)
	n, err := c.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	require.NoError(t, err)
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: nodeIP}}
	_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The kubelet's own credentials, as C:\k\kubeconfig holds after its
	// client CSR was signed: certificate data embedded.
	kubeconfig, err := c.User("system:node:"+nodeName, "system:nodes")
	require.NoError(t, err)
	kc, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	require.Contains(t, string(kc), "client-certificate-data")

	h, err := sim.New(t.TempDir(), sim.Options{IPv4: nodeIP})
	require.NoError(t, err)
	bin, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, h.MkdirAll(ctx, `C:\k`, 0o755))
	require.NoError(t, h.WriteFile(ctx, `C:\k\hybrid-overlay-node.exe`, bytes.NewReader(bin), 0o755))
	require.NoError(t, h.WriteFile(ctx, `C:\k\kubeconfig`, bytes.NewReader(kc), 0o600))
	require.NoError(t, h.WriteFile(ctx, `C:\k\bootstrap-ca.crt`, bytes.NewReader(c.Config.CAData), 0o644))
	t.Setenv(envNetworkDelay, delay.String()) // the simulation passes its environment on

	args := []string{"--node", nodeName, "--bootstrap-kubeconfig=C:\\k\\kubeconfig", "--cert-dir=C:\\k\\cni\\config", "--cert-duration=1h",
		"--windows-service", "--logfile", `C:\var\log\hybrid-overlay\hybrid-overlay.log`,
		"--k8s-apiserver=" + c.Config.Host, "--k8s-cacert", `C:\k\bootstrap-ca.crt`, "--hybrid-overlay-vxlan-port", "4800"}
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "hybrid-overlay-node",
		BinaryPath: `C:\k\hybrid-overlay-node.exe`, Args: args}))
	require.NoError(t, h.StartService(ctx, "hybrid-overlay-node"))
	logPath, err := h.LocalPath(`C:\var\log\hybrid-overlay\hybrid-overlay.log`)
	require.NoError(t, err)
	logText := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	// No subnet yet: it gets its certificate, waits and touches nothing.
	require.Eventually(t, func() bool { return strings.Contains(logText(), "no "+subnetAnnotation+" annotation yet") },
		30*time.Second, 50*time.Millisecond, logText())
	nets, err := h.HNSNetworks(ctx)
	require.NoError(t, err)
	assert.Empty(t, nets)
	checkIdentity(t, c, h, nodeName)

	annotated := time.Now()
	require.NoError(t, c.AnnotateNode(ctx, nodeName, subnetAnnotation, subnet))
	networks := func() map[string]host.HNSNetwork {
		nets, err := h.HNSNetworks(ctx)
		require.NoError(t, err)
		m := map[string]host.HNSNetwork{}
		for _, n := range nets {
			m[n.Name] = n
		}
		assert.Len(t, m, len(nets), "duplicate network names: %v", nets)
		return m
	}
	require.Eventually(t, func() bool { return len(networks()) == 2 }, 30*time.Second, 20*time.Millisecond, logText())
	assert.GreaterOrEqual(t, time.Since(annotated), delay, "the networks came before the reconfiguration delay")
	first := networks()
	assert.Equal(t, host.HNSNetwork{ID: first[baseNetwork].ID, Name: baseNetwork, Type: "Overlay", ManagementIP: nodeIP,
		Subnets: []string{"100.64.0.0/30"}}, first[baseNetwork])
	assert.Equal(t, host.HNSNetwork{ID: first[overlayNetwork].ID, Name: overlayNetwork, Type: "Overlay", ManagementIP: nodeIP,
		Subnets: []string{subnet}}, first[overlayNetwork])

	mac := func() string {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		require.NoError(t, err)
		return n.Annotations[gatewayMACAnnotation]
	}
	require.Eventually(t, func() bool { return mac() != "" }, 30*time.Second, 50*time.Millisecond, logText())
	assert.Equal(t, "00-15-5D-84-01-01", mac())
	assert.Contains(t, logText(), `argv ["--node" "win-ho-1" "--bootstrap-kubeconfig=C:\\k\\kubeconfig"`)
	// The ready line follows the annotation: the MAC can be seen before it.
	require.Eventually(t, func() bool { return strings.Contains(logText(), "ready: node") }, 30*time.Second, 20*time.Millisecond, logText())
	assert.Contains(t, logText(), "(VXLAN port 4800)")

	// A restart finds its networks and its certificate: no duplicates,
	// same IDs, no second CSR. The kubelet's credentials are replaced by a
	// user with no rights at all: the stand-in reads and annotates the
	// Node as its own identity. Run by hand this time to see its exit
	// status on SIGTERM.
	require.NoError(t, h.StopService(ctx, "hybrid-overlay-node", 10*time.Second))
	assert.Contains(t, logText(), "stopping on signal")
	nobody, err := c.User("nobody")
	require.NoError(t, err)
	nb, err := os.ReadFile(nobody)
	require.NoError(t, err)
	require.NoError(t, h.WriteFile(ctx, `C:\k\kubeconfig`, bytes.NewReader(nb), 0o600))
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), sim.EnvRoot+"="+h.Root())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return strings.Count(logText(), " ready: ") == 2 }, 30*time.Second, 20*time.Millisecond, logText())
	assert.Equal(t, first, networks())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), out.String())
	// Read once the process is gone: its output is copied in by exec's goroutine.
	assert.Contains(t, out.String(), "reusing HNS network "+overlayNetwork)

	// A new subnet replaces the overlay network; the base one stays.
	require.NoError(t, c.AnnotateNode(ctx, nodeName, subnetAnnotation, "10.132.7.0/24"))
	require.NoError(t, h.StartService(ctx, "hybrid-overlay-node"))
	require.Eventually(t, func() bool { return strings.Count(logText(), " ready: ") == 3 }, 30*time.Second, 20*time.Millisecond, logText())
	now := networks()
	assert.Len(t, now, 2)
	assert.Equal(t, first[baseNetwork], now[baseNetwork])
	assert.Equal(t, []string{"10.132.7.0/24"}, now[overlayNetwork].Subnets)
	assert.NotEqual(t, first[overlayNetwork].ID, now[overlayNetwork].ID)
	assert.Equal(t, "00-15-5D-84-07-01", mac())
	require.NoError(t, h.StopService(ctx, "hybrid-overlay-node", 10*time.Second))
	checkIdentity(t, c, h, nodeName)
}

// checkIdentity: the node has one client CSR for system:ovn-node:<node>,
// requested with the kubelet's identity and approved by the identity
// approver, and its certificate in the cert dir.
func checkIdentity(t *testing.T, c *kubetest.Cluster, h *sim.Host, node string) {
	t.Helper()
	csrs, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var own []certificatesv1.CertificateSigningRequest
	for _, csr := range csrs.Items {
		if csr.Spec.SignerName == certificatesv1.KubeAPIServerClientSignerName {
			own = append(own, csr)
		}
	}
	require.Len(t, own, 1, "one CSR for the node's own identity")
	assert.Equal(t, "system:node:"+node, own[0].Spec.Username, "requested with the bootstrap kubeconfig (the kubelet's)")
	require.NotNil(t, own[0].Spec.ExpirationSeconds)
	assert.Equal(t, int32(3600), *own[0].Spec.ExpirationSeconds, "--cert-duration")
	require.NotEmpty(t, own[0].Status.Conditions)
	assert.Equal(t, kubetest.OVNIdentityApprovalReason, own[0].Status.Conditions[0].Reason)

	p, err := h.LocalPath(`C:\k\cni\config\ovnkube-client-current.pem`)
	require.NoError(t, err)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	var cert *x509.Certificate
	for blk, rest := pem.Decode(b); blk != nil; blk, rest = pem.Decode(rest) {
		if blk.Type == "CERTIFICATE" && cert == nil {
			cert, err = x509.ParseCertificate(blk.Bytes)
			require.NoError(t, err)
		}
	}
	require.NotNil(t, cert, "a certificate in %s", p)
	assert.Equal(t, "system:ovn-node:"+node, cert.Subject.CommonName)
	assert.Equal(t, []string{"system:ovn-nodes"}, cert.Subject.Organization)
	assert.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, cert.ExtKeyUsage)
}
