package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/kube"
)

// Which Nodes an instance may touch. Its node name comes from
// spec.vars.node_name or the host name the host reports: a typo, a
// hostile entry or a compromised host can name any Node, a control-plane
// one included. So the controller records ownership when it sees it: the
// join playbook marks the Node its kubelet registered (annotation
// wsu.dev/owner = windowsinstance/NAMESPACE/NAME, the node_owner variable
// the controller passes, which no instance may set), and the controller
// records that Node's name and UID in status (nodeName, nodeUID). From
// then on the instance's Node is that UID and no other: the playbooks get
// it as node_uid (their node modules refuse any other Node), and the
// controller's own delete carries it as a precondition. An instance with
// no UID recorded never joined: its removal or forgetting touches no
// Node. Before any run, an instance whose node name another instance
// holds, or that names an existing Node that is not its own, is refused
// (Valid=False, NodeNameTaken or NodeNotOwned, and a Warning event).

// Reasons of the Valid condition when an instance's node name is not its
// own.
const (
	ReasonNodeNameTaken = "NodeNameTaken"
	ReasonNodeNotOwned  = "NodeNotOwned"
	ReasonVarRefused    = "VarRefused"
)

// NodeRefused is the error for an instance whose node name is not its
// own: the condition's and the event's message.
type NodeRefused struct {
	Reason, Message string
}

func (e *NodeRefused) Error() string { return e.Message }

// nodeOwner is the wsu.dev/owner value of wi's Node.
func nodeOwner(wi *wsuv1.WindowsInstance) string { return kube.InstanceOwner(wi.Namespace, wi.Name) }

// checkNode refuses an instance whose node name is another's: another
// instance's recorded Node, a Node that is not the one it recorded, or,
// before it recorded one, an existing Node that is not a Windows Node
// marked as its own. A name not known yet, or no such Node, passes (the
// join playbook checks the name again before it changes the host).
func (r *InstanceReconciler) checkNode(ctx context.Context, wi *wsuv1.WindowsInstance) error {
	name := r.nodeName(wi)
	if name == "" {
		return nil
	}
	st := wi.Status
	if st.NodeUID != "" && name != st.NodeName {
		return &NodeRefused{ReasonNodeNotOwned, fmt.Sprintf("the host joined as Node %s (UID %s) and now names Node %s: a joined node is not renamed (delete the instance to remove the host, then create it again)", st.NodeName, st.NodeUID, name)}
	}
	if other, err := r.nodeHolder(ctx, wi, name); err != nil || other != "" {
		if err != nil {
			return err
		}
		return &NodeRefused{ReasonNodeNameTaken, fmt.Sprintf("Node %s is WindowsInstance %s's: two instances cannot own one Node (check spec.vars.node_name and the host's name)", name, other)}
	}
	node := &corev1.Node{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: name}, node)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	if refusal := kube.NodeRefusal(node, nodeOwner(wi), st.NodeUID, wmcoNodeOf(wi, node)); refusal != "" {
		return &NodeRefused{ReasonNodeNotOwned, nodeRefusalHint(refusal, wi)}
	}
	return nil
}

// wmcoNodeOf says whether node is one WMCO configured for wi's host, not
// wsu's yet: join adopts it (adopt_wmco, its default) rather than being
// refused. The host is tied to the Node as WMCO ties a BYOH entry: the
// Node's addresses hold spec.address (or the node_ip the instance sets).
func wmcoNodeOf(wi *wsuv1.WindowsInstance, node *corev1.Node) bool {
	return kube.WMCONode(node, wi.Spec.Address) || kube.WMCONode(node, strings.Trim(wi.Spec.Vars["node_ip"], `"`))
}

