package kube

// Which Nodes the node modules act on. A node name comes from a variable,
// a host name or instance metadata: a typo, a hostile entry or a
// compromised host can name any Node, a control-plane one included. So
// every module that changes a Node (k8s_node, k8s_node_cordon,
// k8s_node_drain, k8s_node_delete) first reads it and acts only on a
// Windows Node wsu joined: labelled kubernetes.io/os=windows (the kubelet
// sets it) and carrying the wsu.dev/owner annotation join writes
// (k8s_node_owner), with the owner and UID the task names when it names
// them. Anything else is refused, at the task's name, before any change;
// only_if_owned = false lifts the rule for a site's own Nodes. A missing
// Node is not refused: there is nothing of anyone's to harm.

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// OwnerAnnotation marks a Node wsu joined (package kube says why).
const OwnerAnnotation = kube.OwnerAnnotation

// ownedOnlyNote ends the description of every module that changes a Node.
const ownedOnlyNote = "\n\nIt acts only on a Windows Node wsu joined (`only_if_owned`, on by default): any other Node of " +
	"that name (a Linux or control-plane Node, one without the `" + OwnerAnnotation + "` annotation join writes, or with " +
	"another `owner` or `uid`) fails the task at `name`, in plan and again in apply, before anything changes."

// ownerAttrs are the guard arguments of every module that changes a Node.
var ownerAttrs = []modules.Attribute{
	{Name: "only_if_owned", Type: cty.Bool, Default: cty.True,
		Description: "Act only on a Windows Node wsu joined: labelled `kubernetes.io/os=windows` and annotated `" + OwnerAnnotation + "` (with `owner` and `uid`: that owner and that UID). Any other Node is refused, before anything changes. `false`: any Node (a site's own)."},
	{Name: "owner", Type: cty.String,
		Description: "The `" + OwnerAnnotation + "` value the Node must carry (join's `node_owner`); null: any owner."},
	{Name: "uid", Type: cty.String,
		Description: "The UID the Node must have (the controller's `status.nodeUID`): a Node deleted and registered again under the same name is another Node. null: any UID."},
}

// ownership is a task's guard.
type ownership struct {
	check      bool
	owner, uid string
}

// decodeOwnership reads the guard arguments; known is false while one is
// unknown (a plan then leaves the check to apply).
func decodeOwnership(cfg modules.Config) (o ownership, known bool) {
	on, owner, uid := get(cfg, "only_if_owned"), get(cfg, "owner"), get(cfg, "uid")
	if !on.IsKnown() || !owner.IsKnown() || !uid.IsKnown() {
		return ownership{}, false
	}
	o.check = on.IsNull() || on.True()
	o.owner, _ = str(owner)
	o.uid, _ = str(uid)
	return o, true
}

// refusal says why n is not a Node the task may change, or "".
func (o ownership) refusal(n *corev1.Node) string {
	if !o.check {
		return ""
	}
	return nodeRefusal(n, o.owner, o.uid, false)
}

// nodeRefusal is kube.NodeRefusal.
var nodeRefusal = kube.NodeRefusal

// refuseNode is the guard of a task that changes n (nil: no Node, nothing
// to refuse), as a diagnostic at the task's name. Unknown guard arguments
// (a plan) pass: apply checks them.
func refuseNode(cfg modules.Config, n *corev1.Node) hcl.Diagnostics {
	o, known := decodeOwnership(cfg)
	if n == nil || !known {
		return nil
	}
	if r := o.refusal(n); r != "" {
		return hcl.Diagnostics{cfg.Error("name", "Node "+n.Name+" is not wsu's", r)}
	}
	return nil
}
