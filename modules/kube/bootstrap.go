package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// BootstrapToken makes sure a kubeadm bootstrap token exists for joining
// nodes, and builds the kubelet's bootstrap kubeconfig around it.
type BootstrapToken struct{ Clusters }

var (
	_ modules.Module    = BootstrapToken{}
	_ modules.Validator = BootstrapToken{}
)

var bootstrapTokenAttrs = withConn(
	modules.Attribute{Name: "ttl", Type: cty.String, Default: cty.StringVal("24h"),
		Description: "How long a new token lives, as a Go duration (`24h`, `90m`). An existing wsu token is reused while more than half of this is left."},
	modules.Attribute{Name: "description", Type: cty.String, Default: cty.StringVal(kube.DefaultTokenDescription),
		Description: "The token's description; only a wsu token with the same description is reused, so different playbooks can keep separate tokens."},
	modules.Attribute{Name: "api_server", Type: cty.String,
		Description: "API server URL for the bootstrap kubeconfig. Default: the server in `kube-public/cluster-info`."},
	modules.Attribute{Name: "group", Type: cty.String, Default: cty.StringVal(kube.WSUBootstrapGroup),
		Description: "The token's group (`auth-extra-groups`). `" + kube.WSUBootstrapGroup + "` needs " +
			"`deploy/rbac/kubeadm-bootstrappers` (CSR creation, no auto-approval: `k8s_csr_approve` is the gate); " +
			"`" + kube.KubeadmNodeTokenGroup + "` is kubeadm's, whose client CSRs kube-controller-manager approves itself."},
)

var bootstrapTokenResults = []modules.Attribute{
	{Name: "token", Type: cty.String, Sensitive: true, Description: "The token, `<id>.<secret>`."},
	{Name: "token_id", Type: cty.String, Description: "The token's public id."},
	{Name: "requester", Type: cty.String,
		Description: "The identity the token authenticates as, `system:bootstrap:<id>`: what `k8s_csr_approve` should accept as `client_requesters`."},
	{Name: "group", Type: cty.String, Description: "The group the token authenticates in, besides `system:bootstrappers`."},
	{Name: "expiration", Type: cty.String, Description: "When the token expires (RFC 3339)."},
	{Name: "ca", Type: cty.String,
		Description: "The cluster CA bundle from `kube-public/cluster-info`; with kubeadm it also verifies clients of the kubelet (`C:\\k\\kubelet-ca.crt`)."},
	{Name: "bootstrap_kubeconfig", Type: cty.String, Sensitive: true,
		Description: "Kubeconfig for the kubelet's `--bootstrap-kubeconfig`: the server, the CA from `kube-public/cluster-info` and the token."},
	{Name: "api_server", Type: cty.String,
		Description: "The API server URL in `bootstrap_kubeconfig` (hybrid-overlay-node's `--k8s-apiserver`; `ca` verifies it)."},
}

func (BootstrapToken) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_bootstrap_token",
		Summary: "Create (or reuse) a kubeadm bootstrap token and the kubelet's bootstrap kubeconfig.",
		Description: "The vanilla-Kubernetes counterpart of `k8s_ignition`: a secret `bootstrap-token-<id>` of " +
			"type `bootstrap.kubernetes.io/token` in `kube-system`, usable for authentication and signing, " +
			"in the one group `group`, labelled `" + kube.ManagedByLabel + "=wsu`. The default group `" +
			kube.WSUBootstrapGroup + "` may create CSRs and get Nodes (deploy/rbac/kubeadm-bootstrappers) but is " +
			"not bound to `...:nodeclient`, so kube-controller-manager does not approve its client CSRs and " +
			"`k8s_csr_approve` decides (kubeadm's own group `" + kube.KubeadmNodeTokenGroup + "` is). When a wsu " +
			"token with the same description and exactly that group has more than half of `ttl` left the plan " +
			"shows no change and reuses it; otherwise it creates one. The CA comes from the ConfigMap " +
			"`kube-public/cluster-info`.",
		Target:     modules.TargetController,
		Attributes: bootstrapTokenAttrs,
		Results:    bootstrapTokenResults,
		Example: `task "token" {
  k8s_bootstrap_token {
    ttl = "2h"
  }
}`,
	}
}

func (BootstrapToken) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	if _, err := ttl(cfg); err != nil {
		diags = append(diags, cfg.Error("ttl", "Invalid ttl", err.Error()))
	}
	if d, ok := str(get(cfg, "description")); ok && strings.TrimSpace(d) == "" {
		diags = append(diags, cfg.Error("description", "Empty description", "description identifies wsu's token; it must not be empty."))
	}
	if u, ok := str(get(cfg, "api_server")); ok && !strings.HasPrefix(u, "https://") {
		diags = append(diags, cfg.Error("api_server", "Invalid api_server", fmt.Sprintf("api_server must be an https URL, got %q.", u)))
	}
	if v := get(cfg, "group"); v.IsKnown() {
		g, _ := str(v)
		if err := kube.ValidBootstrapGroup(g); err != nil {
			diags = append(diags, cfg.Error("group", "Invalid group", err.Error()+"."))
		}
	}
	return diags
}

