package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// NodeOwner claims a node name for a host before it joins, and marks the
// Node its kubelet registers as wsu's (node_owned.go says why): kubeadm
// join refuses a name a Ready Node holds; this refuses a name any Node
// holds that is not this owner's Windows Node.
type NodeOwner struct{ Clusters }

var (
	_ modules.Module    = NodeOwner{}
	_ modules.Validator = NodeOwner{}
)

var nodeOwnerAttrs = withConn(
	modules.Attribute{Name: "name", Type: cty.String, Required: true, Description: "Name of the Node the host registers (or registered) as."},
	modules.Attribute{Name: "owner", Type: cty.String,
		Description: "Who joins the host: the `" + OwnerAnnotation + "` value written on the Node and required of one already there (the CLI's default `wsu`; the controller's `windowsinstance/NAMESPACE/NAME`). " +
			"null: a node-only join, whose bootstrap token may read Nodes but not mark them: kubeadm's rule applies instead (see the description) and nothing is ever changed."},
	modules.Attribute{Name: "joined", Type: cty.Bool, Default: cty.False,
		Description: "Without `owner`: the host already holds this Node's kubelet credentials (`C:\\k\\kubeconfig`), so a Ready Node of the name is its own (a re-run), not another machine's."},
	modules.Attribute{Name: "uid", Type: cty.String,
		Description: "The UID the Node must have when it exists (the controller's `status.nodeUID`); null: any."},
	modules.Attribute{Name: "adopt", Type: cty.Bool, Default: cty.False,
		Description: "Take a Windows Node without the `" + OwnerAnnotation + "` annotation (one an earlier wsu joined, or a join cut short before it marked it). A Node of another owner, or not a Windows Node, is refused all the same."},
	modules.Attribute{Name: "wmco_address", Type: cty.String,
		Description: "Take a Windows Node WMCO configured for the host at this address: one without the `" + OwnerAnnotation + "` annotation that carries WMCO's `" + kube.WMCOVersionAnnotation + "` annotation and lists this address among its `status.addresses` (WMCO's own tie of a BYOH entry to its Node). null: no such adoption."},
	modules.Attribute{Name: "wait", Type: cty.Number, Default: cty.NumberIntVal(0),
		Description: "Seconds apply waits for the Node to register, then marks it; 0: a Node that does not exist is no change (the check before a join)."},
	modules.Attribute{Name: "interval", Type: cty.Number, Default: cty.NumberIntVal(2),
		Description: "Seconds between checks while waiting, at most: the Node's registration (seen by the run's shared Node watch) makes it check at once."},
)

var nodeOwnerResults = []modules.Attribute{
	{Name: "exists", Type: cty.Bool, Description: "Whether the Node exists (after the wait)."},
	{Name: "uid", Type: cty.String, Description: "The Node's UID; \"\" when it does not exist."},
	{Name: "wmco", Type: cty.Bool, Description: "Whether the Node, when read, was one WMCO configured for `wmco_address` and wsu had not marked yet (an adoption)."},
}

func (NodeOwner) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_node_owner",
		Summary: "Refuse a node name another Node holds; mark the host's Node as wsu's.",
		Description: "Reads the Node. One that exists must be a Windows Node (`kubernetes.io/os=windows`) " +
			"annotated `" + OwnerAnnotation + "` with `owner` (and, with `uid`, that UID); anything else fails " +
			"the plan, at `name`, before the host is changed: a Linux or control-plane Node, a Windows Node " +
			"another tool joined, one another host or instance joined. An unmarked Windows Node is taken " +
			"only with `adopt`. The change is the annotation, written on a Node that lacks it; with " +
			"`wait`, apply first waits for the kubelet to register the Node. The cordon, drain, label and " +
			"delete modules require the same annotation.\n\n" +
			"Without `owner` (a node-only join, holding only a bootstrap token) this is `kubeadm join`'s check: " +
			"a Node of the name that is not a Windows Node is refused, and so is a Ready one unless `joined` " +
			"says the host is that Node already; a NotReady Windows Node may be joined again, as kubeadm allows.",
		Target:     modules.TargetController,
		Attributes: nodeOwnerAttrs,
		Results:    nodeOwnerResults,
		Example: `task "node name" {
  k8s_node_owner {
    name  = lower(host.facts.hostname)
    owner = "wsu"
  }
}`,
	}
}

