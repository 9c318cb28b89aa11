package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/kube/tokenjoin"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestDiscovery runs k8s_discovery against the real parts a kubeadm
// cluster has: kube-apiserver serving cluster-info to anonymous readers,
// kube-controller-manager's bootstrapsigner signing it for each token and
// its tokencleaner deleting expired ones, and kubeadm init's RBAC
// (kubetest.InitKubeadm). One test bed for every case.
func TestDiscovery(t *testing.T) {
	c := kubetest.Start(t, kubetest.WithKubeadmControllers())
	require.NoError(t, c.InitKubeadm(ctx))
	host := strings.TrimSuffix(c.Config.Host, "/") // https://127.0.0.1:<port>
	endpoint := strings.TrimPrefix(host, "https://")
	pin := testCAPin(t, c.Config.CAData)
	tok := signedToken(t, c, time.Hour)
	m := Discovery{}
	cfg := func(t *testing.T, attrs map[string]cty.Value) modules.Config {
		all := map[string]cty.Value{
			"api_server_endpoint": cty.StringVal(endpoint),
			"token":               cty.StringVal(tok.String()),
			"ca_cert_hashes":      strs(pin),
			"timeout":             cty.NumberIntVal(10),
		}
		for k, v := range attrs {
			all[k] = v
		}
		return cfgFor(t, m, all)
	}
	// refused plans the task and requires one error, at attr, that names
	// no secret.
	refused := func(t *testing.T, cfg modules.Config, summary, attr string) *hcl.Diagnostic {
		t.Helper()
		p := plan(t, m, cfg)
		require.Len(t, p.Diagnostics, 1, "%v", p.Diagnostics)
		d := requireDiag(t, p.Diagnostics, cfg, summary, attr)
		assert.NotContains(t, d.Detail, tok.Secret)
		assert.Nil(t, p.Change)
		return d
	}

	t.Run("pinned", func(t *testing.T) {
		cfg := cfg(t, nil)
		p := plan(t, m, cfg)
		require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
		assert.Nil(t, p.Change, "a read: never a change")
		res := p.Result
		assert.Equal(t, host, res.GetAttr("api_server").AsString())
		assert.Equal(t, c.Config.Host, res.GetAttr("cluster_info_server").AsString(), "as InitKubeadm published it")
		assert.Equal(t, string(c.Config.CAData), res.GetAttr("ca").AsString())
		assert.Equal(t, pin, res.GetAttr("ca_cert_hash").AsString())
		assert.Equal(t, tok.ID, res.GetAttr("token_id").AsString())
		assert.Equal(t, "system:bootstrap:"+tok.ID, res.GetAttr("requester").AsString())
		assert.Equal(t, host+", CA "+pin+", pinned", res.GetAttr("summary").AsString())
		a := apply(t, m, cfg, nil)
		require.False(t, a.Diagnostics.HasErrors(), "%v", a.Diagnostics)
		assert.True(t, a.Result.RawEquals(res), "apply reads what plan read")

		// The bootstrap kubeconfig reads what kubeadm's Roles give the
		// token, as the token and nothing more.
		kc := bootstrapClient(t, res.GetAttr("bootstrap_kubeconfig").AsString())
		cm, err := kc.CoreV1().ConfigMaps("kube-system").Get(ctx, kubetest.KubeletConfigMap, metav1.GetOptions{})
		require.NoError(t, err, "kubeadm:kubelet-config lets the node token read it")
		assert.Equal(t, kubetest.KubeletConfiguration(), cm.Data["kubelet"])
		who, err := kc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, "system:bootstrap:"+tok.ID, who.Status.UserInfo.Username)
		assert.Contains(t, who.Status.UserInfo.Groups, kube.KubeadmNodeTokenGroup)
		_, err = kc.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "a token reads no Secrets: %v", err)
	})

	t.Run("https URL endpoint", func(t *testing.T) {
		p := plan(t, m, cfg(t, map[string]cty.Value{"api_server_endpoint": cty.StringVal(c.Config.Host)}))
		require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
		assert.Equal(t, host, p.Result.GetAttr("api_server").AsString(), "the URL's trailing / dropped")
	})

	t.Run("wrong pin", func(t *testing.T) {
		other := "sha256:" + strings.Repeat("0", 64)
		d := refused(t, cfg(t, map[string]cty.Value{"ca_cert_hashes": strs(other)}), "Cluster CA does not match ca_cert_hashes", "ca_cert_hashes")
		assert.Contains(t, d.Detail, pin, "names the key it found")
	})

	t.Run("one of several pins", func(t *testing.T) {
		p := plan(t, m, cfg(t, map[string]cty.Value{"ca_cert_hashes": strs("sha256:"+strings.Repeat("1", 64), strings.ToUpper(pin))}))
		require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
		assert.Equal(t, pin, p.Result.GetAttr("ca_cert_hash").AsString())
	})

	t.Run("null timeout and unsafe skip", func(t *testing.T) {
		p := plan(t, m, cfg(t, map[string]cty.Value{"timeout": cty.NullVal(cty.Number), "unsafe_skip_ca_verification": cty.NullVal(cty.Bool)}))
		require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
		assert.Equal(t, pin, p.Result.GetAttr("ca_cert_hash").AsString())
	})

	t.Run("no pins", func(t *testing.T) {
		d := refused(t, cfg(t, map[string]cty.Value{"ca_cert_hashes": strs()}), "No CA certificate hashes", "ca_cert_hashes")
		assert.Contains(t, d.Detail, "unsafe_skip_ca_verification")
	})

	t.Run("no pins, unsafe skip", func(t *testing.T) {
		p := plan(t, m, cfg(t, map[string]cty.Value{"ca_cert_hashes": strs(), "unsafe_skip_ca_verification": cty.True}))
		require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
		assert.Equal(t, host+", CA "+pin+", NOT verified (unsafe_skip_ca_verification)", p.Result.GetAttr("summary").AsString())
		assert.Equal(t, string(c.Config.CAData), p.Result.GetAttr("ca").AsString())
	})

	t.Run("unknown token id", func(t *testing.T) {
		d := refused(t, cfg(t, map[string]cty.Value{"token": cty.StringVal("zzzzzz." + tok.Secret), "timeout": cty.NumberIntVal(1)}),
			"Unknown or expired token", "token")
		assert.Contains(t, d.Detail, `"zzzzzz"`)
	})

	t.Run("wrong secret", func(t *testing.T) {
		d := refused(t, cfg(t, map[string]cty.Value{"token": cty.StringVal(tok.ID + ".0000000000000000")}),
			"cluster-info's signature does not verify", "token")
		assert.Contains(t, d.Detail, "altered ConfigMap or a man in the middle")
	})

	t.Run("bad token syntax", func(t *testing.T) {
		d := refused(t, cfg(t, map[string]cty.Value{"token": cty.StringVal(tok.ID + ":" + tok.Secret)}), "Invalid token", "token")
		assert.NotContains(t, d.Detail, tok.ID+":")
	})

	t.Run("expired token", func(t *testing.T) {
		short := signedToken(t, c, 4*time.Second)
		require.Eventually(t, func() bool {
			_, err := c.Client.CoreV1().Secrets("kube-system").Get(ctx, short.SecretName(), metav1.GetOptions{})
			return apierrors.IsNotFound(err) && !signedFor(t, c, short.ID)
		}, time.Minute, 200*time.Millisecond, "the tokencleaner deletes the expired token and the bootstrapsigner drops its signature")
		refused(t, cfg(t, map[string]cty.Value{"token": cty.StringVal(short.String()), "timeout": cty.NumberIntVal(1)}),
			"Unknown or expired token", "token")
	})

	t.Run("playbook", func(t *testing.T) {
		events := runDiscoveryPlaybook(t, []string{
			"api_server_endpoint=" + endpoint,
			"bootstrap_token=" + tok.String(),
			`ca_cert_hashes=["` + pin + `"]`,
		})
		assert.Contains(t, events, `"message":"`+host+`, CA `+pin+`, pinned"`, "the plan shows the server and the CA's pin")
		assert.NotContains(t, events, tok.Secret, "the token is never shown")
	})

	t.Run("tampered cluster-info", func(t *testing.T) {
		mitm := tamperingProxy(t, c)
		d := refused(t, cfg(t, map[string]cty.Value{"api_server_endpoint": cty.StringVal(strings.TrimPrefix(mitm.URL, "https://"))}),
			"cluster-info's signature does not verify", "token")
		assert.Contains(t, d.Detail, "altered ConfigMap or a man in the middle")
	})
}

