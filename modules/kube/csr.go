package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// CSRApprove approves a joining node's kubelet CSRs, and only those that
// pass every approval rule.
type CSRApprove struct{ Clusters }

var (
	_ modules.Module    = CSRApprove{}
	_ modules.Validator = CSRApprove{}
)

// csrGCAge is how long the API server keeps approved CSRs (the csrcleaner
// controller deletes them after an hour). A Node younger than this whose
// serving CSR cannot be found has not had one approved yet.
const csrGCAge = time.Hour

var csrApproveAttrs = withConn(
	modules.Attribute{Name: "node_name", Type: cty.String, Required: true,
		Description: "Name the node registers as (the kubelet's lower-cased host name, or `--hostname-override`)."},
	modules.Attribute{Name: "addresses", Type: cty.List(cty.String), Default: cty.ListValEmpty(cty.String),
		Description: "The instance's addresses as the admin gave them (its node IP, the address wsu reaches it at), never what the host reports; a serving certificate may name only these (and `hostnames`). A DNS name counts as a host name and adds the IPs it resolves to on the machine running wsu. Empty entries are ignored."},
	modules.Attribute{Name: "hostnames", Type: cty.List(cty.String), Default: cty.ListValEmpty(cty.String),
		Description: "The instance's DNS names, as the admin gave them (the node name, a DNS address), not what the host reports; a serving certificate may name only these (and `addresses`). Empty entries are ignored."},
	modules.Attribute{Name: "service_cidrs", Type: cty.List(cty.String), Default: cty.ListValEmpty(cty.String),
		Description: "Service networks no serving certificate may name an address in, beyond the ServiceCIDR `kubernetes` the module reads itself (join passes `k8s_cluster_network`'s). Empty entries are ignored."},
	modules.Attribute{Name: "client", Type: cty.Bool, Default: cty.True,
		Description: "Expect the kubelet's client CSR (`kubernetes.io/kube-apiserver-client-kubelet`). Satisfied once the Node exists."},
	modules.Attribute{Name: "serving", Type: cty.Bool, Default: cty.True,
		Description: "Expect the kubelet's serving CSR (`kubernetes.io/kubelet-serving`, needs `serverTLSBootstrap`)."},
	modules.Attribute{Name: "client_requesters", Type: cty.List(cty.String),
		Default: cty.ListVal([]cty.Value{cty.StringVal(kube.OpenShiftBootstrapper)}),
		Description: "Usernames allowed to request the client certificate: OpenShift's node-bootstrapper service account by default; " +
			"for kubeadm, `system:bootstrap:<token id>` (`k8s_bootstrap_token`'s `requester`; in its default group `" +
			kube.WSUBootstrapGroup + "` nothing else approves the client CSR, so these rules are the gate)."},
	modules.Attribute{Name: "not_before", Type: cty.String,
		Description: "When the instance's join began (RFC 3339, e.g. `2026-11-22T10:00:00Z`): CSRs created more than a minute of clock skew earlier are refused. " +
			"Default: when the run started. Set it earlier to approve a kubelet's CSR left pending by an earlier run, or restart the kubelet so it asks again."},
	modules.Attribute{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(600),
		Description: "Seconds to wait for the expected CSRs before failing."},
	modules.Attribute{Name: "interval", Type: cty.Number, Default: cty.NumberIntVal(2),
		Description: "Seconds between looks at the CSRs at most: a new CSR for the node or a change to its Node (seen by the run's shared watches) makes it look at once."},
)

var rejectedType = cty.Object(map[string]cty.Type{
	"name": cty.String, "kind": cty.String, "rule": cty.String, "reason": cty.String,
})

var csrApproveResults = []modules.Attribute{
	{Name: "approved", Type: cty.List(cty.String), Description: "Names of the CSRs this task approved."},
	{Name: "rejected", Type: cty.List(rejectedType),
		Description: "Pending CSRs for this node that break a rule and were left alone: `{ name, kind, rule, reason }`."},
	{Name: "waited", Type: cty.Number, Description: "Seconds spent waiting; 0 when nothing was needed."},
}