func (NodeOwner) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateNodeName(cfg, "name")
	owner := get(cfg, "owner")
	if s, ok := str(owner); ok && s == "" {
		diags = append(diags, cfg.Error("owner", "Empty owner", "owner names who joins the host; it cannot be empty."))
	}
	if w := get(cfg, "wait"); owner.IsKnown() && owner.IsNull() && w.IsKnown() && !w.IsNull() && seconds(w) > 0 {
		diags = append(diags, cfg.Error("wait", "Nothing to wait for", "wait waits for the Node in order to mark it as owner's; without owner nothing is marked."))
	}
	return append(diags, validateSeconds(cfg, []string{"wait"}, []string{"interval"})...)
}

// ownerSpec is a decoded task.
type ownerSpec struct {
	name, owner, uid string
	wmcoAddress      string
	adopt, joined    bool
	wait, interval   time.Duration
}

func decodeOwner(cfg modules.Config) ownerSpec {
	s := ownerSpec{wait: seconds(get(cfg, "wait")), interval: seconds(get(cfg, "interval"))}
	s.name, _ = str(get(cfg, "name"))
	s.owner, _ = str(get(cfg, "owner"))
	s.uid, _ = str(get(cfg, "uid"))
	s.wmcoAddress, _ = str(get(cfg, "wmco_address"))
	s.adopt = get(cfg, "adopt").True()
	s.joined = get(cfg, "joined").True()
	return s
}

// diffOwner is the one comparison Plan and Apply share: a refusal, or
// whether the mark must be written (n nil: no Node).
func diffOwner(n *corev1.Node, s ownerSpec) (refusal string, mark bool) {
	if n == nil {
		return "", s.wait > 0
	}
	if s.owner == "" {
		return kubeadmNameRefusal(n, s.joined), false
	}
	if r := nodeRefusal(n, s.owner, s.uid, s.adopt || kube.WMCONode(n, s.wmcoAddress)); r != "" {
		return r, false
	}
	return "", n.Annotations[OwnerAnnotation] != s.owner
}

// kubeadmNameRefusal is kubeadm join's rule for a name a Node holds, for a
// join that cannot mark Nodes: not a Windows Node, or Ready and not this
// host's.
func kubeadmNameRefusal(n *corev1.Node, joined bool) string {
	if n.Labels[kube.OSLabel] != "windows" {
		return nodeRefusal(n, "", "", true)
	}
	if joined || !nodeReady(n) {
		return ""
	}
	return fmt.Sprintf("A Ready Node named %s exists and this host does not hold its credentials (no C:\\k\\kubeconfig): another machine runs under this name (kubeadm join refuses the same). Give the node another name, or delete the Node if its machine is gone.", n.Name)
}

// ownerResult is the result for n as read, before any mark (wmco says
// whether it was WMCO's then).
func ownerResult(n *corev1.Node, s ownerSpec) cty.Value {
	if n == nil {
		return result(nodeOwnerResults, map[string]cty.Value{"exists": cty.False, "uid": cty.StringVal(""), "wmco": cty.False})
	}
	return result(nodeOwnerResults, map[string]cty.Value{"exists": cty.True, "uid": cty.StringVal(string(n.UID)),
		"wmco": cty.BoolVal(kube.WMCONode(n, s.wmcoAddress))})
}

