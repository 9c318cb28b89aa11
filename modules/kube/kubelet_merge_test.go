package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// kubeadmKubelet is a KubeletConfiguration as kubeadm 1.31 uploads it to
// kube-system/kubelet-config (clusterDomain left out, to be filled), plus a
// field wsu does not know.
const kubeadmKubelet = `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
kind: KubeletConfiguration
maxPods: 110
resolvConf: /run/systemd/resolve/resolv.conf
rotateCertificates: true
staticPodPath: /etc/kubernetes/manifests
futureKubeletField:
  nested: 0.25
`

// decode reads rendered YAML back, for assertions by field.
func decode(t *testing.T, text string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(text), &m))
	return m
}

func TestWindowsKubeletConfig(t *testing.T) {
	for _, tt := range []struct {
		name       string
		in         windowsKubelet
		wantDNS    []any
		wantDomain string
	}{
		{name: "cluster's DNS, domain from dnsDomain",
			in:      windowsKubelet{defaultDomain: "example.internal", defaultDNS: []string{"10.96.0.99"}, clientCAFile: kubeletCA},
			wantDNS: []any{"10.96.0.10"}, wantDomain: "example.internal"},
		{name: "explicit DNS wins",
			in:      windowsKubelet{defaultDomain: "cluster.local", clusterDNS: []string{"10.0.0.53", "fd00::a"}, clientCAFile: kubeletCA, serverTLSBootstrap: true},
			wantDNS: []any{"10.0.0.53", "fd00::a"}, wantDomain: "cluster.local"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := parseKubeletDoc(kubeadmKubelet)
			require.NoError(t, err)
			text, err := windowsKubeletConfig(doc, tt.in).render()
			require.NoError(t, err)
			got := decode(t, text)
			assert.Equal(t, tt.wantDNS, got["clusterDNS"])
			assert.Equal(t, tt.wantDomain, got["clusterDomain"])
			assertWindowsKubelet(t, got)
			assert.Equal(t, tt.in.serverTLSBootstrap, got["serverTLSBootstrap"], "a serving CSR only when asked for")
		})
	}
}

// assertWindowsKubelet checks what every rendered configuration holds:
// kubeadm's Windows mutation, the Windows-required and wsu fields, and the
// cluster's own fields, unknown ones included.
func assertWindowsKubelet(t *testing.T, got map[string]any) {
	t.Helper()
	assert.Equal(t, "", got["resolvConf"], "kubeadm's Windows mutation: no resolv.conf")
	assert.Equal(t, `C:\etc\kubernetes\manifests`, got["staticPodPath"], "drive before a Unix-absolute path")
	assert.Equal(t, false, got["cgroupsPerQOS"])
	assert.Equal(t, []any{"none"}, got["enforceNodeAllocatable"])
	assert.Equal(t, "npipe://./pipe/containerd-containerd", got["containerRuntimeEndpoint"])
	assert.Equal(t, true, got["rotateCertificates"])
	assert.Equal(t, map[string]any{
		"anonymous": map[string]any{"enabled": false},
		"webhook":   map[string]any{"cacheTTL": "0s", "enabled": true},
		"x509":      map[string]any{"clientCAFile": kubeletCA},
	}, got["authentication"], "wsu's kubelet CA; the cluster's webhook settings kept")
	assert.Equal(t, float64(110), got["maxPods"], "the cluster's setting, not WMCO's 250")
	assert.Equal(t, "systemd", got["cgroupDriver"])
	assert.Equal(t, map[string]any{"nested": 0.25}, got["futureKubeletField"], "unknown fields pass through")
	assert.Equal(t, "KubeletConfiguration", got["kind"])
	assert.Equal(t, "kubelet.config.k8s.io/v1beta1", got["apiVersion"])
}

// The same input always renders the same bytes, and rendering is stable
// under a second pass (what a re-run compares against).
func TestKubeletConfigDeterministic(t *testing.T) {
	w := windowsKubelet{defaultDomain: "cluster.local", clientCAFile: kubeletCA}
	render := func(text string) string {
		doc, err := parseKubeletDoc(text)
		require.NoError(t, err)
		out, err := windowsKubeletConfig(doc, w).render()
		require.NoError(t, err)
		return out
	}
	first := render(kubeadmKubelet)
	for range 20 {
		require.Equal(t, first, render(kubeadmKubelet))
	}
	assert.Equal(t, first, render(first), "a rendered config is a fixed point")
	assert.Contains(t, first, "apiVersion: kubelet.config.k8s.io/v1beta1\nauthentication:\n", "keys sorted")
	assert.Contains(t, first, "    clientCAFile: C:\\k\\kubelet-ca.crt\n", "a Windows path stays plain")
	assert.Contains(t, first, "clusterDNS:\n- 10.96.0.10\n")
}

func TestParseKubeletDoc(t *testing.T) {
	for _, tt := range []struct{ text, err string }{
		{text: "", err: "empty"},
		{text: "kind: KubeProxyConfiguration\n", err: `kind is "KubeProxyConfiguration"`},
		{text: "- a\n", err: "cannot unmarshal"},
		{text: `{"kind": "KubeletConfiguration", "maxPods": 12345678901234567}`},
	} {
		doc, err := parseKubeletDoc(tt.text)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.text)
			continue
		}
		require.NoError(t, err)
		out, err := doc.render()
		require.NoError(t, err)
		assert.Contains(t, out, "maxPods: 12345678901234567", "numbers keep their digits")
	}
}

func TestPrefixDrive(t *testing.T) {
	doc := kubeletDoc{"staticPodPath": `D:\already`, "authentication": map[string]any{"x509": map[string]any{"clientCAFile": "/a/b.crt"}}}
	mutateForWindows(doc, "C:")
	assert.Equal(t, `D:\already`, doc["staticPodPath"], "a Windows path stays")
	assert.Equal(t, `C:\a\b.crt`, doc["authentication"].(map[string]any)["x509"].(map[string]any)["clientCAFile"])
	assert.Equal(t, "", doc["resolvConf"])
}
