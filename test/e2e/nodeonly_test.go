//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
)

// successFile is Cluster API's bootstrap contract on Windows.
const successFile = `C:\run\cluster-api\bootstrap-success.complete`

// TestNodeOnlyJoin: a join as Cluster API runs one from cloudbase-init,
// with no kubeconfig anywhere (KUBECONFIG unset, no kubeconfig variable,
// an empty home): only the API server endpoint, a kubeadm bootstrap token
// and the CA's pin. The cluster is a kubeadm test bed with
// kube-controller-manager's real bootstrapsigner (it signs cluster-info
// for each token), tokencleaner and csrapproving controllers.
func TestNodeOnlyJoin(t *testing.T) {
	env := start(t, harness.Options{Hosts: 2, Network: harness.NetworkHostProcess})
	h := env.Hosts[0]
	ctx := context.Background()
	n := newNodeOnly(t, env, h)
	token := n.kubeadmToken(t, 15*time.Minute)
	// image-builder's Windows images carry a kubelet service (nssm running
	// kubeadm's StartKubelet.ps1); join takes it over only when asked.
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		return s.CreateService(ctx, host.ServiceConfig{Name: "kubelet", BinaryPath: `C:\k\nssm.exe`,
			Description: "Kubernetes node agent", StartType: host.StartManual})
	}))
	adopt := []string{"-var", "adopt_kubelet=true"}
	before, err := env.Snapshot(h)
	require.NoError(t, err)

	refused := func(t *testing.T, r *harness.Result, want ...string) {
		t.Helper()
		assert.Equal(t, 1, r.ExitCode, "refused\n%s", r.Failures())
		for _, w := range want {
			assert.Contains(t, r.Stdout+r.Stderr, w)
		}
		assert.NotContains(t, r.Stdout+r.Stderr, strings.Split(token, ".")[1], "the token's secret is never printed")
		now, err := env.Snapshot(h)
		require.NoError(t, err)
		assert.Equal(t, before, now, "refused before any host change (and no success file)")
	}

	t.Run("refusals", func(t *testing.T) {
		t.Run("the image's kubelet, not adopted", func(t *testing.T) {
			refused(t, n.run(t, "apply", "-var", "bootstrap_token="+token), "Service kubelet is not wsu's")
		})
		t.Run("wrong pin", func(t *testing.T) {
			refused(t, n.run(t, "apply", "-var", "bootstrap_token="+token, "-var", `ca_cert_hashes=["sha256:`+strings.Repeat("0", 64)+`"]`),
				"ca_cert_hashes")
		})
		t.Run("no pin", func(t *testing.T) {
			refused(t, n.run(t, "apply", "-var", "bootstrap_token="+token, "-var", "ca_cert_hashes=[]"), "unsafe_skip_ca_verification")
		})
		t.Run("unknown token", func(t *testing.T) {
			refused(t, n.run(t, "apply", "-var", "bootstrap_token=abcdef.0123456789abcdef"), "abcdef")
		})
		t.Run("expired token", func(t *testing.T) {
			expired := n.expiredToken(t)
			refused(t, n.run(t, "apply", "-var", "bootstrap_token="+expired), strings.Split(expired, ".")[0])
		})
		t.Run("tampered cluster-info", func(t *testing.T) {
			mitm := newClusterInfoTamperer(t, env.Cluster)
			refused(t, n.run(t, "apply", "-var", "bootstrap_token="+token, "-var", "api_server_endpoint="+mitm), "signature")
		})
		t.Run("a Ready Node holds the name", func(t *testing.T) {
			_, err := env.Cluster.CreateNode(ctx, h.NodeName, map[string]string{"kubernetes.io/os": "windows"})
			require.NoError(t, err)
			require.NoError(t, env.Cluster.SetNodeReady(ctx, h.NodeName))
			refused(t, n.run(t, "apply", append(adopt, "-var", "bootstrap_token="+token)...), "A Ready Node named "+h.NodeName+" exists")
			require.NoError(t, env.Cluster.Client.CoreV1().Nodes().Delete(ctx, h.NodeName, metav1.DeleteOptions{}))
		})
	})
	if t.Failed() {
		return
	}

	t.Run("join", func(t *testing.T) {
		plan := n.run(t, "plan", append(adopt, "-var", "bootstrap_token="+token)...)
		requireSuccess(t, plan)
		assert.Contains(t, plan.Stdout, n.Pin, "the plan shows the CA's pin")
		assert.Contains(t, plan.Stdout, "Node-only join: not run", "the plan says which steps need rights the token lacks")
		assert.Contains(t, plan.Stdout, `adopting kubelet (binary C:\\k\\nssm.exe)`, "preflight says it adopts the image's kubelet")
		assert.Contains(t, serviceChange(plan, h.Name, "kubelet service"), `path: "C:\\k\\nssm.exe" -> "C:\\k\\kube-log-runner.exe"`,
			"the plan shows what changes in the adopted service")
		kubeletConf := serviceChange(plan, h.Name, "kubelet config")
		assert.Contains(t, kubeletConf, "sha256:", "the kubelet configuration read with the token, in the plan")
		assert.NotContains(t, kubeletConf, "(sensitive)", "nothing derives from the token used to read it")
		r := n.run(t, "apply", append(adopt, "-var", "bootstrap_token="+token)...)
		requireSuccess(t, r)

		node, err := env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, nodeIsReady(node), "Node Ready")
		csrs, err := env.Cluster.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var client, serving []string
		for _, c := range csrs.Items {
			switch c.Spec.SignerName {
			case certificatesv1.KubeAPIServerClientKubeletSignerName:
				if c.Spec.Username == kube.BootstrapUserPrefix+strings.Split(token, ".")[0] {
					client = append(client, approvedBy(&c))
				}
			case certificatesv1.KubeletServingSignerName:
				serving = append(serving, c.Name)
			}
		}
		assert.Equal(t, []string{"AutoApproved"}, client, "the client CSR approved by kube-controller-manager's csrapproving controller")
		assert.Empty(t, serving, "serverTLSBootstrap false: the kubelet signs its own serving certificate")
		assert.Empty(t, wsuTokens(t, env), "wsu minted no token")
		require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
			boot, err := s.Stat(ctx, `C:\k\bootstrap-kubeconfig`)
			if err != nil {
				return err
			}
			assert.False(t, boot.Exists, "the bootstrap kubeconfig is gone once the kubelet has its certificate")
			ok, err := s.ReadFile(ctx, successFile, 1024)
			assert.Equal(t, "success\n", string(ok), "Cluster API's success file")
			return err
		}))
	})
	if t.Failed() {
		return
	}

	t.Run("CABPK user data through cloudbase-init", func(t *testing.T) {
		h2 := env.Hosts[1]
		raw, err := os.ReadFile("testdata/cabpk-windows-userdata.yaml")
		require.NoError(t, err)
		// CABPK fills in the discovery at reconcile time (a token per
		// Machine, the cluster's endpoint and CA pin); the rendering
		// test/capirender keeps holds stand-in values for them.
		fill := map[string]string{
			"capz-win-7f2k9.eastus.cloudapp.azure.com:6443":                           n.Endpoint,
			"k7q2zd.h3x9w0p5m1r8c4v6":                                                 n.kubeadmToken(t, 15*time.Minute),
			"sha256:6e3b1a5c1d8f0b2a9c7e4d3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b": n.Pin,
		}
		userData := string(raw)
		for rendered, real := range fill {
			require.Contains(t, userData, rendered)
			userData = strings.ReplaceAll(userData, rendered, real)
		}
		ci := &cloudbaseInit{env: env, host: h2, meta: map[string]string{"local_hostname": h2.NodeName}, home: n.Home}
		// The control: without the template's PATH line, CABPK's kubeadm
		// join would be the image's kubeadm, which the stand-in refuses.
		pathLine := "  - \"set \\\"PATH=C:\\\\wsu;%PATH%\\\"\"\n"
		require.Contains(t, userData, pathLine)
		noShim := &cloudbaseInit{env: env, host: h2, meta: map[string]string{"local_hostname": h2.NodeName}, home: n.Home}
		require.ErrorContains(t, noShim.run(ctx, strings.Replace(userData, pathLine, "", 1)), "kubeadm is not on PATH")
		require.Empty(t, noShim.ran)

		require.NoError(t, ci.run(ctx, userData))
		require.Len(t, ci.ran, 1, "CABPK's kubeadm join ran wsu, through the template's shim")

		node, err := env.Cluster.Client.CoreV1().Nodes().Get(ctx, h2.NodeName, metav1.GetOptions{})
		require.NoError(t, err, "the Node registered under the name from the JoinConfiguration")
		assert.True(t, nodeIsReady(node), "Node Ready")
		assert.Equal(t, "10.0.20348", node.Labels["node.kubernetes.io/windows-build"], "kubeletExtraArgs' node-labels")
		// kubeletExtraArgs' register-with-taints wins over the flag made
		// from nodeRegistration.taints, as kubeadm's extra args override
		// the flags it derives.
		assert.Contains(t, node.Spec.Taints, corev1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			"the template's kubeletExtraArgs")
		require.NoError(t, env.WithSim(h2, func(s *sim.Host) error {
			ok, err := s.ReadFile(ctx, successFile, 1024)
			assert.True(t, strings.HasPrefix(string(ok), "success"), "Cluster API's success file")
			return err
		}))
	})

	t.Run("rerun", func(t *testing.T) {
		r := n.run(t, "apply", append(adopt, "-var", "bootstrap_token="+token)...)
		requireSuccess(t, r)
		assert.Empty(t, r.Changed(h.Name), "a re-run changes nothing")
	})
}