func ownerChange(s ownerSpec, n *corev1.Node) *modules.Change {
	subject := "mark node " + s.name + " as " + s.owner + "'s"
	old := cty.NullVal(cty.String)
	if n == nil {
		subject += " once it registers"
	} else if v, ok := n.Annotations[OwnerAnnotation]; ok {
		old = cty.StringVal(v)
	}
	return &modules.Change{Action: modules.Update, Subject: subject,
		Fields: []modules.FieldChange{{Name: fmt.Sprintf("annotations[%q]", OwnerAnnotation), Old: old, New: cty.StringVal(s.owner)}}}
}

func (m NodeOwner) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: diags}
	}
	if !known || !cfg.Value.IsWhollyKnown() {
		subject := knownAfterApply
		if name, ok := str(get(cfg, "name")); ok {
			subject = "mark node " + name
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: subject}, Result: unknownResult(nodeOwnerResults)}
	}
	s := decodeOwner(cfg)
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, s.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		n = nil
	case err != nil:
		return modules.PlanResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: apiError(cfg, "name", "Cannot read node "+s.name, err)}
	}
	refusal, mark := diffOwner(n, s)
	if refusal != "" {
		return modules.PlanResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: hcl.Diagnostics{cfg.Error("name", "Node "+s.name+" is not this host's", refusal)}}
	}
	if !mark {
		return modules.PlanResponse{Result: ownerResult(n, s)}
	}
	res := ownerResult(n, s)
	if n == nil {
		res = unknownResult(nodeOwnerResults)
	}
	return modules.PlanResponse{Change: ownerChange(s, n), Result: res}
}

func (m NodeOwner) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(nodeOwnerAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: diags}
	}
	s := decodeOwner(cfg)
	nodes := cl.Kube.CoreV1().Nodes()
	var n *corev1.Node
	poll, err := waitFor(ctx, s.wait, s.interval, []watchOn{{cl.NodeChanges, s.name}}, func(ctx context.Context) (bool, string, error) {
		got, err := nodes.Get(ctx, s.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return s.wait == 0, "node " + s.name + " does not exist", nil
		case err != nil:
			return false, "", err
		}
		n = got
		return true, "", nil
	})
	if err != nil {
		return modules.ApplyResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: apiError(cfg, "name", "Cannot read node "+s.name, err)}
	}
	if poll.timedOut {
		return modules.ApplyResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: hcl.Diagnostics{cfg.Error("wait",
			"Node "+s.name+" did not register", fmt.Sprintf("After %s, %s: the kubelet has not registered it.", s.wait, poll.last))}}
	}
	res, refusal, err := markOwner(ctx, nodes, n, s)
	switch {
	case err != nil:
		return modules.ApplyResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: apiError(cfg, "name", "Cannot mark node "+s.name, err)}
	case refusal != "":
		return modules.ApplyResponse{Result: unknownResult(nodeOwnerResults), Diagnostics: hcl.Diagnostics{cfg.Error("name", "Node "+s.name+" is not this host's", refusal)}}
	}
	return modules.ApplyResponse{Result: res}
}

// markOwner marks n as s's, checked again on every try: the patch is
// guarded by the resourceVersion the check read, so a Node replaced or
// changed since is not marked unchecked. A conflict (the kubelet updates
// its Node all the time) reads the Node again and checks once more.
func markOwner(ctx context.Context, nodes corev1client.NodeInterface, n *corev1.Node, s ownerSpec) (res cty.Value, refusal string, err error) {
	tries := 0
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if tries++; tries > 1 {
			got, err := nodes.Get(ctx, s.name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				n = nil
			case err != nil:
				return err
			default:
				n = got
			}
		}
		var mark bool
		refusal, mark = diffOwner(n, s)
		res = ownerResult(n, s)
		if refusal != "" || n == nil || !mark {
			return nil
		}
		p, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"resourceVersion": n.ResourceVersion, "annotations": map[string]string{OwnerAnnotation: s.owner}}})
		_, err := nodes.Patch(ctx, s.name, types.MergePatchType, p, metav1.PatchOptions{})
		return err
	})
	return res, refusal, err
}

// nodeReady: the Node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
