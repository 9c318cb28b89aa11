package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// NodeIdentity gives a node component (Azure's cloud-node-manager, or
// kube-proxy on kubeadm) an identity of its own: a ServiceAccount per node,
// RBAC (for cloud-node-manager a per-node ClusterRole that lets it write its
// own Node and no other; otherwise a binding to an existing ClusterRole such
// as system:node-proxier), and a bound token from the TokenRequest API
// written to the node with a kubeconfig that reads it (tokenFile, which
// client-go re-reads, so renewal needs no restart). It is the one module of
// this package that also works on the host: the token lives only there, so
// whether it needs renewing can only be read there.
type NodeIdentity struct {
	Clusters
	// Now is the clock renewal is decided by; nil means time.Now.
	Now func() time.Time
}

var (
	_ modules.Module    = NodeIdentity{}
	_ modules.Validator = NodeIdentity{}
)

var nodeIdentityResults = []modules.Attribute{
	{Name: "service_account", Type: cty.String, Description: "`namespace/name` of the node's ServiceAccount."},
	{Name: "kubeconfig_path", Type: cty.String, Description: "Path of the kubeconfig on the node (the component's `--kubeconfig`)."},
	{Name: "expiration", Type: cty.String, Description: "When the token on the node expires (RFC 3339); known after apply when a token is requested."},
}

func (NodeIdentity) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_node_identity",
		Summary: "Give a node component (cloud-node-manager, kube-proxy) its own ServiceAccount, least-privilege RBAC and a renewed bound token on the node.",
		Description: "Makes, for `node_name`, the ServiceAccount `wsu-<name>-<node_name>` in `namespace` and the " +
			"ClusterRoleBinding `wsu:<name>:<node_name>`. With `cluster_role` set the binding grants that existing " +
			"ClusterRole and nothing else (kube-proxy: `system:node-proxier`), and no ClusterRole is made. Without " +
			"it (cloud-node-manager) the binding grants the ClusterRole `wsu:<name>:<node_name>`, made with " +
			"cloud-node-manager's rights narrowed " +
			"to that node: `get`, `list`, `watch`, `update`, `patch` on `nodes` and `patch` on `nodes/status` with " +
			"`resourceNames: [<node_name>]` (cloud-node-manager lists and watches its Node with the field selector " +
			"`metadata.name=<node>`, which RBAC authorises by name), and `create`, `patch`, `update` on `events` " +
			"(core and `events.k8s.io`). All carry `" + managedByLabel + ": " + ManagedBy + "`; a binding to " +
			"another role is replaced (its `roleRef` cannot change).\n\n" +
			"The token comes from the TokenRequest API, bound to the Node object (deleting the Node revokes it), " +
			"lifetime `token_ttl`. It is written on the node to `<dir>\\token` (SYSTEM and Administrators only) " +
			"beside `<dir>\\kubeconfig`, which names `api_server`, the CA file `ca_file` on the node and the " +
			"token by `tokenFile`. The token is never shown: the plan says only whether it will be requested " +
			"and why. It is renewed when it is missing, unreadable, for another ServiceAccount (or an earlier " +
			"one of the same name) or node, or when more than `renew_after` of its lifetime is gone; otherwise " +
			"the plan shows no change. `state = \"absent\"` deletes the files, the binding, the role (when it " +
			"made one) and the ServiceAccount (which revokes its tokens).",
		Target: modules.TargetHost,
		Attributes: withConn(
			modules.Attribute{Name: "node_name", Type: cty.String, Required: true, Description: "The Node the component manages."},
			modules.Attribute{Name: "namespace", Type: cty.String, Required: true, Description: "Namespace of the ServiceAccount."},
			modules.Attribute{Name: "name", Type: cty.String, Default: cty.StringVal("cloud-node-manager"), Description: "The component, in the objects' names."},
			modules.Attribute{Name: "cluster_role", Type: cty.String, Description: "An existing ClusterRole to bind, e.g. `system:node-proxier` for kube-proxy. Default: a per-node ClusterRole with cloud-node-manager's rights on this Node only."},
			modules.Attribute{Name: "api_server", Type: cty.String, Description: "API server URL the node reaches (the bootstrap kubeconfig's). Required unless `state = \"absent\"`."},
			modules.Attribute{Name: "ca_file", Type: cty.String, Default: cty.StringVal(`C:\k\bootstrap-ca.crt`), Description: "Path on the node of the CA bundle that verifies `api_server`."},
			modules.Attribute{Name: "dir", Type: cty.String, Description: "Directory on the node for `token` and `kubeconfig`. Default: `C:\\k\\<name>`."},
			modules.Attribute{Name: "token_ttl", Type: cty.Number, Default: cty.NumberIntVal(7 * 24 * 3600), Description: "Lifetime asked for a new token, in seconds (at least 600; the API server may cap it)."},
			modules.Attribute{Name: "renew_after", Type: cty.Number, Default: cty.NumberFloatVal(0.5), Description: "Fraction of the token's lifetime after which a run requests a new one (more than 0, less than 1)."},
			modules.Attribute{Name: "state", Type: cty.String, Default: cty.StringVal("present"), Description: "`\"present\"` or `\"absent\"`."},
		),
		Results: nodeIdentityResults,
		Example: `task "cloud-node-manager identity" {
  k8s_node_identity {
    node_name  = "win-01"
    namespace  = "kube-system"
    api_server = "https://10.0.0.1:6443"
  }
}`,
	}
}