func (CSRApprove) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_csr_approve",
		Summary: "Approve a joining node's kubelet CSRs that pass every approval rule, and nothing else.",
		Description: "A kubelet joining for the first time asks for a client certificate (as the bootstrap " +
			"identity) and then a serving certificate (as `system:node:<name>`); these CSRs exist only on " +
			"that first join. Apply waits up to `timeout` for the expected ones and approves each pending " +
			"CSR for this node that passes every rule: an RSA (2048-8192 bits) or ECDSA P-256/P-384 key, CN " +
			"`system:node:<node_name>`, organisation exactly `system:nodes`, created no earlier than " +
			"`not_before` (less a minute); for a client CSR no SANs, usages digital signature (+ key " +
			"encipherment) + client auth, a requester in `client_requesters`, no Node of that name yet, and " +
			"only one per join (the first valid one); for a serving CSR requester `system:node:<node_name>` " +
			"in groups `system:nodes` and `system:authenticated`, usages server auth plus only digital " +
			"signature/key encipherment, a registered Node, no SAN naming the cluster's own API (`kubernetes`, " +
			"`kubernetes.default`, `kubernetes.default.svc[.*]`, an address in the service network or of the API " +
			"server: the `default/kubernetes` Service and its EndpointSlice, read by the module), and IP and DNS " +
			"SANs all among `addresses`/`hostnames` and among the Node's own `status.addresses`. A CSR for this node that " +
			"breaks a rule is left pending and listed in `rejected` with the rule, and warned about; CSRs of " +
			"other nodes are never touched. docs/kubernetes.md lists the rules.\n\n" +
			"The plan shows no change when nothing is left to do: the client CSR is done once the Node " +
			"exists, the serving CSR once one for this node is approved — or, when the Node is older than " +
			"the hour the API server keeps approved CSRs, when none is pending.",
		Target:     modules.TargetController,
		Attributes: csrApproveAttrs,
		Results:    csrApproveResults,
		Example: `task "csrs" {
  k8s_csr_approve {
    node_name = lower(host.facts.hostname)
    addresses = [host.facts.ip]
    hostnames = [lower(host.facts.hostname)]
    timeout   = 900
  }
}`,
	}
}

func (CSRApprove) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateNodeName(cfg, "node_name")
	// Empty entries are skipped rather than refused: a host without an FQDN
	// fact gives "", and an empty name can never match a SAN.
	if v := get(cfg, "client_requesters"); v.IsWhollyKnown() {
		if !v.IsNull() {
			for i, el := range v.AsValueSlice() {
				if s, ok := str(el); !ok || s == "" {
					diags = append(diags, cfg.Error("client_requesters", "Invalid requester", fmt.Sprintf("client_requesters[%d] is null or empty.", i)))
				} else if strings.HasPrefix(s, "system:node:") {
					// A node's own identity renewing a client certificate is
					// not a first join; approving it here would let any node
					// mint certificates for this name.
					diags = append(diags, cfg.Error("client_requesters", "Node identity as client requester",
						fmt.Sprintf("%q is a node identity; client_requesters names the bootstrap identity.", s)))
				}
			}
		}
		if get(cfg, "client").True() && (v.IsNull() || v.LengthInt() == 0) {
			diags = append(diags, cfg.Error("client_requesters", "No client requesters",
				"client = true needs at least one identity allowed to request the client certificate."))
		}
	}
	if v := get(cfg, "not_before"); v.IsKnown() && !v.IsNull() {
		if _, err := notBefore(v); err != nil {
			diags = append(diags, cfg.Error("not_before", "Invalid not_before", err.Error()))
		}
	}
	c, s := get(cfg, "client"), get(cfg, "serving")
	if c.IsKnown() && s.IsKnown() && !c.IsNull() && !s.IsNull() && c.False() && s.False() {
		diags = append(diags, cfg.Error("client", "Nothing to approve", "client and serving are both false."))
	}
	if s.IsKnown() && !s.IsNull() && s.True() {
		a, h := get(cfg, "addresses"), get(cfg, "hostnames")
		if a.IsWhollyKnown() && h.IsWhollyKnown() && len(stringList(cfg, "addresses"))+len(stringList(cfg, "hostnames")) == 0 {
			diags = append(diags, cfg.Error("addresses", "No addresses",
				"serving = true needs the instance's addresses or hostnames: a serving CSR naming anything else is never approved."))
		}
	}
	if v := get(cfg, "service_cidrs"); v.IsWhollyKnown() {
		for _, c := range stringList(cfg, "service_cidrs") {
			if err := new(kube.ClusterAddresses).AddServiceNetworks(c); err != nil {
				diags = append(diags, cfg.Error("service_cidrs", "Invalid service network", err.Error()+"; give a CIDR such as 10.96.0.0/12."))
			}
		}
	}
	return append(diags, validateSeconds(cfg, []string{"timeout"}, []string{"interval"})...)
}

