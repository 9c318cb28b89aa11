package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/kube/tokenjoin"
	"github.com/wsu-project/wsu/modules"
)

// Discovery is kubeadm's token discovery (discovery.bootstrapToken) as a
// task: a node that holds only a bootstrap token and the CA's pins finds
// and verifies its cluster, with no kubeconfig. It takes no connection
// arguments on purpose: its whole point is to need no credential but the
// token, which it never sends while discovering (kube.Discover states the
// contract). It only reads, so Plan and Apply return the same result and
// never a change, and a wrong pin or an unknown token fails the plan.
type Discovery struct{}

var (
	_ modules.Module    = Discovery{}
	_ modules.Validator = Discovery{}
)

var discoveryAttrs = []modules.Attribute{
	{Name: "api_server_endpoint", Type: cty.String, Required: true,
		Description: "The API server, `host:port` (kubeadm's `discovery.bootstrapToken.apiServerEndpoint`); `https://host:port` is accepted too."},
	{Name: "token", Type: cty.String, Required: true, Sensitive: true,
		Description: "The bootstrap token, `<id>.<secret>` (kubeadm's `discovery.bootstrapToken.token`). Never sent during discovery: it checks the signature kube-controller-manager's bootstrapsigner puts in `kube-public/cluster-info`."},
	{Name: "ca_cert_hashes", Type: cty.List(cty.String), Default: cty.ListValEmpty(cty.String),
		Description: "Pins of the cluster CA's public key, `sha256:<hex>` over its SubjectPublicKeyInfo (kubeadm's `caCertHashes`; `kubeadm token create --print-join-command` prints one). The CA in cluster-info must match one. Empty is refused unless `unsafe_skip_ca_verification` is true."},
	{Name: "unsafe_skip_ca_verification", Type: cty.Bool, Default: cty.False,
		Description: "Accept a CA that no pin vouches for: the token's signature is then all that ties cluster-info to the cluster, and anyone else holding the token could pose as it (kubeadm's `unsafeSkipCAVerification`). Given pins are checked all the same."},
	{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(int64(kube.DefaultDiscoveryTimeout.Seconds())),
		Description: "Seconds to keep trying while the API server is unreachable or cluster-info has no signature for the token yet; an unknown or expired token is reported when they are up."},
}

// The results say what they derive from (modules.Attribute.DerivesFrom):
// the token is sensitive, and without that the engine would hide the
// server and the CA's pin the plan must show.
var discoveryResults = []modules.Attribute{
	{Name: "api_server", Type: cty.String, DerivesFrom: []string{"api_server_endpoint"},
		Description: "The API server URL, `https://<api_server_endpoint>`: where the CA was verified, and the server of `bootstrap_kubeconfig`."},
	{Name: "cluster_info_server", Type: cty.String, DerivesFrom: []string{"api_server_endpoint"},
		Description: "The server `kube-public/cluster-info` names (kubeadm's `controlPlaneEndpoint`), which `kubeadm join`'s own bootstrap kubeconfig uses; the same as `api_server` when the node joins through the control plane endpoint, as Cluster API's nodes do."},
	{Name: "ca", Type: cty.String, DerivesFrom: []string{"api_server_endpoint"},
		Description: "The cluster CA bundle (PEM) from `kube-public/cluster-info`, verified; kubeadm writes it as the node's `pki/ca.crt`."},
	{Name: "ca_cert_hash", Type: cty.String, DerivesFrom: []string{"api_server_endpoint", "ca_cert_hashes"},
		Description: "The pin of the CA certificate that matched `ca_cert_hashes` (of the bundle's first certificate when none were given), `sha256:<hex>`."},
	// The token's id is its public half (kubeadm prints it, the token's
	// Secret and cluster-info's signature are named after it): it reveals
	// nothing of the secret.
	{Name: "token_id", Type: cty.String, DerivesFrom: []string{}, Description: "The token's public id."},
	{Name: "requester", Type: cty.String, DerivesFrom: []string{},
		Description: "The identity the token authenticates as, `system:bootstrap:<id>`: the requester of the kubelet's client CSR."},
	{Name: "bootstrap_kubeconfig", Type: cty.String, Sensitive: true,
		Description: "Kubeconfig for the kubelet's `--bootstrap-kubeconfig` (server, CA, token), and for the cluster modules' `kubeconfig_data`: they then read the cluster with the token's own rights."},
	{Name: "summary", Type: cty.String, DerivesFrom: []string{"api_server_endpoint", "ca_cert_hashes"},
		Description: "The server and the CA's pin, and whether a pin vouched for it, in a line: what the plan shows."},
}

