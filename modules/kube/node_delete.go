package kube

import (
	"context"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/modules"
)

// NodeDelete removes a Node object, the last step of taking a node out.
type NodeDelete struct{ Clusters }

var (
	_ modules.Module    = NodeDelete{}
	_ modules.Validator = NodeDelete{}
)

var nodeDeleteAttrs = withConn(append([]modules.Attribute{
	{Name: "name", Type: cty.String, Required: true, Description: "Name of the Node."},
}, ownerAttrs...)...)

var nodeDeleteResults = []modules.Attribute{
	{Name: "existed", Type: cty.Bool, Description: "Whether the node existed before the task."},
}

func (NodeDelete) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_node_delete",
		Summary: "Delete a Node object.",
		Description: "Deletes the Node from the cluster; no change when it does not exist. It does not stop " +
			"the kubelet: one still running registers the node again, so stop its services first. Drain " +
			"the node before deleting it, or its pods are left to the garbage collector. The delete carries the " +
			"UID of the Node checked as a precondition." + ownedOnlyNote,
		Target:     modules.TargetController,
		Attributes: nodeDeleteAttrs,
		Results:    nodeDeleteResults,
		Example: `task "forget_node" {
  k8s_node_delete {
    name = lower(host.facts.hostname)
  }
}`,
	}
}

func (NodeDelete) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	return validateNodeName(req.Config, "name")
}

func (m NodeDelete) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	name, nameOK := str(get(cfg, "name"))
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeDeleteResults), Diagnostics: diags}
	}
	if !known || !nameOK {
		subject := knownAfterApply
		if nameOK {
			subject = "node " + name
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Delete, Subject: subject}, Result: unknownResult(nodeDeleteResults)}
	}
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return modules.PlanResponse{Result: result(nodeDeleteResults, map[string]cty.Value{"existed": cty.False})}
	case err != nil:
		return modules.PlanResponse{Result: unknownResult(nodeDeleteResults), Diagnostics: apiError(cfg, "name", "Cannot read node "+name, err)}
	}
	if diags := refuseNode(cfg, n); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeDeleteResults), Diagnostics: diags}
	}
	return modules.PlanResponse{
		Change: &modules.Change{Action: modules.Delete, Subject: "node " + name},
		Result: result(nodeDeleteResults, map[string]cty.Value{"existed": cty.True}),
	}
}

func (m NodeDelete) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(nodeDeleteAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeDeleteResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeDeleteResults), Diagnostics: diags}
	}
	name, _ := str(get(cfg, "name"))
	nodes := cl.Kube.CoreV1().Nodes()
	n, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		if diags := refuseNode(cfg, n); diags.HasErrors() {
			return modules.ApplyResponse{Result: unknownResult(nodeDeleteResults), Diagnostics: diags}
		}
		// Only the Node checked: one deleted and registered again since
		// has another UID, and the API server refuses the delete.
		err = nodes.Delete(ctx, name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(n.UID))})
	}
	switch {
	case apierrors.IsNotFound(err):
		return modules.ApplyResponse{Result: result(nodeDeleteResults, map[string]cty.Value{"existed": cty.False})}
	case err != nil:
		return modules.ApplyResponse{Result: unknownResult(nodeDeleteResults), Diagnostics: apiError(cfg, "name", "Cannot delete node "+name, err)}
	}
	return modules.ApplyResponse{Result: result(nodeDeleteResults, map[string]cty.Value{"existed": cty.True})}
}