func (NodeIdentity) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateNodeName(cfg, "node_name")
	state, _ := str(get(cfg, "state"))
	if v := get(cfg, "state"); v.IsKnown() && state != "present" && state != "absent" {
		diags = append(diags, cfg.Error("state", "Invalid state", `state must be "present" or "absent".`))
	}
	if r, ok := str(get(cfg, "cluster_role")); ok {
		if errs := content.IsPathSegmentName(r); r == "" || len(errs) > 0 {
			diags = append(diags, cfg.Error("cluster_role", "Invalid cluster_role", fmt.Sprintf("%q is not a ClusterRole name %v.", r, errs)))
		}
	}
	if ns, ok := str(get(cfg, "namespace")); ok && len(validation.IsDNS1123Label(ns)) > 0 {
		diags = append(diags, cfg.Error("namespace", "Invalid namespace", fmt.Sprintf("%q is not a namespace name.", ns)))
	}
	if n, ok := str(get(cfg, "name")); ok && len(validation.IsDNS1123Label(n)) > 0 {
		diags = append(diags, cfg.Error("name", "Invalid name", fmt.Sprintf("%q must be a DNS label.", n)))
	}
	if u, ok := str(get(cfg, "api_server")); ok && !strings.HasPrefix(u, "https://") {
		diags = append(diags, cfg.Error("api_server", "Invalid api_server", fmt.Sprintf("api_server must be an https URL, got %q.", u)))
	} else if v := get(cfg, "api_server"); v.IsKnown() && v.IsNull() && state == "present" {
		diags = append(diags, cfg.Error("api_server", "Missing api_server", "The kubeconfig written on the node needs the API server URL the node reaches."))
	}
	if v := get(cfg, "token_ttl"); v.IsKnown() && !v.IsNull() {
		if n, _ := v.AsBigFloat().Int64(); n < 600 {
			diags = append(diags, cfg.Error("token_ttl", "Invalid token_ttl", "token_ttl must be at least 600 seconds (the TokenRequest API's minimum)."))
		}
	}
	if v := get(cfg, "renew_after"); v.IsKnown() && !v.IsNull() {
		if f, _ := v.AsBigFloat().Float64(); f <= 0 || f >= 1 {
			diags = append(diags, cfg.Error("renew_after", "Invalid renew_after", "renew_after must be more than 0 and less than 1."))
		}
	}
	return diags
}

// identity is what the task asks for, read from its configuration.
type identity struct {
	node, ns, sa, role, api, caFile, dir string
	// clusterRole is the ClusterRole the binding grants: role (made here,
	// ownRole) or the one cluster_role names.
	clusterRole string
	ownRole     bool
	ttl         time.Duration
	renewAfter  float64
	absent      bool
}

