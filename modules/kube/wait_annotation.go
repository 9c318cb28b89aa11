package kube

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// WaitAnnotation blocks until a Node carries an annotation, such as the
// hybrid-overlay subnet OVN-Kubernetes assigns, and returns its value.
type WaitAnnotation struct{ Clusters }

var (
	_ modules.Module    = WaitAnnotation{}
	_ modules.Validator = WaitAnnotation{}
)

var waitAnnotationAttrs = withConn(
	modules.Attribute{Name: "node", Type: cty.String, Required: true,
		Description: "Name of the Node. It need not exist yet."},
	modules.Attribute{Name: "annotation", Type: cty.String, Required: true,
		Description: "Annotation key to wait for, e.g. `k8s.ovn.org/hybrid-overlay-node-subnet`."},
	modules.Attribute{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(600),
		Description: "Seconds to wait before failing."},
	modules.Attribute{Name: "interval", Type: cty.Number, Default: cty.NumberIntVal(2),
		Description: "Seconds between checks at most: a change to the Node (seen by the run's shared Node watch) makes it check at once."},
)

var waitAnnotationResults = []modules.Attribute{
	{Name: "value", Type: cty.String, Description: "The annotation's value."},
	{Name: "waited", Type: cty.Number, Description: "Seconds spent waiting; 0 when it was already there."},
}

func (WaitAnnotation) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_wait_annotation",
		Summary: "Wait until a Node has an annotation, and return its value.",
		Description: "For values another component writes on the node: OVN-Kubernetes annotates a Windows " +
			"node with `k8s.ovn.org/hybrid-overlay-node-subnet` once it has allocated the node's subnet, " +
			"and hybrid-overlay with `k8s.ovn.org/hybrid-overlay-distributed-router-gateway-mac` once " +
			"it runs. An annotation already present (even empty) makes no change and its value is known " +
			"at plan time; otherwise apply checks whenever the Node changes, and at least every `interval` seconds, until `timeout`. A missing " +
			"Node and passing API errors count as \"not yet\"; a refusal by RBAC fails at once.",
		Target:     modules.TargetController,
		Attributes: waitAnnotationAttrs,
		Results:    waitAnnotationResults,
		Show:       "value",
		Example: `task "node_subnet" {
  k8s_wait_annotation {
    node       = lower(host.facts.hostname)
    annotation = "k8s.ovn.org/hybrid-overlay-node-subnet"
  }
}`,
	}
}

func (WaitAnnotation) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateNodeName(cfg, "node")
	if a := get(cfg, "annotation"); isNull(a) {
		diags = append(diags, cfg.Error("annotation", "Missing annotation", "annotation must name an annotation key."))
	} else if key, ok := str(a); ok {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			diags = append(diags, cfg.Error("annotation", "Invalid annotation key", fmt.Sprintf("%q: %s.", key, strings.Join(errs, "; "))))
		}
	}
	return append(diags, validateSeconds(cfg, []string{"timeout"}, []string{"interval"})...)
}

// nodeAnnotation reads one annotation; observed describes a miss.
func nodeAnnotation(ctx context.Context, cl *kube.Client, node, key string) (value string, found bool, observed string, err error) {
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, "node " + node + " does not exist", nil
	}
	if err != nil {
		return "", false, "", err
	}
	v, ok := n.Annotations[key]
	if !ok {
		return "", false, "node " + node + " has no such annotation", nil
	}
	return v, true, v, nil
}

func (m WaitAnnotation) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	node, nodeOK := str(get(cfg, "node"))
	key, keyOK := str(get(cfg, "annotation"))
	subject := knownAfterApply
	if nodeOK && keyOK {
		subject = fmt.Sprintf("node %s annotation %s", node, key)
	}
	pending := modules.PlanResponse{
		Change: &modules.Change{Action: modules.Run, Subject: "wait for " + subject,
			Fields: []modules.FieldChange{{Name: "value", Old: cty.NullVal(cty.String), New: cty.UnknownVal(cty.String)}}},
		Result: unknownResult(waitAnnotationResults),
	}
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(waitAnnotationResults), Diagnostics: diags}
	}
	if !known || !nodeOK || !keyOK {
		return pending
	}
	v, found, _, err := nodeAnnotation(ctx, cl, node, key)
	switch {
	case err != nil && transient(err):
		pending.Diagnostics = hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Cannot read node " + node + " yet",
			Detail: err.Error(), Subject: cfg.Range("node")}}
		return pending
	case err != nil:
		return modules.PlanResponse{Result: unknownResult(waitAnnotationResults), Diagnostics: apiError(cfg, "node", "Cannot read node "+node, err)}
	case found:
		return modules.PlanResponse{Result: result(waitAnnotationResults, map[string]cty.Value{
			"value": cty.StringVal(v), "waited": cty.NumberIntVal(0)})}
	}
	return pending
}

func (m WaitAnnotation) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(waitAnnotationAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(waitAnnotationResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(waitAnnotationResults), Diagnostics: diags}
	}
	node, _ := str(get(cfg, "node"))
	key, _ := str(get(cfg, "annotation"))
	timeout, interval := seconds(get(cfg, "timeout")), seconds(get(cfg, "interval"))
	value := cty.NullVal(cty.String)
	res, err := waitFor(ctx, timeout, interval, []watchOn{{cl.NodeChanges, node}}, func(ctx context.Context) (bool, string, error) {
		v, found, observed, err := nodeAnnotation(ctx, cl, node, key)
		if found {
			value = cty.StringVal(v)
		}
		return found, observed, err
	})
	out := result(waitAnnotationResults, map[string]cty.Value{"value": value, "waited": waitedVal(res.waited)})
	what := fmt.Sprintf("annotation %s on node %s", key, node)
	switch {
	case err != nil && ctx.Err() != nil:
		return modules.ApplyResponse{Result: out, Diagnostics: hcl.Diagnostics{cfg.Error("annotation", "Stopped waiting for "+what,
			fmt.Sprintf("Interrupted (%v); last observed: %s.", err, res.last))}}
	case err != nil:
		return modules.ApplyResponse{Result: out, Diagnostics: apiError(cfg, "node", "Cannot read node "+node, err)}
	case res.timedOut:
		return modules.ApplyResponse{Result: out, Diagnostics: hcl.Diagnostics{cfg.Error("annotation", "Timed out waiting for "+what,
			fmt.Sprintf("Waited %s; last observed: %s.", timeout, res.last))}}
	}
	return modules.ApplyResponse{Result: out}
}
