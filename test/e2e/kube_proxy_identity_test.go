//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/test/harness"
)

// kubeProxySite runs the stock kube-proxy.hcl with identity = "own", as a
// kubeadm join would; it declares the harness's variables it does not use.
const kubeProxySite = `
variable "cluster_flavour" { type = string }
variable "kubeconfig" { type = string }
variable "payload_dir" { type = string }
variable "csr_timeout" { type = number }
variable "ready_timeout" { type = number }
variable "node_name" { type = string }
variable "node_subnet" { type = string }
variable "api_server" { type = string }

include "kube_proxy" {
  source = "wsu:kube-proxy.hcl"
  vars = {
    node_name   = var.node_name
    node_subnet = var.node_subnet
    identity    = "own"
    kubeconfig  = var.kubeconfig
    api_server  = var.api_server
  }
}
`

// TestKubeProxyOwnIdentity: after a join, kube-proxy.hcl with identity =
// "own" gives kube-proxy a ServiceAccount of its own (system:node-proxier),
// points kube-proxy.conf at its kubeconfig, and a re-run changes nothing.
func TestKubeProxyOwnIdentity(t *testing.T) {
	ctx := context.Background()
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	requireSuccess(t, run(t, env, nil, "apply", "join"))

	node, err := env.Cluster.Client.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	subnet := node.Annotations["k8s.ovn.org/hybrid-overlay-node-subnet"]
	require.NotEmpty(t, subnet)
	site := filepath.Join(t.TempDir(), "kube-proxy-own.hcl")
	require.NoError(t, os.WriteFile(site, []byte(kubeProxySite), 0o644))
	vars := []string{"-var", "node_name=" + h.NodeName, "-var", "node_subnet=" + subnet, "-var", "api_server=" + env.Cluster.Config.Host}
	requireSuccess(t, run(t, env, nil, append([]string{"apply", site}, vars...)...))

	var conf, token []byte
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		var err error
		if conf, err = s.ReadFile(ctx, `C:\k\kube-proxy.conf`, 0); err != nil {
			return err
		}
		token, err = s.ReadFile(ctx, `C:\k\kube-proxy\token`, 0)
		return err
	}))
	assert.Contains(t, string(conf), `kubeconfig: C:\k\kube-proxy\kubeconfig`)
	assert.NotContains(t, string(conf), `kubeconfig: C:\k\kubeconfig`)

	cfg := rest.AnonymousClientConfig(env.Cluster.Config)
	cfg.BearerToken = strings.TrimSpace(string(token))
	own, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	who, err := own.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:kube-system:wsu-kube-proxy-"+h.NodeName, who.Status.UserInfo.Username)
	_, err = own.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "kube-proxy's identity lists EndpointSlices")

	plan := run(t, env, nil, append([]string{"plan", site, "--detailed-exitcode"}, vars...)...)
	assert.Equalf(t, 0, plan.ExitCode, "a re-run changes nothing\n%s\n%s", plan.Failures(), tail(plan.Stdout, 12))
	assert.NotContains(t, plan.Stdout+plan.Stderr, strings.TrimSpace(string(token)), "the token is never shown")
}