// nodeOnly runs wsu as a node holding only a bootstrap token would.
type nodeOnly struct {
	*harness.NodeOnly
	env *harness.Env
}

func newNodeOnly(t *testing.T, env *harness.Env, h *harness.Host) *nodeOnly {
	t.Helper()
	n, err := env.NodeOnly(h, t.TempDir(), "discovery_timeout = 5\ncsr_timeout = 180\nready_timeout = 180\n")
	require.NoError(t, err)
	return &nodeOnly{NodeOnly: n, env: env}
}

// run runs `wsu VERB join` as the node would (harness.NodeOnly.Cmd).
func (n *nodeOnly) run(t *testing.T, verb string, args ...string) *harness.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if verb == "apply" {
		args = append(args, "--auto-approve")
	}
	r, err := harness.RunCmdJSON(n.Cmd(ctx, verb, args...), nil)
	require.NoError(t, err)
	return r
}

// kubeadmToken is harness.Env.KubeadmToken's token.
func (n *nodeOnly) kubeadmToken(t *testing.T, ttl time.Duration) string {
	t.Helper()
	tok, err := n.env.KubeadmToken(context.Background(), ttl)
	require.NoError(t, err)
	return tok.String()
}

// expiredToken is a kubeadm token that expired: tokencleaner deleted its
// Secret and the bootstrapsigner its signature.
func (n *nodeOnly) expiredToken(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	tok, err := kube.CreateBootstrapToken(ctx, n.env.Cluster.Client, kube.TokenRequest{TTL: time.Hour, Group: kube.KubeadmNodeTokenGroup})
	require.NoError(t, err)
	secrets := n.env.Cluster.Client.CoreV1().Secrets(kube.BootstrapTokenNamespace)
	s, err := secrets.Get(ctx, tok.SecretName(), metav1.GetOptions{})
	require.NoError(t, err)
	s.Data["expiration"] = []byte(time.Now().Add(-time.Minute).UTC().Format(time.RFC3339))
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := secrets.Get(ctx, tok.SecretName(), metav1.GetOptions{})
		signed, serr := n.env.SignedFor(ctx, tok.ID)
		require.NoError(t, serr)
		return apierrors.IsNotFound(err) && !signed
	}, 2*time.Minute, 200*time.Millisecond, "tokencleaner deletes the expired token, and its signature goes")
	return tok.String()
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// newClusterInfoTamperer is a man in the middle, a stand-in for a fault no
// real part produces: a TLS endpoint on 127.0.0.1 that relays to the API
// server but swaps the CA in cluster-info's kubeconfig for one of its own,
// keeping the bootstrapsigner's signatures. It returns its host:port.
func newClusterInfoTamperer(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	target, err := url.Parse(c.Config.Host)
	require.NoError(t, err)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Header.Set("Accept", "application/json") // the man in the middle edits JSON
	}}
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the man in the middle
	srv := httptest.NewUnstartedServer(proxy)
	srv.Listener.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv.Listener = l
	srv.StartTLS()
	t.Cleanup(srv.Close)
	mitmCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	proxy.ModifyResponse = func(resp *http.Response) error {
		if !strings.HasSuffix(resp.Request.URL.Path, "/namespaces/kube-public/configmaps/cluster-info") {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var cm corev1.ConfigMap
		if err := json.Unmarshal(body, &cm); err != nil {
			return err
		}
		cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
		if err != nil {
			return err
		}
		for _, cl := range cfg.Clusters {
			cl.CertificateAuthorityData = mitmCA
		}
		kc, err := clientcmd.Write(*cfg)
		if err != nil {
			return err
		}
		cm.Data["kubeconfig"] = string(kc)
		body, err = json.Marshal(&cm)
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
		return nil
	}
	return l.Addr().String()
}

// serviceChange is a task's planned change, one "name: old -> new" line per
// field ("" when it plans none).
func serviceChange(r *harness.Result, hostName, task string) string {
	var b strings.Builder
	for _, ev := range r.Tasks(hostName) {
		if ev.Task != task || ev.Change == nil {
			continue
		}
		for _, f := range ev.Change.Fields {
			fmt.Fprintf(&b, "%s: %s -> %s\n", f.Name, f.Old, f.New)
		}
	}
	return b.String()
}