func (id identity) tokenPath() string      { return id.dir + `\token` }
func (id identity) kubeconfigPath() string { return id.dir + `\kubeconfig` }

func readIdentity(cfg modules.Config) identity {
	id := identity{}
	id.node, _ = str(get(cfg, "node_name"))
	id.ns, _ = str(get(cfg, "namespace"))
	name, _ := str(get(cfg, "name"))
	id.sa = "wsu-" + name + "-" + id.node
	id.role = "wsu:" + name + ":" + id.node
	id.clusterRole, _ = str(get(cfg, "cluster_role"))
	if id.ownRole = id.clusterRole == ""; id.ownRole {
		id.clusterRole = id.role
	}
	id.api, _ = str(get(cfg, "api_server"))
	id.caFile, _ = str(get(cfg, "ca_file"))
	id.dir, _ = str(get(cfg, "dir"))
	if id.dir == "" {
		id.dir = `C:\k\` + name
	}
	id.dir = strings.TrimRight(id.dir, `\`)
	id.ttl = seconds(get(cfg, "token_ttl"))
	id.renewAfter, _ = get(cfg, "renew_after").AsBigFloat().Float64()
	state, _ := str(get(cfg, "state"))
	id.absent = state == "absent"
	return id
}

func (id identity) labels() map[string]string { return map[string]string{managedByLabel: ManagedBy} }

// rules are cloud-node-manager's rights (cloud-provider-azure's ClusterRole),
// the writes narrowed to the node.
func (id identity) rules() []rbacv1.PolicyRule {
	own := []string{id.node}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch", "update"}, ResourceNames: own},
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}, ResourceNames: own},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
	}
}

func (id identity) kubeconfig() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    tokenFile: %s
contexts:
- name: %s
  context:
    cluster: cluster
    user: %s
current-context: %s
`, yamlQuote(id.api), yamlQuote(id.caFile), id.sa, yamlQuote(id.tokenPath()), id.sa, id.sa, id.sa)
}

// yamlQuote quotes s as a YAML double-quoted scalar (JSON's quoting is).
func yamlQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// idObserved is the live state: the cluster's objects and the node's files.
type idObserved struct {
	sa          *corev1.ServiceAccount
	role        *rbacv1.ClusterRole
	binding     *rbacv1.ClusterRoleBinding
	node        *corev1.Node
	kubeconfig  []byte // nil: missing
	tokenExists bool
	claims      *tokenClaims // nil: no readable token
}

// tokenClaims are the parts of a service account token renewal looks at.
type tokenClaims struct {
	IssuedAt int64 `json:"iat"`
	Expires  int64 `json:"exp"`
	Kube     struct {
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
		Node struct {
			Name string `json:"name"`
		} `json:"node"`
		Namespace string `json:"namespace"`
	} `json:"kubernetes.io"`
}

// decodeClaims reads a JWT's payload without checking its signature: the
// token is wsu's own, and a forged one gains nothing (the API server checks
// it); a token that does not decode is renewed.
func decodeClaims(token []byte) *tokenClaims {
	parts := strings.Split(strings.TrimSpace(string(token)), ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil
	}
	var c tokenClaims
	if json.Unmarshal(payload, &c) != nil || c.Expires == 0 {
		return nil
	}
	return &c
}

const maxTokenBytes = 16 << 10