// notBefore parses not_before.
func notBefore(v cty.Value) (time.Time, error) {
	s, _ := str(v)
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not_before %q is not an RFC 3339 time such as 2026-11-22T10:00:00Z", s)
	}
	return t, nil
}

// csrPlan is what the CSRs say about the node right now.
type csrPlan struct {
	want        kube.Expectation
	approvable  []kube.NodeCSR
	rejected    []kube.NodeCSR
	clientDone  bool
	servingDone bool
}

func stringList(cfg modules.Config, name string) []string {
	v := get(cfg, name)
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	var out []string
	for _, el := range v.AsValueSlice() {
		if s, ok := str(el); ok && strings.TrimSpace(s) != "" {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// expectation is what the task records about the instance; the join began
// at not_before, else when the run started (start: the run's cluster
// cache's RunStart).
func expectation(ctx context.Context, cfg modules.Config, start time.Time) kube.Expectation {
	name, _ := str(get(cfg, "node_name"))
	if v := get(cfg, "not_before"); v.IsKnown() && !v.IsNull() {
		if t, err := notBefore(v); err == nil {
			start = t
		}
	}
	return kube.Expectation{
		NodeName:         name,
		Addresses:        kube.WithResolved(ctx, stringList(cfg, "addresses")),
		Hostnames:        stringList(cfg, "hostnames"),
		ClientRequesters: stringList(cfg, "client_requesters"),
		ServiceNetworks:  stringList(cfg, "service_cidrs"),
		NotBefore:        start,
	}
}

// survey reads the node's CSRs and decides what is left to do. start is
// when the run began, the window's start unless not_before says. clientCSR
// is the client CSR this task approved earlier, if any: the join's one.
// The CSRs it reads were listed after since: a look sees every change made
// before it was asked for (the previous look's approvals, and the change
// that woke it, included), yet the run's hosts looking at once share one
// list.
func survey(ctx context.Context, cl *kube.Client, cfg modules.Config, start time.Time, clientCSR string, since time.Time) (csrPlan, error) {
	want := expectation(ctx, cfg, start)
	want.ClientCSR = clientCSR
	var s kube.NodeSurvey
	var err error
	if cl.CSRs != nil {
		s, err = cl.CSRs.NodeCSRs(ctx, want, since)
	} else {
		s, err = kube.NodeCSRs(ctx, cl.Kube, want)
	}
	if err != nil {
		return csrPlan{}, err
	}
	p := csrPlan{want: s.Want}
	p.clientDone = !get(cfg, "client").True() || s.Node != nil
	p.servingDone = !get(cfg, "serving").True()
	servingPending := false
	for _, c := range s.CSRs {
		switch {
		case c.State == kube.CSRApproved && c.Kind == kube.CSRClient:
			p.clientDone = true
		case c.State == kube.CSRApproved && c.Kind == kube.CSRServing:
			p.servingDone = true
		case c.State != kube.CSRPending:
		case c.Err == nil:
			p.approvable = append(p.approvable, c)
		default:
			p.rejected = append(p.rejected, c)
		}
		if c.State == kube.CSRPending && c.Kind == kube.CSRServing && !brokeRule(c.Err, kube.RuleNotBefore) {
			servingPending = true
		}
	}
	// Approved CSRs are gone after an hour; an older node with none
	// pending since the join began joined long ago.
	if !p.servingDone && s.Node != nil && !servingPending {
		p.servingDone = time.Since(s.Node.CreationTimestamp.Time) > csrGCAge
	}
	return p, nil
}

func brokeRule(err error, rule string) bool {
	var re *kube.RuleError
	return errors.As(err, &re) && re.Rule == rule
}

func (p csrPlan) done() bool {
	return p.clientDone && p.servingDone && len(p.approvable) == 0
}

// missing names the CSR kinds still awaited.
func (p csrPlan) missing() string {
	var m []string
	if !p.clientDone {
		m = append(m, "client")
	}
	if !p.servingDone {
		m = append(m, "serving")
	}
	return strings.Join(m, " and ")
}

func rejectedVal(rs []kube.NodeCSR) cty.Value {
	if len(rs) == 0 {
		return cty.ListValEmpty(rejectedType)
	}
	vals := make([]cty.Value, len(rs))
	for i, r := range rs {
		rule, reason := "", r.Err.Error()
		var re *kube.RuleError
		if errors.As(r.Err, &re) {
			rule, reason = re.Rule, re.Detail
		}
		vals[i] = cty.ObjectVal(map[string]cty.Value{
			"name": cty.StringVal(r.Name), "kind": cty.StringVal(r.Kind),
			"rule": cty.StringVal(rule), "reason": cty.StringVal(reason),
		})
	}
	return cty.ListVal(vals)
}

// rejectionWarnings tells the user about each CSR left alone.
func rejectionWarnings(cfg modules.Config, node string, rs []kube.NodeCSR) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, r := range rs {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  fmt.Sprintf("CSR %s for node %s not approved", r.Name, node),
			Detail:   fmt.Sprintf("The %s CSR %s breaks an approval rule and is left pending: %v. Deny it (kubectl certificate deny %s) if it is not expected.", orUnknown(r.Kind), r.Name, r.Err, r.Name),
			Subject:  cfg.Range("node_name"),
		})
	}
	return diags
}