// signedToken creates a kubeadm node token, as `kubeadm token create`
// does, and waits for the bootstrapsigner to sign cluster-info with it.
func signedToken(t *testing.T, c *kubetest.Cluster, ttl time.Duration) *kube.BootstrapToken {
	t.Helper()
	tok, err := kube.CreateBootstrapToken(ctx, c.Client, kube.TokenRequest{TTL: ttl, Group: kube.KubeadmNodeTokenGroup})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return signedFor(t, c, tok.ID) }, 30*time.Second, 100*time.Millisecond,
		"the bootstrapsigner signs cluster-info for token %s", tok.ID)
	return tok
}

// signedFor reports whether cluster-info carries a signature for id.
func signedFor(t *testing.T, c *kubetest.Cluster, id string) bool {
	cm, err := c.Client.CoreV1().ConfigMaps(kubetest.ClusterInfoNamespace).Get(ctx, kubetest.ClusterInfoName, metav1.GetOptions{})
	require.NoError(t, err)
	_, ok := cm.Data["jws-kubeconfig-"+id]
	return ok
}

func testCAPin(t *testing.T, caPEM []byte) string {
	t.Helper()
	block, _ := pem.Decode(caPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return tokenjoin.CACertHash(cert)
}

// bootstrapClient is a client with nothing but the bootstrap kubeconfig.
func bootstrapClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	rc, err := kube.LoadData([]byte(kubeconfig), "")
	require.NoError(t, err)
	require.Empty(t, rc.CertData, "no client certificate: the token is the credential")
	kc, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return kc
}