func (m NodeIdentity) observe(ctx context.Context, cfg modules.Config, cl *kube.Client, h host.Host, id identity) (idObserved, hcl.Diagnostics) {
	var o idObserved
	nodeFile := func(path string, into func([]byte)) func() hcl.Diagnostics {
		return func() hcl.Diagnostics {
			b, err := h.ReadFile(ctx, path, maxTokenBytes)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil
			case err != nil:
				return hcl.Diagnostics{cfg.Error("dir", "Cannot read the node's files", fmt.Sprintf("%s: %v", path, err))}
			}
			into(b)
			return nil
		}
	}
	diags := modutil.Together(
		func() hcl.Diagnostics {
			var err error
			o.sa, err = getOrNil(cl.Kube.CoreV1().ServiceAccounts(id.ns).Get(ctx, id.sa, metav1.GetOptions{}))
			return idAPIError(cfg, "namespace", "Cannot read the ServiceAccount", err)
		},
		func() hcl.Diagnostics {
			if !id.ownRole {
				return nil
			}
			var err error
			o.role, err = getOrNil(cl.Kube.RbacV1().ClusterRoles().Get(ctx, id.role, metav1.GetOptions{}))
			return idAPIError(cfg, "name", "Cannot read the ClusterRole", err)
		},
		func() hcl.Diagnostics {
			var err error
			o.binding, err = getOrNil(cl.Kube.RbacV1().ClusterRoleBindings().Get(ctx, id.role, metav1.GetOptions{}))
			return idAPIError(cfg, "name", "Cannot read the ClusterRoleBinding", err)
		},
		func() hcl.Diagnostics {
			if id.absent {
				return nil
			}
			var err error
			o.node, err = getOrNil(cl.Kube.CoreV1().Nodes().Get(ctx, id.node, metav1.GetOptions{}))
			return idAPIError(cfg, "node_name", "Cannot read the Node", err)
		},
		nodeFile(id.kubeconfigPath(), func(b []byte) { o.kubeconfig = b }),
		nodeFile(id.tokenPath(), func(b []byte) { o.tokenExists, o.claims = true, decodeClaims(b) }),
	)
	return o, diags
}

// renewReason says why the token on the node must be replaced, "" when it
// serves on.
func (id identity) renewReason(o idObserved, now time.Time) string {
	c := o.claims
	switch {
	case !o.tokenExists:
		return "no token on the node"
	case c == nil:
		return "the token on the node is not a service account token"
	case o.sa == nil || c.Kube.ServiceAccount.UID != string(o.sa.UID) || c.Kube.ServiceAccount.Name != id.sa || c.Kube.Namespace != id.ns:
		return "the token is for another ServiceAccount"
	case c.Kube.Node.Name != id.node:
		return "the token is not bound to this Node"
	}
	life := c.Expires - c.IssuedAt
	used := now.Unix() - c.IssuedAt
	if life <= 0 || float64(used) >= id.renewAfter*float64(life) {
		return fmt.Sprintf("%d%% of its lifetime is gone (renewed after %g%%)", pct(used, life), id.renewAfter*100)
	}
	return ""
}

func pct(part, whole int64) int64 {
	if whole <= 0 {
		return 100
	}
	return part * 100 / whole
}

func roleDiffers(have *rbacv1.ClusterRole, id identity) bool {
	if have == nil || len(have.Rules) != len(id.rules()) {
		return true
	}
	for i, r := range id.rules() {
		h := have.Rules[i]
		if !slices.Equal(h.APIGroups, r.APIGroups) || !slices.Equal(h.Resources, r.Resources) ||
			!slices.Equal(h.Verbs, r.Verbs) || !slices.Equal(h.ResourceNames, r.ResourceNames) {
			return true
		}
	}
	return false
}

func (id identity) wantBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: id.role, Labels: id.labels()},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id.clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: id.sa, Namespace: id.ns}},
	}
}

func bindingDiffers(have *rbacv1.ClusterRoleBinding, id identity) bool {
	w := id.wantBinding()
	return have == nil || have.RoleRef != w.RoleRef || !slices.Equal(have.Subjects, w.Subjects)
}

