package kubeadmconfig

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
)

const (
	testToken = "k7q2zd.h3x9w0p5m1r8c4v6"
	testPin   = "sha256:6e3b1a5c1d8f0b2a9c7e4d3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b"
)

// capzWindows is a JoinConfiguration as CABPK renders it (keys sorted,
// taints: null, v1beta4's kubeletExtraArgs list) for CAPZ's Windows flavor
// (templates/flavors/windows: cloud-provider external, the uninitialized
// taint, v=2, the priority class), with the discovery CABPK fills in and
// a node label added to the flavor's arguments.
const capzWindows = `---
apiVersion: kubeadm.k8s.io/v1beta4
caCertPath: /etc/kubernetes/pki/ca.crt
discovery:
  bootstrapToken:
    apiServerEndpoint: capz-win-7f2k9.eastus.cloudapp.azure.com:6443
    caCertHashes:
    - ` + testPin + `
    token: ` + testToken + `
kind: JoinConfiguration
nodeRegistration:
  criSocket: npipe:////./pipe/containerd-containerd
  kubeletExtraArgs:
  - name: cloud-provider
    value: external
  - name: node-labels
    value: node.kubernetes.io/windows-build=10.0.20348,example.com/pool=win
  - name: register-with-taints
    value: node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule
  - name: v
    value: "2"
  - name: windows-priorityclass
    value: ABOVE_NORMAL_PRIORITY_CLASS
  name: capz-win-md-win-x7k2p
  taints:
  - effect: NoSchedule
    key: os
    value: windows
timeouts:
  tlsBootstrap: 5m0s
  discovery: 2m30s
`

func vars(t *testing.T, j *Join) map[string]cty.Value {
	t.Helper()
	out := map[string]cty.Value{}
	for _, v := range j.Variables() {
		out[v.Name] = v.Value
		assert.Equal(t, v.Name == "bootstrap_token", v.Secret, v.Name)
		assert.NotZero(t, v.Range.Start.Line, "%s has a location", v.Name)
	}
	return out
}

func strs(list ...string) cty.Value {
	return stringList(list)
}

func TestParse(t *testing.T) {
	taint := func(k, v, e string) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(k), "value": cty.StringVal(v), "effect": cty.StringVal(e)})
	}
	for name, tc := range map[string]struct {
		src  string
		want map[string]cty.Value
		warn string
	}{
		"CAPZ Windows, v1beta4": {src: capzWindows, want: map[string]cty.Value{
			"cluster_flavour":             cty.StringVal("kubeadm"),
			"api_server_endpoint":         cty.StringVal("capz-win-7f2k9.eastus.cloudapp.azure.com:6443"),
			"bootstrap_token":             cty.StringVal(testToken),
			"ca_cert_hashes":              strs(testPin),
			"unsafe_skip_ca_verification": cty.False,
			"node_name":                   cty.StringVal("capz-win-md-win-x7k2p"),
			"node_labels":                 strs("node.kubernetes.io/windows-build=10.0.20348", "example.com/pool=win"),
			"extra_kubelet_args": strs("--cloud-provider=external", "--register-with-taints=node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule",
				"--v=2", "--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS"),
			"node_taints":       cty.ListVal([]cty.Value{taint("os", "windows", "NoSchedule")}),
			"discovery_timeout": cty.NumberIntVal(150),
		}},
		"v1beta3, kubeletExtraArgs a mapping, node-ip, taints null": {src: `apiVersion: kubeadm.k8s.io/v1beta3
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.0.0.1:6443
    token: ` + testToken + `
    caCertHashes: ["` + testPin + `"]
  tlsBootstrapToken: ` + testToken + `
  timeout: 5m0s
nodeRegistration:
  name: win-01
  criSocket: npipe://./pipe/containerd-containerd
  taints: null
  kubeletExtraArgs:
    node-ip: 10.0.0.21
    node-labels: "a=1, b=2"
    max-pods: "50"
`, want: map[string]cty.Value{
			"cluster_flavour":             cty.StringVal("kubeadm"),
			"api_server_endpoint":         cty.StringVal("10.0.0.1:6443"),
			"bootstrap_token":             cty.StringVal(testToken),
			"ca_cert_hashes":              strs(testPin),
			"unsafe_skip_ca_verification": cty.False,
			"node_name":                   cty.StringVal("win-01"),
			"node_ip":                     cty.StringVal("10.0.0.21"),
			"node_labels":                 strs("a=1", "b=2"),
			"extra_kubelet_args":          strs("--max-pods=50"),
			"discovery_timeout":           cty.NumberIntVal(300),
		}},
		"unsafe, empty taints, other documents ignored": {src: `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
maxPods: 50
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: "[fd00::1]:6443"
    token: ` + testToken + `
    unsafeSkipCAVerification: true
nodeRegistration:
  taints: []
  ignorePreflightErrors: [all]
`, want: map[string]cty.Value{
			"cluster_flavour":             cty.StringVal("kubeadm"),
			"api_server_endpoint":         cty.StringVal("[fd00::1]:6443"),
			"bootstrap_token":             cty.StringVal(testToken),
			"ca_cert_hashes":              cty.ListValEmpty(cty.String),
			"unsafe_skip_ca_verification": cty.True,
			"node_taints":                 cty.ListValEmpty(TaintType),
		}, warn: "Document ignored|Preflight errors not ignored"},
	} {
		t.Run(name, func(t *testing.T) {
			j, diags := Parse("join.yaml", []byte(tc.src))
			require.False(t, diags.HasErrors(), "%v", diags)
			got := vars(t, j)
			require.Equal(t, len(tc.want), len(got), "%v", got)
			for k, want := range tc.want {
				assert.True(t, want.RawEquals(got[k]), "%s: got %#v, want %#v", k, got[k], want)
			}
			var warns []string
			for _, d := range diags {
				warns = append(warns, d.Summary)
			}
			assert.Equal(t, tc.warn, strings.Join(warns, "|"))
			for _, r := range j.Secrets {
				assert.Equal(t, testToken, string(r.SliceBytes([]byte(tc.src))), "Secrets covers the token exactly")
			}
			assert.NotEmpty(t, j.Secrets)
		})
	}
}