// ttl parses the known ttl; 0 while unknown.
func ttl(cfg modules.Config) (time.Duration, error) {
	v := get(cfg, "ttl")
	if !v.IsKnown() {
		return 0, nil
	}
	s, ok := str(v)
	if !ok {
		return 0, fmt.Errorf("ttl must be set, like \"24h\"")
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("ttl %q is not a duration like \"24h\" or \"90m\"", s)
	case d < time.Minute:
		return 0, fmt.Errorf("ttl %q is shorter than a minute: the node could not finish joining", s)
	}
	return d, nil
}

func tokenRequest(cfg modules.Config) kube.TokenRequest {
	d, _ := ttl(cfg)
	desc, _ := str(get(cfg, "description"))
	group, _ := str(get(cfg, "group"))
	return kube.TokenRequest{TTL: d, Description: desc, Group: group}
}

// tokenResult is the result for a token, with the kubeconfig built from
// cluster-info.
func tokenResult(t *kube.BootstrapToken, server string, ca []byte) (cty.Value, error) {
	kc, err := kube.BootstrapKubeconfig(server, ca, t.String())
	if err != nil {
		return cty.NilVal, err
	}
	return result(bootstrapTokenResults, map[string]cty.Value{
		"token":                cty.StringVal(t.String()),
		"token_id":             cty.StringVal(t.ID),
		"requester":            cty.StringVal(t.Username()),
		"group":                cty.StringVal(t.Group),
		"expiration":           cty.StringVal(t.Expiration.UTC().Format(time.RFC3339)),
		"ca":                   cty.StringVal(strings.ToValidUTF8(string(ca), "\uFFFD")),
		"bootstrap_kubeconfig": cty.StringVal(string(kc)),
		"api_server":           cty.StringVal(server),
	}), nil
}

// clusterInfo reads the server and CA, with api_server taking precedence.
func clusterInfo(ctx context.Context, cl *kube.Client, cfg modules.Config) (string, []byte, hcl.Diagnostics) {
	server, ca, err := kube.ClusterInfo(ctx, cl.Kube)
	if err != nil {
		return "", nil, apiError(cfg, "api_server", "Cannot read the cluster's CA", err)
	}
	if s, ok := str(get(cfg, "api_server")); ok {
		server = s
	}
	return server, ca, nil
}

func (m BootstrapToken) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	create := &modules.Change{Action: modules.Create, Subject: "bootstrap token in " + kube.BootstrapTokenNamespace,
		Fields: []modules.FieldChange{
			{Name: "ttl", Old: cty.NullVal(cty.String), New: get(cfg, "ttl")},
			{Name: "description", Old: cty.NullVal(cty.String), New: get(cfg, "description")},
			{Name: "group", Old: cty.NullVal(cty.String), New: get(cfg, "group")},
		}}
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: diags}
	}
	if !known || !cfg.Value.IsWhollyKnown() {
		return modules.PlanResponse{Change: create, Result: unknownResult(bootstrapTokenResults)}
	}
	// Read cluster-info now: a cluster without it fails at plan, not after
	// a token was created.
	server, ca, diags := clusterInfo(ctx, cl, cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: diags}
	}
	t, err := kube.FindReusableToken(ctx, cl.Kube, tokenRequest(cfg))
	if err != nil {
		return modules.PlanResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: apiError(cfg, "ttl", "Cannot list bootstrap tokens", err)}
	}
	if t == nil {
		return modules.PlanResponse{Change: create, Result: unknownResult(bootstrapTokenResults)}
	}
	res, err := tokenResult(t, server, ca)
	if err != nil {
		return modules.PlanResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: hcl.Diagnostics{cfg.Error("api_server", "Cannot build the bootstrap kubeconfig", err.Error())}}
	}
	return modules.PlanResponse{Result: res}
}

// tokenMu makes finding or creating a token one step for the hosts of a run.
var tokenMu sync.Mutex

func (m BootstrapToken) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(bootstrapTokenAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: diags}
	}
	server, ca, diags := clusterInfo(ctx, cl, cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: diags}
	}
	// Plan found none to reuse. Hosts joining in parallel plan that at the
	// same moment: the first creates the token, the others find and reuse
	// it, so one run hands every host the same token (and a re-run, which
	// reuses the newest, changes nothing).
	tokenMu.Lock()
	defer tokenMu.Unlock()
	t, err := kube.FindReusableToken(ctx, cl.Kube, tokenRequest(cfg))
	if err == nil && t == nil {
		t, err = kube.CreateBootstrapToken(ctx, cl.Kube, tokenRequest(cfg))
	}
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: apiError(cfg, "ttl", "Cannot create a bootstrap token", err)}
	}
	res, err := tokenResult(t, server, ca)
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: hcl.Diagnostics{cfg.Error("api_server", "Cannot build the bootstrap kubeconfig", err.Error())}}
	}
	return modules.ApplyResponse{Result: res}
}