func orUnknown(kind string) string {
	if kind == "" {
		return "non-kubelet"
	}
	return kind
}

func (m CSRApprove) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	name, nameOK := str(get(cfg, "node_name"))
	subject := "approve kubelet CSRs of node " + knownAfterApply
	if nameOK {
		subject = "approve kubelet CSRs of node " + strings.ToLower(name)
	}
	pending := func(approvable cty.Value, diags hcl.Diagnostics) modules.PlanResponse {
		return modules.PlanResponse{
			Change: &modules.Change{Action: modules.Run, Subject: subject,
				Fields: []modules.FieldChange{{Name: "approve", Old: cty.NullVal(cty.List(cty.String)), New: approvable}}},
			Result:      unknownResult(csrApproveResults),
			Diagnostics: diags,
		}
	}
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(csrApproveResults), Diagnostics: diags}
	}
	if !known || !cfg.Value.IsWhollyKnown() {
		return pending(cty.UnknownVal(cty.List(cty.String)), nil)
	}
	p, err := survey(ctx, cl, cfg, m.Cache.RunStart(), "", time.Now())
	switch {
	case err != nil && transient(err):
		return pending(cty.UnknownVal(cty.List(cty.String)), hcl.Diagnostics{{Severity: hcl.DiagWarning,
			Summary: "Cannot read CSRs yet", Detail: err.Error(), Subject: cfg.Range("node_name")}})
	case err != nil:
		return modules.PlanResponse{Result: unknownResult(csrApproveResults), Diagnostics: apiError(cfg, "node_name", "Cannot read CSRs", err)}
	}
	warnings := rejectionWarnings(cfg, strings.ToLower(name), p.rejected)
	if p.done() {
		return modules.PlanResponse{
			Result: result(csrApproveResults, map[string]cty.Value{
				"approved": cty.ListValEmpty(cty.String), "rejected": rejectedVal(p.rejected), "waited": cty.NumberIntVal(0)}),
			Diagnostics: warnings,
		}
	}
	var names []string
	after := p
	for _, c := range p.approvable {
		names = append(names, c.Name)
		after.clientDone = after.clientDone || c.Kind == kube.CSRClient
		after.servingDone = after.servingDone || c.Kind == kube.CSRServing
	}
	approve := modutil.Strings(names)
	if !after.clientDone || !after.servingDone {
		// Apply waits for the kubelet to ask; what it approves is not
		// known yet.
		approve = cty.UnknownVal(cty.List(cty.String))
	}
	resp := pending(approve, warnings)
	// The engine shows plan and apply diagnostics together: apply warns
	// only about CSRs the plan did not.
	resp.Change.Private = map[string]string{warnedKey: strings.Join(csrNames(p.rejected), ",")}
	return resp
}

// warnedKey lists, in Change.Private, the CSRs the plan warned about.
const warnedKey = "warned"

func csrNames(cs []kube.NodeCSR) []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

