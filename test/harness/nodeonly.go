//go:build linux

package harness

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/kube/tokenjoin"
	"github.com/wsu-project/wsu/test/kubetest"
)

// NodeOnly is a node-only join's inputs (join with api_server_endpoint):
// what a node holds when Cluster API joins it, with no kubeconfig.
type NodeOnly struct {
	// Endpoint is the API server's host:port.
	Endpoint string
	// Pin is the cluster CA's sha256 SubjectPublicKeyInfo pin.
	Pin string
	// VarFile holds payload_dir, the endpoint, the pin and the node name,
	// and no kubeconfig (the harness's own var file names one).
	VarFile string
	// Home is wsu's home directory: no ~/.kube there.
	Home string

	env  *Env
	host *Host
}

// NodeOnly prepares a node-only join of h; extraVars are appended to its
// var file. The cluster must be a kubeadm one (Network hostprocess).
func (e *Env) NodeOnly(h *Host, dir, extraVars string) (*NodeOnly, error) {
	u, err := url.Parse(e.Cluster.Config.Host)
	if err != nil {
		return nil, err
	}
	pin, err := CAPin(e.Cluster.Config.CAData)
	if err != nil {
		return nil, err
	}
	n := &NodeOnly{Endpoint: u.Host, Pin: pin, Home: filepath.Join(dir, "home"), env: e, host: h}
	if err := os.MkdirAll(n.Home, 0o700); err != nil {
		return nil, err
	}
	vars := fmt.Sprintf(`cluster_flavour     = "kubeadm"
payload_dir         = %q
api_server_endpoint = %q
ca_cert_hashes      = [%q]
node_name           = %q
%s`, e.PayloadDir, n.Endpoint, n.Pin, h.NodeName, extraVars)
	n.VarFile = filepath.Join(dir, "node-only.wsuvars")
	return n, os.WriteFile(n.VarFile, []byte(vars), 0o600)
}

// Cmd is `wsu VERB join` for the host, with the node-only var file, -o
// json, KUBECONFIG unset and a home without ~/.kube; args follow.
func (n *NodeOnly) Cmd(ctx context.Context, verb string, args ...string) *exec.Cmd {
	full := append([]string{verb, "join", "-i", n.env.Inventory, "--limit", n.host.Name, "--var-file", n.VarFile, "-o", "json"}, args...)
	cmd := exec.CommandContext(ctx, n.env.WSU, full...)
	cmd.Env = NodeEnv(n.Home)
	return cmd
}

// NodeEnv is the environment of wsu on a node that holds no kubeconfig:
// KUBECONFIG unset, and home a directory without ~/.kube.
func NodeEnv(home string) []string {
	return []string{"NO_COLOR=1", "HOME=" + home, "PATH=" + os.Getenv("PATH")}
}

// KubeadmToken creates a kubeadm node token, as Cluster API's bootstrap
// provider does for each Machine, and waits for kube-controller-manager's
// bootstrapsigner to sign cluster-info with it.
func (e *Env) KubeadmToken(ctx context.Context, ttl time.Duration) (*kube.BootstrapToken, error) {
	tok, err := kube.CreateBootstrapToken(ctx, e.Cluster.Client, kube.TokenRequest{TTL: ttl, Group: kube.KubeadmNodeTokenGroup})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		signed, err := e.SignedFor(ctx, tok.ID)
		if err != nil || signed {
			return tok, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the bootstrapsigner did not sign cluster-info for token %s: %w", tok.ID, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// SignedFor: cluster-info carries the bootstrapsigner's signature for the
// token id.
func (e *Env) SignedFor(ctx context.Context, id string) (bool, error) {
	cm, err := e.Cluster.Client.CoreV1().ConfigMaps(kubetest.ClusterInfoNamespace).Get(ctx, kubetest.ClusterInfoName, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	_, ok := cm.Data["jws-kubeconfig-"+id]
	return ok, nil
}

// CAPin is kubeadm's --discovery-token-ca-cert-hash of a CA bundle's first
// certificate: sha256 over its SubjectPublicKeyInfo.
func CAPin(caPEM []byte) (string, error) {
	b, _ := pem.Decode(caPEM)
	if b == nil {
		return "", errors.New("no PEM certificate in the CA bundle")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "", err
	}
	return tokenjoin.CACertHash(c), nil
}
