//go:build linux

package main

import (
	"bytes"
	"context"
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

func TestArguments(t *testing.T) {
	exe := build(t)
	root := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--k8s-kubeconfig", `C:\k\kubeconfig`}, root, "--node is required"},
		{[]string{"--node", "n"}, root, "--k8s-kubeconfig is required"},
		{[]string{"--node", "n", "--k8s-kubeconfig", `C:\k\kubeconfig`, "--hybrid-overlay-vxlan-port", "70000"}, root, "cannot be greater than 65535"},
		{[]string{"--node", "n", "--k8s-kubeconfig", `C:\k\kubeconfig`, "--no-such-flag"}, root, "flag provided but not defined: -no-such-flag"},
		{[]string{"--node", "n", "--k8s-kubeconfig", `C:\k\kubeconfig`}, "", "runs only as a service of the simulated Windows host"},
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
// hybrid-overlay-node, with node credentials against a real API server
// where the test plays the OVN-Kubernetes master.
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
	t.Setenv(envNetworkDelay, delay.String()) // the simulation passes its environment on

	args := []string{"--node", nodeName, "--k8s-kubeconfig", `C:\k\kubeconfig`, "--windows-service",
		"--logfile", `C:\var\log\hybrid-overlay\hybrid-overlay.log`, "--hybrid-overlay-vxlan-port", "4800"}
	require.NoError(t, h.CreateService(ctx, host.ServiceConfig{Name: "hybrid-overlay-node",
		BinaryPath: `C:\k\hybrid-overlay-node.exe`, Args: args}))
	require.NoError(t, h.StartService(ctx, "hybrid-overlay-node"))
	logPath, err := h.LocalPath(`C:\var\log\hybrid-overlay\hybrid-overlay.log`)
	require.NoError(t, err)
	logText := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	// No subnet yet: it waits and touches nothing.
	require.Eventually(t, func() bool { return strings.Contains(logText(), "no "+subnetAnnotation+" annotation yet") },
		30*time.Second, 50*time.Millisecond, logText())
	nets, err := h.HNSNetworks(ctx)
	require.NoError(t, err)
	assert.Empty(t, nets)

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
	assert.Contains(t, logText(), `argv ["--node" "win-ho-1" "--k8s-kubeconfig" "C:\\k\\kubeconfig"`)
	assert.Contains(t, logText(), "(VXLAN port 4800)")

	// A restart finds its networks: no duplicates, same IDs. Run by hand
	// this time to see its exit status on SIGTERM.
	require.NoError(t, h.StopService(ctx, "hybrid-overlay-node", 10*time.Second))
	assert.Contains(t, logText(), "stopping on signal")
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), sim.EnvRoot+"="+h.Root())
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return strings.Count(logText(), " ready: ") == 2 }, 30*time.Second, 20*time.Millisecond, logText())
	assert.Equal(t, first, networks())
	assert.Contains(t, out.String(), "reusing HNS network "+overlayNetwork)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), out.String())

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
}