// tamperingProxy is a stand-in for a man in the middle on 127.0.0.1, for
// the fault no real part produces: it relays the real cluster-info,
// signatures and all, but swaps the kubeconfig's server for its own.
func tamperingProxy(t *testing.T, c *kubetest.Cluster) *httptest.Server {
	t.Helper()
	upstream := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a man in the middle does not verify
	}}
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := upstream.Get(strings.TrimSuffix(c.Config.Host, "/") + r.URL.Path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var cm corev1.ConfigMap
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &cm) != nil || cm.Data["kubeconfig"] == "" {
			http.Error(w, "not cluster-info", http.StatusBadGateway)
			return
		}
		cm.Data["kubeconfig"] = strings.ReplaceAll(cm.Data["kubeconfig"], c.Config.Host, srv.URL)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cm)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDiscoveryValidate: bad input is found at validate time, before any
// request, at its argument, and never echoes the token.
func TestDiscoveryValidate(t *testing.T) {
	m := Discovery{}
	const token = "abcdef.0123456789abcdef"
	pin := "sha256:" + strings.Repeat("ab", 32)
	tests := []struct {
		name          string
		attrs         map[string]cty.Value
		summary, attr string
	}{
		{"valid", nil, "", ""},
		{"https URL", map[string]cty.Value{"api_server_endpoint": cty.StringVal("https://10.0.0.1:6443")}, "", ""},
		{"IPv6", map[string]cty.Value{"api_server_endpoint": cty.StringVal("[fd00::1]:6443")}, "", ""},
		{"no port", map[string]cty.Value{"api_server_endpoint": cty.StringVal("10.0.0.1")}, "Invalid api_server_endpoint", "api_server_endpoint"},
		{"http URL", map[string]cty.Value{"api_server_endpoint": cty.StringVal("http://10.0.0.1:6443")}, "Invalid api_server_endpoint", "api_server_endpoint"},
		{"URL with path", map[string]cty.Value{"api_server_endpoint": cty.StringVal("https://10.0.0.1:6443/api")}, "Invalid api_server_endpoint", "api_server_endpoint"},
		{"token without secret", map[string]cty.Value{"token": cty.StringVal("abcdef")}, "Invalid token", "token"},
		{"token too long", map[string]cty.Value{"token": cty.StringVal(token + "0")}, "Invalid token", "token"},
		{"token upper case", map[string]cty.Value{"token": cty.StringVal(strings.ToUpper(token))}, "Invalid token", "token"},
		{"pin without format", map[string]cty.Value{"ca_cert_hashes": strs(strings.TrimPrefix(pin, "sha256:"))}, "Invalid ca_cert_hashes", "ca_cert_hashes"},
		{"short pin", map[string]cty.Value{"ca_cert_hashes": strs(pin[:len(pin)-2])}, "Invalid ca_cert_hashes", "ca_cert_hashes"},
		{"not hex", map[string]cty.Value{"ca_cert_hashes": strs("sha256:" + strings.Repeat("zz", 32))}, "Invalid ca_cert_hashes", "ca_cert_hashes"},
		{"one bad of two", map[string]cty.Value{"ca_cert_hashes": strs(pin, "sha1:abc")}, "Invalid ca_cert_hashes", "ca_cert_hashes"},
		{"no pins", map[string]cty.Value{"ca_cert_hashes": strs()}, "No CA certificate hashes", "ca_cert_hashes"},
		{"null pins", map[string]cty.Value{"ca_cert_hashes": cty.NullVal(cty.List(cty.String))}, "No CA certificate hashes", "ca_cert_hashes"},
		{"no pins, unsafe skip", map[string]cty.Value{"ca_cert_hashes": strs(), "unsafe_skip_ca_verification": cty.True}, "", ""},
		{"pins and unsafe skip", map[string]cty.Value{"unsafe_skip_ca_verification": cty.True}, "", ""},
		{"null unsafe skip", map[string]cty.Value{"unsafe_skip_ca_verification": cty.NullVal(cty.Bool)}, "", ""},
		{"no pins, null unsafe skip", map[string]cty.Value{"ca_cert_hashes": strs(), "unsafe_skip_ca_verification": cty.NullVal(cty.Bool)}, "No CA certificate hashes", "ca_cert_hashes"},
		{"null pin", map[string]cty.Value{"ca_cert_hashes": cty.ListVal([]cty.Value{cty.NullVal(cty.String)})}, "Invalid ca_cert_hashes", "ca_cert_hashes"},
		{"null timeout", map[string]cty.Value{"timeout": cty.NullVal(cty.Number)}, "", ""},
		{"zero timeout", map[string]cty.Value{"timeout": cty.NumberIntVal(0)}, "Invalid timeout", "timeout"},
		{"unknown token", map[string]cty.Value{"token": cty.UnknownVal(cty.String)}, "", ""},
		{"unknown pins", map[string]cty.Value{"ca_cert_hashes": cty.UnknownVal(cty.List(cty.String))}, "", ""},
		{"unknown endpoint", map[string]cty.Value{"api_server_endpoint": cty.UnknownVal(cty.String)}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := map[string]cty.Value{
				"api_server_endpoint": cty.StringVal("10.0.0.1:6443"),
				"token":               cty.StringVal(token),
				"ca_cert_hashes":      strs(pin),
			}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, m, attrs)
			diags := m.Validate(modules.ValidateRequest{Config: cfg})
			if tt.summary == "" {
				require.False(t, diags.HasErrors(), "%v", diags)
				return
			}
			require.Len(t, diags, 1, "%v", diags)
			d := requireDiag(t, diags, cfg, tt.summary, tt.attr)
			assert.NotContains(t, d.Detail, "0123456789", "the token's secret is never shown")
		})
	}
}