// idDiff is the change, shared by Plan and Apply.
func (id identity) diff(o idObserved, now time.Time) *modules.Change {
	if id.absent {
		return id.removal(o)
	}
	var fields []modules.FieldChange
	add := func(name, old, new string) {
		ov := cty.NullVal(cty.String)
		if old != "" {
			ov = cty.StringVal(old)
		}
		fields = append(fields, modules.FieldChange{Name: name, Old: ov, New: cty.StringVal(new)})
	}
	if o.sa == nil {
		add("service_account", "", id.ns+"/"+id.sa)
	}
	if id.ownRole && roleDiffers(o.role, id) {
		old := ""
		if o.role != nil {
			old = "(other rules)"
		}
		add("cluster_role", old, id.role+" (its Node only: get, list, watch, patch, update, status patch; events)")
	}
	if bindingDiffers(o.binding, id) {
		old, grants := "", ""
		if o.binding != nil && o.binding.RoleRef.Name != id.clusterRole {
			old = "grants " + o.binding.RoleRef.Name
		}
		if !id.ownRole {
			grants = " (grants " + id.clusterRole + ")"
		}
		add("cluster_role_binding", old, id.role+grants+" → "+id.ns+"/"+id.sa)
	}
	if string(o.kubeconfig) != id.kubeconfig() {
		old := ""
		if o.kubeconfig != nil {
			old = "(other content)"
		}
		add("kubeconfig", old, id.kubeconfigPath())
	}
	if why := id.renewReason(o, now); why != "" {
		fields = append(fields, modules.FieldChange{Name: "token", Old: cty.StringVal(why), New: cty.StringVal("(sensitive: new token, " + id.tokenPath() + ")")})
	}
	if len(fields) == 0 {
		return nil
	}
	action := modules.Update
	if o.sa == nil && o.role == nil && o.binding == nil {
		action = modules.Create // o.role is nil too when the role is not ours
	}
	return &modules.Change{Action: action, Subject: id.ns + "/" + id.sa, Fields: fields}
}

// removal deletes what exists of the identity.
func (id identity) removal(o idObserved) *modules.Change {
	var fields []modules.FieldChange
	del := func(name, what string) {
		fields = append(fields, modules.FieldChange{Name: name, Old: cty.StringVal(what), New: cty.NullVal(cty.String)})
	}
	if o.kubeconfig != nil || o.tokenExists {
		del("files", id.dir+`\{kubeconfig,token}`)
	}
	if o.binding != nil && o.binding.Labels[managedByLabel] == ManagedBy {
		del("cluster_role_binding", id.role)
	}
	if o.role != nil && o.role.Labels[managedByLabel] == ManagedBy {
		del("cluster_role", id.role)
	}
	if o.sa != nil && o.sa.Labels[managedByLabel] == ManagedBy {
		del("service_account", id.ns+"/"+id.sa)
	}
	if len(fields) == 0 {
		return nil
	}
	return &modules.Change{Action: modules.Delete, Subject: id.ns + "/" + id.sa, Fields: fields}
}

func (m NodeIdentity) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (id identity) result(o idObserved, renewing bool) cty.Value {
	exp := cty.UnknownVal(cty.String)
	switch {
	case id.absent || (!renewing && o.claims == nil):
		exp = cty.NullVal(cty.String)
	case !renewing:
		exp = cty.StringVal(time.Unix(o.claims.Expires, 0).UTC().Format(time.RFC3339))
	}
	return result(nodeIdentityResults, map[string]cty.Value{
		"service_account": cty.StringVal(id.ns + "/" + id.sa), "kubeconfig_path": cty.StringVal(id.kubeconfigPath()), "expiration": exp,
	})
}

func (m NodeIdentity) prepare(ctx context.Context, cfg modules.Config, h host.Host) (*kube.Client, identity, idObserved, bool, hcl.Diagnostics) {
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() || !known || !cfg.Value.IsWhollyKnown() {
		return nil, identity{}, idObserved{}, false, diags
	}
	id := readIdentity(cfg)
	if errs := validation.IsDNS1123Subdomain(id.sa); len(errs) > 0 {
		return nil, id, idObserved{}, false, hcl.Diagnostics{cfg.Error("node_name", "Node name too long for a ServiceAccount", fmt.Sprintf("The ServiceAccount would be named %q: %v.", id.sa, errs))}
	}
	o, diags := m.observe(ctx, cfg, cl, h, id)
	return cl, id, o, true, diags
}

func (m NodeIdentity) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	_, id, o, known, diags := m.prepare(ctx, req.Config, req.Host)
	if !known || diags.HasErrors() {
		if !known && !diags.HasErrors() {
			return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: knownAfterApply}, Result: unknownResult(nodeIdentityResults)}
		}
		return modules.PlanResponse{Result: unknownResult(nodeIdentityResults), Diagnostics: diags}
	}
	now := m.now()
	return modules.PlanResponse{Change: id.diff(o, now), Result: id.result(o, !id.absent && id.renewReason(o, now) != "")}
}