func (Discovery) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_discovery",
		Summary: "Find and verify the cluster from a node with only a bootstrap token and CA pins, as `kubeadm join` does.",
		Description: "kubeadm's token discovery, with no credential but the token. It reads the ConfigMap " +
			"`kube-public/cluster-info` anonymously over unverified TLS (the CA is not known yet) and requires " +
			"`jws-kubeconfig-<token-id>`, the signature kube-controller-manager's bootstrapsigner writes for every " +
			"valid token: none means the token is unknown or expired (the tokencleaner deletes expired ones). It " +
			"verifies that signature over the `kubeconfig` key with the token, checks the kubeconfig's CA against " +
			"`ca_cert_hashes`, reads cluster-info again over TLS verified with that CA and requires the same " +
			"kubeconfig. Each refusal points at the argument it concerns: a bad signature (an altered ConfigMap, " +
			"a man in the middle or a wrong secret) and an unknown token at `token`, a CA no pin matches at " +
			"`ca_cert_hashes`, a server the CA does not verify or a second answer that differs at " +
			"`api_server_endpoint`. Without pins it refuses unless `unsafe_skip_ca_verification` is true. " +
			"The result is the server, the CA and the kubelet's bootstrap kubeconfig; the plan shows the server " +
			"and the CA's pin. It only reads, so it never plans a change, and it runs where wsu runs (the node " +
			"itself with `--local`). The token and the kubeconfig are sensitive and appear in no message.",
		Target:     modules.TargetController,
		Attributes: discoveryAttrs,
		Results:    discoveryResults,
		Show:       "summary",
		Example: `task "discovery" {
  k8s_discovery {
    api_server_endpoint = "10.0.0.1:6443"
    token               = var.bootstrap_token
    ca_cert_hashes      = ["sha256:7d3e1f6a9c0b2e4d5f8a1b3c6e9d0f2a4b7c8e1d3f5a6b9c0e2d4f7a8b1c3e5d"]
  }
}`,
	}
}

// discoveryAttr is the argument a kube.Discover refusal concerns.
var discoveryAttr = map[kube.DiscoveryInput]string{
	kube.InputEndpoint:     "api_server_endpoint",
	kube.InputToken:        "token",
	kube.InputCACertHashes: "ca_cert_hashes",
}

func (Discovery) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateSeconds(cfg, nil, []string{"timeout"})
	if s, ok := str(get(cfg, "api_server_endpoint")); ok {
		if _, err := tokenjoin.ParseAPIServerEndpoint(s); err != nil {
			diags = append(diags, cfg.Error("api_server_endpoint", "Invalid api_server_endpoint", err.Error()+"."))
		}
	}
	if s, ok := str(get(cfg, "token")); ok {
		if _, _, err := tokenjoin.ParseBootstrapToken(s); err != nil {
			diags = append(diags, cfg.Error("token", "Invalid token", err.Error()+"."))
		}
	}
	pins, pinsKnown := knownStrings(get(cfg, "ca_cert_hashes"))
	if pinsKnown {
		if _, err := tokenjoin.ParseCACertHashes(pins); err != nil {
			diags = append(diags, cfg.Error("ca_cert_hashes", "Invalid ca_cert_hashes", err.Error()+"."))
		}
	}
	if skip := get(cfg, "unsafe_skip_ca_verification"); pinsKnown && len(pins) == 0 && skip.IsKnown() && !isTrue(skip) {
		diags = append(diags, cfg.Error("ca_cert_hashes", "No CA certificate hashes", noPinsDetail))
	}
	return diags
}

