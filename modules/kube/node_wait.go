package kube

import (
	"context"
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// NodeWait blocks until a Node has a condition, by default until it is Ready.
type NodeWait struct{ Clusters }

var (
	_ modules.Module    = NodeWait{}
	_ modules.Validator = NodeWait{}
)

var nodeWaitAttrs = withConn(
	modules.Attribute{Name: "name", Type: cty.String, Required: true,
		Description: "Name of the Node. It need not exist yet: a kubelet that has just started registers it."},
	modules.Attribute{Name: "condition", Type: cty.String, Default: cty.StringVal("Ready"),
		Description: "Node condition type to wait for (`Ready`, `MemoryPressure`, ...)."},
	modules.Attribute{Name: "status", Type: cty.String, Default: cty.StringVal("True"),
		Description: "Condition status wanted: `\"True\"`, `\"False\"` or `\"Unknown\"`."},
	modules.Attribute{Name: "without_taint", Type: cty.String,
		Description: "Also wait until the Node has no taint with this key (`node.cloudprovider.kubernetes.io/uninitialized`, which the cloud node manager removes); null: taints do not matter."},
	modules.Attribute{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(600),
		Description: "Seconds to wait before failing."},
	modules.Attribute{Name: "interval", Type: cty.Number, Default: cty.NumberIntVal(2),
		Description: "Seconds between checks at most: a change to the Node (seen by the run's shared Node watch) makes it check at once."},
)

var nodeWaitResults = []modules.Attribute{
	{Name: "status", Type: cty.String, Description: "The condition's status as last seen; `\"absent\"` when the node does not exist, `\"none\"` when it has no such condition, `\"tainted\"` while it has the taint `without_taint` names."},
	{Name: "waited", Type: cty.Number, Description: "Seconds spent waiting; 0 when the condition already held."},
}

func (NodeWait) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_node_wait",
		Summary: "Wait until a Node is Ready (or has another condition).",
		Description: "Reads the Node's `status.conditions` (and, with `without_taint`, its taints: a Node " +
			"still carrying that taint has not arrived, its status shows as `\"tainted\"`). When the condition already has the wanted " +
			"status the task makes no change; otherwise apply checks again whenever the Node changes, and at least every `interval` seconds, " +
			"until it does or `timeout` passes, then fails with the condition's last status, reason " +
			"and message. A missing Node counts as \"not yet\", as do errors that pass (the API " +
			"server restarting); a refusal by RBAC fails at once.",
		Target:     modules.TargetController,
		Attributes: nodeWaitAttrs,
		Results:    nodeWaitResults,
		Example: `task "node_ready" {
  k8s_node_wait {
    name    = lower(host.facts.hostname)
    timeout = 900
  }
}`,
	}
}

func (NodeWait) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateNodeName(cfg, "name")
	if c, ok := str(get(cfg, "condition")); ok && c == "" {
		diags = append(diags, cfg.Error("condition", "Empty condition", "condition must name a node condition type, like Ready."))
	}
	if s, ok := str(get(cfg, "status")); ok && s != "True" && s != "False" && s != "Unknown" {
		diags = append(diags, cfg.Error("status", "Invalid status",
			fmt.Sprintf("status must be \"True\", \"False\" or \"Unknown\", got %q.", s)))
	}
	return append(diags, validateSeconds(cfg, []string{"timeout"}, []string{"interval"})...)
}

// nodeCondition reads one condition of a node: "absent" when the node does
// not exist and "none" when it lacks the condition. detail is the reason
// and message, for a timeout.
func nodeCondition(ctx context.Context, cl *kube.Client, name, condition, taint string) (status, detail string, err error) {
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "absent", "", nil
	}
	if err != nil {
		return "", "", err
	}
	if taint != "" && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == taint }) {
		return "tainted", "taint " + taint + " still set", nil
	}
	for _, c := range n.Status.Conditions {
		if string(c.Type) == condition {
			return string(c.Status), conditionDetail(c), nil
		}
	}
	return "none", "", nil
}

