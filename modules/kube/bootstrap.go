package kube

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// BootstrapToken mints a kubeadm bootstrap token for one join and builds
// the kubelet's bootstrap kubeconfig around it. It only ever creates a
// Secret in kube-system, never reads or lists one there: get or list on
// Secrets in kube-system reaches cluster-admin (create a token Secret for a
// privileged ServiceAccount, read it back), create alone does not. So no
// token is reused: each join gets a fresh one that expires soon after the
// kubelet needs it, and kube-controller-manager's tokencleaner deletes it.
// A join whose node already has its client certificate passes mint = false
// and gets no token at all, so a re-run plans no change.
type BootstrapToken struct{ Clusters }

var (
	_ modules.Module    = BootstrapToken{}
	_ modules.Validator = BootstrapToken{}
)

var bootstrapTokenAttrs = withConn(
	modules.Attribute{Name: "ttl", Type: cty.String, Default: cty.StringVal(defaultTokenTTL),
		Description: "How long the token lives, as a Go duration (`30m`, `2h`): what the join needs to get the kubelet's client certificate, plus a margin. At least a minute, at most " + maxTokenTTL.String() + "; kube-controller-manager's tokencleaner deletes it once it expires."},
	modules.Attribute{Name: "mint", Type: cty.Bool, Default: cty.True,
		Description: "`false` mints no token (the node already has its client certificate): no change, `token`, `token_id`, `requester`, `expiration` and `bootstrap_kubeconfig` are null, and `ca` and `api_server` are still read."},
	modules.Attribute{Name: "description", Type: cty.String, Default: cty.StringVal(kube.DefaultTokenDescription),
		Description: "The token's description, for whoever lists the tokens (`kubeadm token list`)."},
	modules.Attribute{Name: "api_server", Type: cty.String,
		Description: "API server URL for the bootstrap kubeconfig. Default: the server in `kube-public/cluster-info`."},
	modules.Attribute{Name: "group", Type: cty.String, Default: cty.StringVal(kube.WSUBootstrapGroup),
		Description: "The token's group (`auth-extra-groups`). `" + kube.WSUBootstrapGroup + "` needs " +
			"`deploy/rbac/kubeadm-bootstrappers` (CSR creation, no auto-approval: `k8s_csr_approve` is the gate); " +
			"`" + kube.KubeadmNodeTokenGroup + "` is kubeadm's, whose client CSRs kube-controller-manager approves itself."},
)

// Token lifetimes: a join takes minutes; a day is the most a token minted
// for one join may outlive it.
const (
	defaultTokenTTL = "30m"
	maxTokenTTL     = 24 * time.Hour
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
		Summary: "Mint a short-lived kubeadm bootstrap token for one join, and the kubelet's bootstrap kubeconfig.",
		Description: "The vanilla-Kubernetes counterpart of `k8s_ignition`: a new secret `bootstrap-token-<id>` of " +
			"type `bootstrap.kubernetes.io/token` in `kube-system`, expiring `ttl` from now, usable for " +
			"authentication and signing, in the one group `group`, labelled `" + kube.ManagedByLabel + "=wsu`. " +
			"Every apply with `mint = true` creates a fresh token (the plan shows it) and never reads, lists " +
			"or reuses a Secret in `kube-system`: `create` is the only right it needs there, and the only one " +
			"deploy/rbac grants, because reading Secrets in `kube-system` reaches cluster-admin. " +
			"kube-controller-manager's tokencleaner deletes the token when it expires. The default group `" +
			kube.WSUBootstrapGroup + "` may create CSRs and get Nodes (deploy/rbac/kubeadm-bootstrappers) but is " +
			"not bound to `...:nodeclient`, so kube-controller-manager does not approve its client CSRs and " +
			"`k8s_csr_approve` decides (kubeadm's own group `" + kube.KubeadmNodeTokenGroup + "` is). With " +
			"`mint = false` (join passes it once the kubelet has its client certificate) no token is made and " +
			"the plan shows no change. The CA comes from the ConfigMap `kube-public/cluster-info`; the token " +
			"and the kubeconfig are sensitive.",
		Target:     modules.TargetController,
		Attributes: bootstrapTokenAttrs,
		Results:    bootstrapTokenResults,
		Example: `task "token" {
  k8s_bootstrap_token {
    ttl = "30m"
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
	case d > maxTokenTTL:
		return 0, fmt.Errorf("ttl %q is longer than %s: a token minted for one join must not outlive it by days", s, maxTokenTTL)
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

// mint reports whether the task asks for a token; unknown counts as yes.
func mint(cfg modules.Config) bool {
	v := get(cfg, "mint")
	return !v.IsKnown() || v.IsNull() || v.True()
}

// noTokenResult is the result when no token is minted: the CA and server
// only.
func noTokenResult(server string, ca []byte) cty.Value {
	return result(bootstrapTokenResults, map[string]cty.Value{
		"ca":         cty.StringVal(strings.ToValidUTF8(string(ca), "\uFFFD")),
		"api_server": cty.StringVal(server),
	})
}

// plannedTokenResult is a mint's result before apply: the CA and server are
// known, the token is not.
func plannedTokenResult(server string, ca []byte, group cty.Value) cty.Value {
	vals := noTokenResult(server, ca).AsValueMap()
	for _, a := range bootstrapTokenResults {
		if a.Name != "ca" && a.Name != "api_server" {
			vals[a.Name] = cty.UnknownVal(a.Type)
		}
	}
	vals["group"] = group
	return result(bootstrapTokenResults, vals)
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
	if !mint(cfg) {
		return modules.PlanResponse{Result: noTokenResult(server, ca)}
	}
	return modules.PlanResponse{Change: create, Result: plannedTokenResult(server, ca, get(cfg, "group"))}
}

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
	if !mint(cfg) {
		return modules.ApplyResponse{Result: noTokenResult(server, ca)}
	}
	t, err := kube.CreateBootstrapToken(ctx, cl.Kube, tokenRequest(cfg))
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: apiError(cfg, "ttl", "Cannot create a bootstrap token", err)}
	}
	res, err := tokenResult(t, server, ca)
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(bootstrapTokenResults), Diagnostics: hcl.Diagnostics{cfg.Error("api_server", "Cannot build the bootstrap kubeconfig", err.Error())}}
	}
	return modules.ApplyResponse{Result: res}
}
