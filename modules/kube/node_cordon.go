package kube

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// NodeCordon marks a Node unschedulable, or schedulable again.
type NodeCordon struct{ Clusters }

var (
	_ modules.Module    = NodeCordon{}
	_ modules.Validator = NodeCordon{}
)

var nodeCordonAttrs = withConn(append([]modules.Attribute{
	{Name: "name", Type: cty.String, Required: true, Description: "Name of the Node."},
	{Name: "cordoned", Type: cty.Bool, Default: cty.True,
		Description: "`true` keeps new pods off the node (`kubectl cordon`); `false` lets them on again (`kubectl uncordon`)."},
}, ownerAttrs...)...)

var nodeCordonResults = []modules.Attribute{
	{Name: "cordoned", Type: cty.Bool, Description: "Whether the node is unschedulable afterwards."},
}

func (NodeCordon) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_node_cordon",
		Summary: "Cordon or uncordon a Node.",
		Description: "Sets the Node's `spec.unschedulable`. Pods already running stay; use `k8s_node_drain` " +
			"to move them. The node must exist." + ownedOnlyNote,
		Target:     modules.TargetController,
		Attributes: nodeCordonAttrs,
		Results:    nodeCordonResults,
		Example: `task "uncordon" {
  k8s_node_cordon {
    name     = lower(host.facts.hostname)
    cordoned = false
  }
}`,
	}
}

func (NodeCordon) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	return validateNodeName(req.Config, "name")
}

// setUnschedulable patches spec.unschedulable; false removes the field,
// as kubectl uncordon leaves it.
// The patch is guarded by the resourceVersion of the Node the task
// checked (node_owned.go): a Node replaced since is not touched.
func setUnschedulable(ctx context.Context, cl *kube.Client, n *corev1.Node, on bool) error {
	var unschedulable any
	if on {
		unschedulable = true
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": n.ResourceVersion},
		"spec":     map[string]any{"unschedulable": unschedulable},
	})
	if err != nil {
		return err
	}
	_, err = cl.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func (m NodeCordon) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	name, nameOK := str(get(cfg, "name"))
	want := get(cfg, "cordoned")
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeCordonResults), Diagnostics: diags}
	}
	if !known || !nameOK || !want.IsKnown() {
		subject := knownAfterApply
		if nameOK {
			subject = "node " + name
		}
		return modules.PlanResponse{
			Change: &modules.Change{Action: modules.Update, Subject: subject,
				Fields: []modules.FieldChange{{Name: "unschedulable", Old: cty.UnknownVal(cty.Bool), New: want}}},
			Result: result(nodeCordonResults, map[string]cty.Value{"cordoned": want}),
		}
	}
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		summary := "Cannot read node " + name
		if apierrors.IsNotFound(err) {
			summary = "Node " + name + " does not exist"
		}
		return modules.PlanResponse{Result: unknownResult(nodeCordonResults), Diagnostics: apiError(cfg, "name", summary, err)}
	}
	if diags := refuseNode(cfg, n); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeCordonResults), Diagnostics: diags}
	}
	res := result(nodeCordonResults, map[string]cty.Value{"cordoned": want})
	if n.Spec.Unschedulable == want.True() {
		return modules.PlanResponse{Result: res}
	}
	verb := "cordon"
	if !want.True() {
		verb = "uncordon"
	}
	return modules.PlanResponse{
		Change: &modules.Change{Action: modules.Update, Subject: fmt.Sprintf("%s node %s", verb, name),
			Fields: []modules.FieldChange{{Name: "unschedulable", Old: cty.BoolVal(n.Spec.Unschedulable), New: want}}},
		Result: res,
	}
}

func (m NodeCordon) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(nodeCordonAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeCordonResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeCordonResults), Diagnostics: diags}
	}
	name, _ := str(get(cfg, "name"))
	want := get(cfg, "cordoned").True()
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		summary := "Cannot read node " + name
		if apierrors.IsNotFound(err) {
			summary = "Node " + name + " does not exist"
		}
		return modules.ApplyResponse{Result: unknownResult(nodeCordonResults), Diagnostics: apiError(cfg, "name", summary, err)}
	}
	if diags := refuseNode(cfg, n); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeCordonResults), Diagnostics: diags}
	}
	if err := setUnschedulable(ctx, cl, n, want); err != nil {
		return modules.ApplyResponse{Result: unknownResult(nodeCordonResults), Diagnostics: apiError(cfg, "name", "Cannot cordon node "+name, err)}
	}
	return modules.ApplyResponse{Result: result(nodeCordonResults, map[string]cty.Value{"cordoned": cty.BoolVal(want)})}
}