func conditionDetail(c corev1.NodeCondition) string {
	switch {
	case c.Reason != "" && c.Message != "":
		return c.Reason + ": " + c.Message
	case c.Reason != "":
		return c.Reason
	}
	return c.Message
}

func (m NodeWait) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	name, nameOK := str(get(cfg, "name"))
	cond, condOK := str(get(cfg, "condition"))
	want, wantOK := str(get(cfg, "status"))
	subject := knownAfterApply
	if nameOK && condOK && wantOK {
		subject = fmt.Sprintf("node %s %s=%s", name, cond, want)
	}
	pending := func(observed cty.Value) modules.PlanResponse {
		wantVal := cty.UnknownVal(cty.String)
		if wantOK {
			wantVal = cty.StringVal(want)
		}
		return modules.PlanResponse{
			Change: &modules.Change{Action: modules.Run, Subject: "wait for " + subject,
				Fields: []modules.FieldChange{{Name: "status", Old: observed, New: wantVal}}},
			Result: result(nodeWaitResults, map[string]cty.Value{"status": wantVal, "waited": cty.UnknownVal(cty.Number)}),
		}
	}
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeWaitResults), Diagnostics: diags}
	}
	if !known || !nameOK || !condOK || !wantOK {
		return pending(cty.UnknownVal(cty.String))
	}
	taint, _ := str(get(cfg, "without_taint"))
	status, _, err := nodeCondition(ctx, cl, name, cond, taint)
	switch {
	case err != nil && transient(err):
		// Apply keeps checking through these, so the plan is a wait.
		resp := pending(cty.UnknownVal(cty.String))
		resp.Diagnostics = hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Cannot read node " + name + " yet",
			Detail: err.Error(), Subject: cfg.Range("name")}}
		return resp
	case err != nil:
		return modules.PlanResponse{Result: unknownResult(nodeWaitResults), Diagnostics: apiError(cfg, "name", "Cannot read node "+name, err)}
	case status == want:
		return modules.PlanResponse{Result: result(nodeWaitResults, map[string]cty.Value{
			"status": cty.StringVal(status), "waited": cty.NumberIntVal(0)})}
	}
	return pending(cty.StringVal(status))
}

func (m NodeWait) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(nodeWaitAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeWaitResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeWaitResults), Diagnostics: diags}
	}
	name, _ := str(get(cfg, "name"))
	cond, _ := str(get(cfg, "condition"))
	want, _ := str(get(cfg, "status"))
	taint, _ := str(get(cfg, "without_taint"))
	timeout, interval := seconds(get(cfg, "timeout")), seconds(get(cfg, "interval"))

	var status, detail string
	res, err := waitFor(ctx, timeout, interval, []watchOn{{cl.NodeChanges, name}}, func(ctx context.Context) (bool, string, error) {
		var err error
		status, detail, err = nodeCondition(ctx, cl, name, cond, taint)
		if err != nil {
			return false, "", err
		}
		observed := status
		if detail != "" {
			observed += " (" + detail + ")"
		}
		return status == want, observed, nil
	})
	statusVal := cty.NullVal(cty.String) // never read: errors only
	if status != "" {
		statusVal = cty.StringVal(status)
	}
	out := result(nodeWaitResults, map[string]cty.Value{"status": statusVal, "waited": waitedVal(res.waited)})
	what := fmt.Sprintf("node %s %s=%s", name, cond, want)
	if taint != "" {
		what += " without taint " + taint
	}
	switch {
	case err != nil && ctx.Err() != nil:
		return modules.ApplyResponse{Result: out, Diagnostics: hcl.Diagnostics{cfg.Error("name", "Stopped waiting for "+what,
			fmt.Sprintf("Interrupted (%v); last observed: %s.", err, res.last))}}
	case err != nil:
		return modules.ApplyResponse{Result: out, Diagnostics: apiError(cfg, "name", "Cannot read node "+name, err)}
	case res.timedOut:
		return modules.ApplyResponse{Result: out, Diagnostics: hcl.Diagnostics{cfg.Error("name", "Timed out waiting for "+what,
			fmt.Sprintf("Waited %s; last observed %s: %s.", timeout, cond, res.last))}}
	}
	return modules.ApplyResponse{Result: out}
}