// v4 is a valid v1beta4 JoinConfiguration whose nodeRegistration is body
// (indented by two), discovery fixed.
func v4(nodeRegistration string) string {
	return `apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.0.0.1:6443
    token: ` + testToken + `
    caCertHashes: [` + testPin + `]
nodeRegistration:
` + nodeRegistration
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		src     string
		summary string
		line    int
		column  int
		detail  string
	}{
		"unknown field": {src: v4("  nmae: win-01\n"), summary: "Unknown field", line: 9, column: 3, detail: `Did you mean "name"?`},
		"unknown top-level field": {src: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\nnodeRegistrations: {}\n",
			summary: "Unknown field", line: 3, column: 1},
		"v1beta4 field in v1beta3": {src: "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndryRun: false\n",
			summary: "Unknown field", line: 3, column: 1, detail: "kubeadm.k8s.io/v1beta3"},
		"repeated field": {src: v4("  name: a\n  name: b\n"), summary: "Repeated field", line: 10, column: 3},
		"old apiVersion": {src: "apiVersion: kubeadm.k8s.io/v1beta2\nkind: JoinConfiguration\n",
			summary: "Unsupported apiVersion", line: 1, column: 13},
		"no JoinConfiguration": {src: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n",
			summary: "No JoinConfiguration", line: 1, column: 1},
		"two JoinConfigurations": {src: v4("  name: a\n") + "---\n" + v4("  name: b\n"),
			summary: "Two JoinConfigurations", line: 11, column: 1},
		"no kind": {src: "apiVersion: kubeadm.k8s.io/v1beta4\n", summary: "Not a kubeadm configuration", line: 1, column: 1},
		"file discovery": {src: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  file:\n    kubeConfigPath: /etc/kubernetes/discovery.conf\n",
			summary: "File discovery not supported", line: 5, column: 5},
		"bad discovery timeout": {src: "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  timeout: soon\n",
			summary: "Invalid duration", line: 4, column: 12, detail: "discovery.timeout"},
		"bad criSocket": {src: v4("  criSocket: unix:///var/run/containerd/containerd.sock\n"),
			summary: "Unsupported CRI socket", line: 9, column: 14},
		"missing token": {src: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    unsafeSkipCAVerification: true\n",
			summary: "No bootstrap token", line: 5, column: 5},
		"missing endpoint": {src: "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: " + testToken + "\n    unsafeSkipCAVerification: true\n",
			summary: "No API server endpoint", line: 5, column: 5},
		"endpoint without port": {src: "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: " + testToken + "\n    apiServerEndpoint: 10.0.0.1\n    unsafeSkipCAVerification: true\n",
			summary: "Invalid API server endpoint", line: 6, column: 24},
		"no pins": {src: "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: " + testToken + "\n    apiServerEndpoint: 10.0.0.1:6443\n",
			summary: "No CA certificate hashes", line: 5, column: 5},
		"bad pin": {src: "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: " + testToken + "\n    apiServerEndpoint: 10.0.0.1:6443\n    caCertHashes: [md5:abcd]\n",
			summary: "Invalid CA certificate hash", line: 7, column: 20},
		"different TLS bootstrap token": {src: "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  tlsBootstrapToken: zzzzzz.zzzzzzzzzzzzzzzz\n  bootstrapToken:\n    token: " + testToken + "\n    apiServerEndpoint: 10.0.0.1:6443\n    unsafeSkipCAVerification: true\n",
			summary: "Different TLS bootstrap token", line: 4, column: 22},
		"control plane": {src: v4("  name: a\ncontrolPlane:\n  certificateKey: x\n"), summary: "Control-plane join not supported", line: 11, column: 3},
		"v1beta3 args as a list": {src: strings.Replace(v4("  kubeletExtraArgs:\n  - name: v\n    value: \"2\"\n"), "v1beta4", "v1beta3", 1),
			summary: "Invalid join configuration", line: 10, column: 3, detail: "v1beta4's form"},
		"unquoted number": {src: strings.Replace(v4("  kubeletExtraArgs:\n    v: 2\n"), "v1beta4", "v1beta3", 1),
			summary: "Invalid join configuration", line: 10, column: 8, detail: "quote it"},
		"bad taint effect": {src: v4("  taints:\n  - key: os\n    effect: NoWay\n"), summary: "Invalid taint", line: 10, column: 5},
		"bad node name":    {src: v4("  name: WIN_01\n"), summary: "Invalid node name", line: 9, column: 9},
		"YAML syntax":      {src: "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery: [\n", summary: "Invalid YAML", line: 3, column: 1},
	} {
		t.Run(name, func(t *testing.T) {
			j, diags := Parse("join.yaml", []byte(tc.src))
			require.True(t, diags.HasErrors(), "want an error")
			assert.Nil(t, j)
			d := firstError(diags)
			assert.Equal(t, tc.summary, d.Summary, d.Detail)
			require.NotNil(t, d.Subject, "located")
			assert.Equal(t, "join.yaml", d.Subject.Filename)
			assert.Equal(t, tc.line, d.Subject.Start.Line, "line: %s", d.Detail)
			assert.Equal(t, tc.column, d.Subject.Start.Column, "column: %s", d.Detail)
			assert.Contains(t, d.Detail, tc.detail)
			for _, d := range diags {
				assert.NotContains(t, d.Summary+d.Detail, "h3x9w0p5m1r8c4v6", "the token's secret is never quoted")
				assert.NotContains(t, d.Summary+d.Detail, "zzzzzzzzzzzzzzzz", "nor a TLS bootstrap token")
			}
		})
	}
}

func firstError(diags hcl.Diagnostics) *hcl.Diagnostic {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			return d
		}
	}
	return nil
}

// TestParseBadTokenNotQuoted: a malformed token is refused at its place
// without its text.
func TestParseBadTokenNotQuoted(t *testing.T) {
	const bad = "Hunter2-is-my-password"
	src := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: " + bad + "\n    unsafeSkipCAVerification: true\n"
	_, diags := Parse("join.yaml", []byte(src))
	d := firstError(diags)
	require.NotNil(t, d)
	assert.Equal(t, "Invalid bootstrap token", d.Summary)
	assert.Equal(t, 6, d.Subject.Start.Line)
	assert.Equal(t, 12, d.Subject.Start.Column)
	assert.Equal(t, bad, string(d.Subject.SliceBytes([]byte(src))))
	assert.NotContains(t, d.Detail, bad)
}