// adoptionSlot holds a join that adopts a host WMCO configured (its Node
// is WMCO's, not recorded yet) until it takes a rollout slot: adopting
// restarts the host's kubelet where WMCO's command differs from wsu's, so
// at most maxUnavailable hosts are adopted at once (rollout.go). took says
// a slot was taken (the caller releases it after the run); any other join
// takes none. While no slot is free, res is the requeue to return.
func (r *InstanceReconciler) adoptionSlot(ctx context.Context, orig, wi *wsuv1.WindowsInstance) (res ctrl.Result, took bool, err error) {
	name := r.nodeName(wi)
	if wi.Status.NodeUID != "" || name == "" {
		return ctrl.Result{}, false, nil
	}
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
		return ctrl.Result{}, false, client.IgnoreNotFound(err)
	}
	if !wmcoNodeOf(wi, node) {
		return ctrl.Result{}, false, nil
	}
	ok, err := r.takeSlot(ctx, wi)
	if err != nil || ok {
		return ctrl.Result{}, ok, err
	}
	setCondition(wi, wsuv1.ConditionJoined, metav1.ConditionFalse, ReasonRolloutWait,
		fmt.Sprintf("adopting WMCO's Node %s waits for a rollout slot (at most %s instance(s) out of service at once)", name, r.Options.MaxUnavailable.String()))
	res, err = r.done(ctx, orig, wi, wsuv1.PhasePending, r.slotRecheck())
	if res == (ctrl.Result{}) {
		res.RequeueAfter = r.slotRecheck()
	}
	return res, false, err
}

// nodeRefusalHint replaces the CLI's hint (adopt_node) with what an admin
// does for an instance.
func nodeRefusalHint(refusal string, wi *wsuv1.WindowsInstance) string {
	if i := strings.Index(refusal, " If it is this host's"); i >= 0 {
		refusal = refusal[:i]
	}
	return fmt.Sprintf("%s Nothing runs; if the Node is this host's, an admin marks it: kubectl annotate node NAME %s=%s --overwrite (docs/install.md, \"Security model: which Nodes wsu touches\")", refusal, kube.OwnerAnnotation, nodeOwner(wi))
}

// nodeHolder is the other instance in wi's namespace that recorded Node
// name as its own, or "".
func (r *InstanceReconciler) nodeHolder(ctx context.Context, wi *wsuv1.WindowsInstance, name string) (string, error) {
	list := &wsuv1.WindowsInstanceList{}
	if err := r.Client.List(ctx, list, client.InNamespace(wi.Namespace)); err != nil {
		return "", err
	}
	for _, o := range list.Items {
		if o.Name != wi.Name && o.Status.NodeUID != "" && o.Status.NodeName == name {
			return o.Name, nil
		}
	}
	return "", nil
}

// ownNode says whether node is wi's: the UID it recorded, or, before it
// recorded one, a Windows Node marked as its own.
func ownNode(wi *wsuv1.WindowsInstance, node *corev1.Node) bool {
	return kube.NodeRefusal(node, nodeOwner(wi), wi.Status.NodeUID, false) == ""
}

// stockNodePlaybooks are the stock playbooks that declare the
// ControllerVars (the controller passes them only where declared: a
// -var for an undeclared variable fails the run).
var stockNodePlaybooks = []string{"wsu:join.hcl", "wsu:upgrade.hcl", "wsu:upgrade-node.hcl", "wsu:remove.hcl"}

// nodeVars are the controller's variables for a run of playbook, applied
// after the instance's own: who owns the Node, its UID once recorded, and
// for remove whether there is a Node at all (and its recorded name).
func nodeVars(wi *wsuv1.WindowsInstance, playbook string) []string {
	if !slices.Contains(stockNodePlaybooks, playbook) {
		return nil
	}
	vars := []string{"node_owner=" + nodeOwner(wi)}
	if uid := wi.Status.NodeUID; uid != "" {
		vars = append(vars, "node_uid="+uid)
	}
	if playbook != "wsu:remove.hcl" {
		return append(append(vars, "adopt_node=false"), machineVars(wi, playbook)...)
	}
	vars = append(vars, fmt.Sprintf("node_registered=%t", wi.Status.NodeUID != ""))
	if wi.Status.NodeUID != "" {
		vars = append(vars, "node_name="+wi.Status.NodeName)
	}
	return vars
}