func (m NodeIdentity) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	cl, id, o, known, diags := m.prepare(ctx, cfg, req.Host)
	if diags.HasErrors() || !known {
		return modules.ApplyResponse{Result: unknownResult(nodeIdentityResults), Diagnostics: append(diags, requireKnown(cfg, "node_name", "namespace", "api_server")...)}
	}
	now := m.now()
	if id.diff(o, now) == nil {
		return modules.ApplyResponse{Result: id.result(o, false)}
	}
	if id.absent {
		if d := id.remove(ctx, cfg, cl, req.Host, o); d.HasErrors() {
			return modules.ApplyResponse{Result: unknownResult(nodeIdentityResults), Diagnostics: d}
		}
		return modules.ApplyResponse{Result: id.result(o, false)}
	}
	exp, d := id.ensure(ctx, cfg, cl, req.Host, o, now)
	if d.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeIdentityResults), Diagnostics: d}
	}
	res := id.result(o, false)
	if !exp.IsZero() {
		res = result(nodeIdentityResults, map[string]cty.Value{
			"service_account": cty.StringVal(id.ns + "/" + id.sa), "kubeconfig_path": cty.StringVal(id.kubeconfigPath()),
			"expiration": cty.StringVal(exp.UTC().Format(time.RFC3339)),
		})
	}
	return modules.ApplyResponse{Result: res}
}

// ensure makes what diff said: the cluster's objects, then the node's files.
// It returns the new token's expiry (zero when the token was kept).
func (id identity) ensure(ctx context.Context, cfg modules.Config, cl *kube.Client, h host.Host, o idObserved, now time.Time) (time.Time, hcl.Diagnostics) {
	if o.sa == nil {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: id.sa, Namespace: id.ns, Labels: id.labels()}}
		created, err := cl.Kube.CoreV1().ServiceAccounts(id.ns).Create(ctx, sa, metav1.CreateOptions{})
		if err != nil {
			return time.Time{}, idAPIError(cfg, "namespace", "Cannot create the ServiceAccount", err)
		}
		o.sa = created
	}
	roles := cl.Kube.RbacV1().ClusterRoles()
	switch want := (&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: id.role, Labels: id.labels()}, Rules: id.rules()}); {
	case !id.ownRole:
	case o.role == nil:
		if _, err := roles.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return time.Time{}, idAPIError(cfg, "name", "Cannot create the ClusterRole", err)
		}
	case roleDiffers(o.role, id):
		want.ResourceVersion = o.role.ResourceVersion
		if _, err := roles.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
			return time.Time{}, idAPIError(cfg, "name", "Cannot update the ClusterRole", err)
		}
	}
	if bindingDiffers(o.binding, id) {
		bindings := cl.Kube.RbacV1().ClusterRoleBindings()
		if o.binding != nil { // roleRef cannot change: replace it
			if err := bindings.Delete(ctx, id.role, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return time.Time{}, idAPIError(cfg, "name", "Cannot replace the ClusterRoleBinding", err)
			}
		}
		if _, err := bindings.Create(ctx, id.wantBinding(), metav1.CreateOptions{}); err != nil {
			return time.Time{}, idAPIError(cfg, "name", "Cannot create the ClusterRoleBinding", err)
		}
	}
	if err := h.MkdirAll(ctx, id.dir, 0o755); err != nil {
		return time.Time{}, hcl.Diagnostics{cfg.Error("dir", "Cannot create the directory", err.Error())}
	}
	var exp time.Time
	if id.renewReason(o, now) != "" {
		token, e, diags := id.requestToken(ctx, cfg, cl, o)
		if diags.HasErrors() {
			return time.Time{}, diags
		}
		if err := h.WriteFile(ctx, id.tokenPath(), strings.NewReader(token), 0o600); err != nil {
			return time.Time{}, hcl.Diagnostics{cfg.Error("dir", "Cannot write the token", err.Error())}
		}
		if err := h.SetFileACL(ctx, id.tokenPath(), host.AdminsOnlyACL()); err != nil {
			return time.Time{}, hcl.Diagnostics{cfg.Error("dir", "Cannot restrict the token file's ACL", err.Error())}
		}
		exp = e
	}
	if string(o.kubeconfig) != id.kubeconfig() {
		if err := h.WriteFile(ctx, id.kubeconfigPath(), bytes.NewReader([]byte(id.kubeconfig())), 0o644); err != nil {
			return time.Time{}, hcl.Diagnostics{cfg.Error("dir", "Cannot write the kubeconfig", err.Error())}
		}
	}
	return exp, nil
}