// An unknown argument (a value an earlier task computes) leaves the
// result unknown at plan, without a request.
func TestDiscoveryPlanUnknown(t *testing.T) {
	m := Discovery{}
	cfg := cfgFor(t, m, map[string]cty.Value{
		"api_server_endpoint": cty.StringVal("127.0.0.1:1"),
		"token":               cty.UnknownVal(cty.String),
		"ca_cert_hashes":      strs("sha256:" + strings.Repeat("ab", 32)),
	})
	p := plan(t, m, cfg)
	require.False(t, p.Diagnostics.HasErrors(), "%v", p.Diagnostics)
	assert.Nil(t, p.Change)
	assert.False(t, p.Result.GetAttr("summary").IsKnown())
}

// discoverySrc is a node-only join's start, as join.hcl calls it: discover
// with the token, then read the cluster with the bootstrap kubeconfig.
const discoverySrc = `
variable "api_server_endpoint" {
  type = string
}

variable "bootstrap_token" {
  type      = string
  sensitive = true
}

variable "ca_cert_hashes" {
  type    = list(string)
  default = []
}

variable "unsafe_skip_ca_verification" {
  type    = bool
  default = false
}

play "discovery" {
  hosts = "windows"

  task "discovery" {
    k8s_discovery {
      api_server_endpoint         = var.api_server_endpoint
      token                       = var.bootstrap_token
      ca_cert_hashes              = var.ca_cert_hashes
      unsafe_skip_ca_verification = var.unsafe_skip_ca_verification
    }
  }

  task "kubelet config" {
    k8s_kubelet_config {
      kubeconfig_data = task.discovery.bootstrap_kubeconfig
      node_name       = "win-discovery"
    }
  }

  task "check" {
    assert {
      that = [
        task.discovery.api_server == "https://${var.api_server_endpoint}",
        task.discovery.requester == "system:bootstrap:${task.discovery.token_id}",
        task["kubelet config"].cluster_domain == "cluster.local",
      ]
    }
  }
}
`