const noPinsDetail = "Token discovery without ca_cert_hashes trusts whichever server knows the token. " +
	"Give the cluster CA's pin, sha256:<hex> (`kubeadm token create --print-join-command` prints it), " +
	"or set unsafe_skip_ca_verification = true to accept the CA on the token's signature alone."

// knownStrings is a known list of strings (null is none); false while
// unknown.
func knownStrings(v cty.Value) ([]string, bool) {
	switch {
	case !v.IsWhollyKnown():
		return nil, false
	case v.IsNull():
		return nil, true
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		s, _ := str(e) // a null pin is "", which no pin parses as
		out = append(out, s)
	}
	return out, true
}

// isTrue is a known bool's value; null is false.
func isTrue(v cty.Value) bool { return !v.IsNull() && v.True() }

// discover runs the discovery for Plan and Apply alike: it only reads.
func (Discovery) discover(ctx context.Context, cfg modules.Config) (cty.Value, hcl.Diagnostics) {
	if !cfg.Value.IsWhollyKnown() {
		return unknownResult(discoveryResults), nil
	}
	endpoint, _ := str(get(cfg, "api_server_endpoint"))
	token, _ := str(get(cfg, "token"))
	pins, _ := knownStrings(get(cfg, "ca_cert_hashes"))
	var timeout time.Duration // null: kube.Discover's default
	if t := get(cfg, "timeout"); !t.IsNull() {
		timeout = seconds(t)
	}
	d, err := kube.Discover(ctx, kube.DiscoveryRequest{
		Endpoint: endpoint, Token: token, CACertHashes: pins,
		UnsafeSkipCAVerification: isTrue(get(cfg, "unsafe_skip_ca_verification")),
		Timeout:                  timeout,
	})
	if err != nil {
		return unknownResult(discoveryResults), discoveryDiag(cfg, err)
	}
	return discoveryResult(d), nil
}

// discoveryDiag locates a refusal at the argument it concerns.
func discoveryDiag(cfg modules.Config, err error) hcl.Diagnostics {
	attr := "api_server_endpoint"
	var de *kube.DiscoveryError
	if errors.As(err, &de) {
		attr = discoveryAttr[de.Input]
	}
	summary := "Token discovery failed"
	switch {
	case errors.Is(err, kube.ErrTokenNotSigned):
		summary = "Unknown or expired token"
	case errors.Is(err, kube.ErrBadSignature):
		summary = "cluster-info's signature does not verify"
	case errors.Is(err, kube.ErrCACertHashMismatch):
		summary = "Cluster CA does not match ca_cert_hashes"
	case errors.Is(err, kube.ErrNoCACertHashes):
		summary = "No CA certificate hashes"
	case errors.Is(err, kube.ErrClusterInfoChanged), errors.Is(err, kube.ErrServerUnverified):
		summary = "API server not verified"
	}
	return hcl.Diagnostics{cfg.Error(attr, summary, err.Error()+".")}
}

func discoveryResult(d *kube.Discovery) cty.Value {
	how := "pinned"
	if !d.Pinned {
		how = "NOT verified (unsafe_skip_ca_verification)"
	}
	return result(discoveryResults, map[string]cty.Value{
		"api_server":           cty.StringVal(d.Server),
		"cluster_info_server":  cty.StringVal(d.ClusterInfoServer),
		"ca":                   cty.StringVal(strings.ToValidUTF8(string(d.CA), "\uFFFD")),
		"ca_cert_hash":         cty.StringVal(d.CACertHash),
		"token_id":             cty.StringVal(d.TokenID),
		"requester":            cty.StringVal(d.Requester),
		"bootstrap_kubeconfig": cty.StringVal(string(d.BootstrapKubeconfig)),
		"summary":              cty.StringVal(fmt.Sprintf("%s, CA %s, %s", d.Server, d.CACertHash, how)),
	})
}

func (m Discovery) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	res, diags := m.discover(ctx, req.Config)
	return modules.PlanResponse{Result: res, Diagnostics: diags}
}

func (m Discovery) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	res, diags := m.discover(ctx, req.Config)
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}