// requestToken asks the TokenRequest API for a token bound to the Node.
func (id identity) requestToken(ctx context.Context, cfg modules.Config, cl *kube.Client, o idObserved) (string, time.Time, hcl.Diagnostics) {
	if o.node == nil {
		return "", time.Time{}, hcl.Diagnostics{cfg.Error("node_name", "Node not registered",
			fmt.Sprintf("Node %s does not exist yet; its token is bound to it, so this task runs after the kubelet registered.", id.node))}
	}
	secs := int64(id.ttl / time.Second)
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		ExpirationSeconds: &secs,
		BoundObjectRef:    &authnv1.BoundObjectReference{APIVersion: "v1", Kind: "Node", Name: id.node, UID: o.node.UID},
	}}
	got, err := cl.Kube.CoreV1().ServiceAccounts(id.ns).CreateToken(ctx, id.sa, tr, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, idAPIError(cfg, "node_name", "Cannot request the token", err)
	}
	return got.Status.Token, got.Status.ExpirationTimestamp.Time, nil
}

// remove deletes the node's files first (the component loses its identity
// on the node), then the binding, the role and the ServiceAccount.
func (id identity) remove(ctx context.Context, cfg modules.Config, cl *kube.Client, h host.Host, o idObserved) hcl.Diagnostics {
	for _, p := range []string{id.tokenPath(), id.kubeconfigPath()} {
		if err := h.Remove(ctx, p, false); err != nil {
			return hcl.Diagnostics{cfg.Error("dir", "Cannot remove the node's files", err.Error())}
		}
	}
	gone := func(err error) bool { return err == nil || apierrors.IsNotFound(err) }
	if o.binding != nil && o.binding.Labels[managedByLabel] == ManagedBy {
		if err := cl.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, id.role, metav1.DeleteOptions{}); !gone(err) {
			return idAPIError(cfg, "name", "Cannot delete the ClusterRoleBinding", err)
		}
	}
	if o.role != nil && o.role.Labels[managedByLabel] == ManagedBy {
		if err := cl.Kube.RbacV1().ClusterRoles().Delete(ctx, id.role, metav1.DeleteOptions{}); !gone(err) {
			return idAPIError(cfg, "name", "Cannot delete the ClusterRole", err)
		}
	}
	if o.sa != nil && o.sa.Labels[managedByLabel] == ManagedBy {
		if err := cl.Kube.CoreV1().ServiceAccounts(id.ns).Delete(ctx, id.sa, metav1.DeleteOptions{}); !gone(err) {
			return idAPIError(cfg, "namespace", "Cannot delete the ServiceAccount", err)
		}
	}
	return nil
}

// idAPIError is apiError naming the permissions this module needs, which
// are files of their own, not wsu-cluster-role.yaml; nil for a nil err.
func idAPIError(cfg modules.Config, attr, summary string, err error) hcl.Diagnostics {
	if err == nil {
		return nil
	}
	detail := err.Error()
	if apierrors.IsForbidden(err) {
		detail += "\n\nThe identity wsu runs as lacks this permission: on Azure bind deploy/rbac/azure-cloud-node-manager.yaml to it " +
			"(docs/kubernetes.md, \"cloud-node-manager's own identity\"); for kube-proxy's identity on kubeadm, " +
			"deploy/rbac/kubeadm-kube-proxy.yaml (\"kube-proxy's own identity\")."
	}
	return hcl.Diagnostics{cfg.Error(attr, summary, detail)}
}