// runDiscoveryPlaybook plans and applies discoverySrc with no kubeconfig
// anywhere and returns every event as JSON, as --json would print it.
func runDiscoveryPlaybook(t *testing.T, vars []string) string {
	t.Helper()
	t.Setenv("KUBECONFIG", "/nonexistent") // nothing to fall back on
	cache := kube.NewCache(kube.Defaults{})
	reg := modules.NewRegistry(append(generic.Modules(), Modules(cache)...)...)
	loader := playbook.NewLoader(reg, nil)
	pb, diags := loader.LoadSource("join.hcl", []byte(discoverySrc))
	require.False(t, diags.HasErrors(), "load: %s", diags)
	inv, diags := inventory.ParseINI("inventory.ini", []byte("[windows]\nwin-discovery\n"))
	require.False(t, diags.HasErrors(), "inventory: %s", diags)
	var mu sync.Mutex
	var out strings.Builder
	for _, mode := range []engine.Mode{engine.ModePlan, engine.ModeApply} {
		res := engine.Run(ctx, engine.Request{
			Hooks: engine.HooksFunc(func(e engine.Event) {
				b, err := json.Marshal(e)
				require.NoError(t, err)
				mu.Lock()
				defer mu.Unlock()
				out.Write(append(b, '\n'))
			}),
			Playbook: pb, Inventory: inv, Mode: mode, Registry: reg, Sources: loader.Sources(),
			Inputs: engine.Inputs{Vars: vars},
			Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) {
				return nil, errors.New("discovery and cluster reads must not connect to the host")
			}),
		})
		require.False(t, res.Failed(), "%s: %s %s\n%s", mode, res.Diagnostics, res.SetupDiagnostics, out.String())
		assert.Zero(t, res.Changes, "%s: reads change nothing", mode)
	}
	return out.String()
}