func (m CSRApprove) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(csrApproveAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(csrApproveResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(csrApproveResults), Diagnostics: diags}
	}
	name, _ := str(get(cfg, "node_name"))
	name = strings.ToLower(name)
	timeout, interval := seconds(get(cfg, "timeout")), seconds(get(cfg, "interval"))

	var (
		approved  []string
		clientCSR string       // the join's one client CSR, once approved here
		rejected  rejectionLog // the latest verdict on each CSR left alone
		last      csrPlan
	)
	res, err := waitFor(ctx, timeout, interval, []watchOn{{cl.CSRChanges, name}, {cl.NodeChanges, name}}, func(ctx context.Context) (bool, string, error) {
		// A look sees the CSRs as of when it began, or later: one woken by
		// a CSR's change must not be answered by a list taken before the
		// change, or it waits the whole interval for the next look.
		p, err := survey(ctx, cl, cfg, m.Cache.RunStart(), clientCSR, time.Now())
		if err != nil {
			return false, "", err
		}
		for _, c := range p.approvable {
			err := kube.ApproveCSR(ctx, cl.Kube, c.Name, p.want)
			var re *kube.RuleError
			switch {
			case errors.Is(err, kube.ErrNotPending):
				continue // someone else decided it meanwhile
			case errors.As(err, &re):
				p.rejected = append(p.rejected, kube.NodeCSR{Name: c.Name, Kind: c.Kind, State: kube.CSRPending, Err: re})
				continue
			case err != nil:
				return false, "", err
			}
			approved = append(approved, c.Name)
			if c.Kind == kube.CSRClient {
				p.clientDone, clientCSR = true, c.Name
			} else {
				p.servingDone = true
			}
		}
		p.approvable = nil
		rejected.record(p.rejected, approved)
		last = p
		if p.done() {
			return true, "done", nil
		}
		return false, fmt.Sprintf("no approvable %s CSR yet (%d approved, %d rejected)", p.missing(), len(approved), len(rejected)), nil
	})
	return csrApplyResponse(ctx, cfg, req.Change, applyOutcome{
		name: name, timeout: timeout, approved: approved, rejected: rejected, last: last, res: res, err: err})
}

// applyOutcome is what Apply's wait ended with.
type applyOutcome struct {
	name     string
	timeout  time.Duration
	approved []string
	rejected rejectionLog
	last     csrPlan
	res      pollResult
	err      error
}

// rejectionLog keeps the latest verdict on each CSR left alone, in the
// order first seen: a CSR refused while its Node was not registered yet
// may pass a later look, and then it is no longer a rejection.
type rejectionLog []kube.NodeCSR

func (l *rejectionLog) record(rs []kube.NodeCSR, approved []string) {
	for _, r := range rs {
		if i := slices.IndexFunc(*l, func(o kube.NodeCSR) bool { return o.Name == r.Name }); i >= 0 {
			(*l)[i] = r
		} else {
			*l = append(*l, r)
		}
	}
	*l = slices.DeleteFunc(*l, func(o kube.NodeCSR) bool { return slices.Contains(approved, o.Name) })
}

// csrApplyResponse reports an Apply: its result, a warning for each CSR
// left alone that the plan did not warn about, and why the wait failed.
func csrApplyResponse(ctx context.Context, cfg modules.Config, change *modules.Change, o applyOutcome) modules.ApplyResponse {
	out := result(csrApproveResults, map[string]cty.Value{
		"approved": modutil.Strings(o.approved), "rejected": rejectedVal(o.rejected), "waited": waitedVal(o.res.waited)})
	var warned []string
	if change != nil && change.Private[warnedKey] != "" {
		warned = strings.Split(change.Private[warnedKey], ",")
	}
	unwarned := slices.DeleteFunc(slices.Clone(o.rejected), func(r kube.NodeCSR) bool { return slices.Contains(warned, r.Name) })
	diags := rejectionWarnings(cfg, o.name, unwarned)
	switch {
	case o.err != nil && ctx.Err() != nil:
		diags = append(diags, cfg.Error("node_name", "Stopped waiting for the CSRs of node "+o.name,
			fmt.Sprintf("Interrupted (%v); last observed: %s.", o.err, o.res.last)))
	case o.err != nil:
		diags = append(diags, apiError(cfg, "node_name", "Cannot approve the CSRs of node "+o.name, o.err)...)
	case o.res.timedOut:
		detail := fmt.Sprintf("Waited %s for the %s CSR of node %s; last observed: %s.", o.timeout, o.last.missing(), o.name, o.res.last)
		if len(o.rejected) > 0 {
			detail += " Some CSRs for this node broke approval rules (see the warnings): is node_name, addresses, hostnames, client_requesters or not_before wrong?"
		}
		diags = append(diags, cfg.Error("node_name", "Timed out waiting for the CSRs of node "+o.name, detail))
	}
	return modules.ApplyResponse{Result: out, Diagnostics: diags}
}