// checkVars refuses variables only the controller sets, from spec.vars
// (the CRD's rule refuses them there already) or a varsFrom source.
func checkVars(vars []string, userFrom int) error {
	var bad []string
	for _, kv := range vars[userFrom:] {
		name, _, _ := strings.Cut(kv, "=")
		if name = strings.TrimSpace(name); slices.Contains(wsuv1.ControllerVars(), name) && !slices.Contains(bad, name) {
			bad = append(bad, name)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &NodeRefused{ReasonVarRefused, fmt.Sprintf("spec.vars and varsFrom may not set %s: the controller decides which Node an instance owns", strings.Join(bad, ", "))}
}

// deleteNode deletes the Node wi recorded as its own, and only that one
// (a UID precondition): a Node of that name registered since, or any Node
// of an instance that recorded none, is left alone.
func (r *InstanceReconciler) deleteNode(ctx context.Context, wi *wsuv1.WindowsInstance) error {
	name, uid := wi.Status.NodeName, wi.Status.NodeUID
	if name == "" || uid == "" {
		return nil
	}
	err := r.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.Preconditions{UID: ptrUID(uid)})
	if apierrors.IsConflict(err) {
		return nil // another Node now: not ours
	}
	return client.IgnoreNotFound(err)
}

func ptrUID(uid string) *types.UID {
	u := types.UID(uid)
	return &u
}

// Reasons of Joined=False when the Node an instance recorded is not there
// any more.
const (
	// ReasonNodeDeleted: the recorded Node was deleted; the host is
	// planned for a re-join.
	ReasonNodeDeleted = "NodeDeleted"
	// ReasonNodeReplaced: a Node of the recorded name has another UID;
	// it is not the instance's, and nothing runs (checkNode refuses).
	ReasonNodeReplaced = "NodeReplaced"
)

// recordedNodeGone says why the Node wi recorded (status.nodeName and
// nodeUID) is not there any more — deleted (ReasonNodeDeleted) or
// replaced by another of that name (ReasonNodeReplaced) — or "" when it
// is, or none is recorded. The cache answers first; a miss is confirmed
// uncached, since what follows (forgetting the UID, refusing a CSR)
// must not rest on a cache that has not seen the Node yet.
func recordedNodeGone(ctx context.Context, cached, uncached client.Reader, wi *wsuv1.WindowsInstance) (reason string, err error) {
	name, uid := wi.Status.NodeName, wi.Status.NodeUID
	if name == "" || uid == "" {
		return "", nil
	}
	node := &corev1.Node{}
	err = cached.Get(ctx, types.NamespacedName{Name: name}, node)
	if err == nil && string(node.UID) == uid {
		return "", nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return "", err
	}
	err = uncached.Get(ctx, types.NamespacedName{Name: name}, node)
	switch {
	case apierrors.IsNotFound(err):
		return ReasonNodeDeleted, nil
	case err != nil:
		return "", err
	case string(node.UID) != uid:
		return ReasonNodeReplaced, nil
	}
	return "", nil
}

// checkRecordedNode keeps Joined true only while the Node the instance
// recorded exists. A deleted Node sets Joined=False (NodeDeleted, a
// Warning event) and forgets the UID, so the next plan is a re-join whose
// new Node the instance records as its own (no other Node can take the
// deleted one's UID). A Node of the same name with another UID sets
// Joined=False (NodeReplaced) and keeps the UID: checkNode then refuses
// the instance, and nothing runs until an admin sorts it out.
func (r *InstanceReconciler) checkRecordedNode(ctx context.Context, wi *wsuv1.WindowsInstance) error {
	reader := r.Reader
	if reader == nil {
		reader = r.Client
	}
	reason, err := recordedNodeGone(ctx, r.Client, reader, wi)
	if err != nil || reason == "" {
		return err
	}
	name, uid := wi.Status.NodeName, wi.Status.NodeUID
	was := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionJoined)
	if reason == ReasonNodeReplaced {
		msg := fmt.Sprintf("Node %s has another UID than %s, the Node this instance joined: it is not this instance's", name, uid)
		if was == nil || was.Reason != ReasonNodeReplaced {
			r.event(wi, corev1.EventTypeWarning, ReasonNodeReplaced, "%s; nothing runs (see the Valid condition)", msg)
		}
		setCondition(wi, wsuv1.ConditionJoined, metav1.ConditionFalse, ReasonNodeReplaced, msg)
		return nil
	}
	wi.Status.NodeUID = ""
	msg := fmt.Sprintf("Node %s (UID %s) was deleted; the host is planned to join again", name, uid)
	setCondition(wi, wsuv1.ConditionJoined, metav1.ConditionFalse, ReasonNodeDeleted, msg)
	setCondition(wi, wsuv1.ConditionNodeReady, metav1.ConditionFalse, ReasonNoNode, fmt.Sprintf("there is no Node %s", name))
	r.event(wi, corev1.EventTypeWarning, ReasonNodeDeleted, "%s", msg)
	return nil
}
