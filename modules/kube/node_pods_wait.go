package kube

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// NodePodsWait blocks until the pods some DaemonSets run on one Node are
// Running and Ready. A node whose network comes from HostProcess
// DaemonSets (the CNI, kube-proxy) is networked only once those pods run
// on it: a Ready Node alone says the kubelet is up, not that pods can
// reach Services.
type NodePodsWait struct{ Clusters }

var (
	_ modules.Module    = NodePodsWait{}
	_ modules.Validator = NodePodsWait{}
)

var nodePodsWaitAttrs = withConn(
	modules.Attribute{Name: "node_name", Type: cty.String, Required: true,
		Description: "The Node whose pods to wait for."},
	modules.Attribute{Name: "daemonsets", Type: cty.List(cty.String), Required: true,
		Description: "DaemonSets (`NAMESPACE/NAME`) each of which must run a Running, Ready pod on the Node."},
	modules.Attribute{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(600),
		Description: "Seconds to wait before failing."},
	modules.Attribute{Name: "interval", Type: cty.Number, Default: cty.NumberIntVal(2),
		Description: "Seconds between checks at most: a change to a pod on the Node (a watch of the Node's pods) makes it check at once."},
)

var nodePodsWaitResults = []modules.Attribute{
	{Name: "pods", Type: cty.Map(cty.String), Description: "DaemonSet (`NAMESPACE/NAME`) → the name of its pod on the Node, as last seen (absent while it has none)."},
	{Name: "waited", Type: cty.Number, Description: "Seconds spent waiting; 0 when the pods already ran."},
}

func (NodePodsWait) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_node_pods_wait",
		Summary: "Wait until DaemonSets' pods run on a Node (the network's HostProcess pods).",
		Description: "For each DaemonSet, finds its pod on the Node (owned by the DaemonSet, `spec.nodeName` the " +
			"Node) and waits until it is `Running` with condition `Ready`. When all already are, the task " +
			"makes no change; otherwise apply checks whenever a pod on the Node changes, and at least every `interval` seconds, until they are or `timeout` " +
			"passes, then fails naming each DaemonSet that has no ready pod there and its pod's state " +
			"(phase, the waiting container's reason and message, or that none was scheduled and why the " +
			"DaemonSet says so). A missing DaemonSet fails at once. Needs get on daemonsets and list on " +
			"pods in their namespaces, and watch on pods to react at once (without it, it polls).",
		Target:     modules.TargetController,
		Attributes: nodePodsWaitAttrs,
		Results:    nodePodsWaitResults,
		Example: `task "network pods" {
  k8s_node_pods_wait {
    node_name  = "win-1"
    daemonsets = ["calico-system/calico-node-windows", "kube-system/kube-proxy-windows"]
  }
}`,
	}
}

func (NodePodsWait) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateNodeName(cfg, "node_name")
	if refs, ok := modutil.StringList(get(cfg, "daemonsets")); ok {
		for _, ref := range refs {
			if ns, name, found := strings.Cut(ref, "/"); !found || ns == "" || name == "" {
				diags = append(diags, cfg.Error("daemonsets", "Invalid DaemonSet reference", fmt.Sprintf("Each entry must be NAMESPACE/NAME, got %q.", ref)))
			}
		}
	}
	return append(diags, validateSeconds(cfg, []string{"timeout"}, []string{"interval"})...)
}

// dsPodState is one DaemonSet's pod on the node.
type dsPodState struct {
	ref   string
	pod   string // "" when none
	ready bool
	state string // for messages
}

// nodePods reads each DaemonSet's pod on node.
func nodePods(ctx context.Context, cl *kube.Client, node string, refs []string) ([]dsPodState, error) {
	out := make([]dsPodState, 0, len(refs))
	for _, ref := range refs {
		ns, name, _ := strings.Cut(ref, "/")
		ds, err := cl.Kube.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("DaemonSet %s: %w", ref, err)
		}
		pods, err := cl.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return nil, fmt.Errorf("pods of %s: %w", ref, err)
		}
		st := dsPodState{ref: ref, state: fmt.Sprintf("no pod on the node yet (the DaemonSet schedules %d, %d ready)", ds.Status.DesiredNumberScheduled, ds.Status.NumberReady)}
		for i := range pods.Items {
			p := &pods.Items[i]
			if !ownedByUID(p.OwnerReferences, ds.UID) || p.DeletionTimestamp != nil {
				continue
			}
			st.pod, st.ready, st.state = p.Name, podReady(p), podState(p)
			break
		}
		out = append(out, st)
	}
	return out, nil
}

func ownedByUID(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState is the pod's phase and, for a container not running, why.
func podState(p *corev1.Pod) string {
	s := fmt.Sprintf("pod %s %s", p.Name, p.Status.Phase)
	if podReady(p) {
		return s + ", Ready"
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			return fmt.Sprintf("%s, container %s waiting: %s %s", s, cs.Name, w.Reason, w.Message)
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return fmt.Sprintf("%s, container %s exited %d: %s %s", s, cs.Name, t.ExitCode, t.Reason, t.Message)
		}
	}
	return s + ", not Ready"
}

func podsReady(states []dsPodState) (bool, string) {
	var waiting []string
	for _, s := range states {
		if !s.ready {
			waiting = append(waiting, s.ref+": "+s.state)
		}
	}
	return len(waiting) == 0, strings.Join(waiting, "; ")
}

func podsResult(states []dsPodState, waited cty.Value) cty.Value {
	pods := map[string]cty.Value{}
	for _, s := range states {
		if s.pod != "" {
			pods[s.ref] = cty.StringVal(s.pod)
		}
	}
	m := cty.MapValEmpty(cty.String)
	if len(pods) > 0 {
		m = cty.MapVal(pods)
	}
	return result(nodePodsWaitResults, map[string]cty.Value{"pods": m, "waited": waited})
}

func (m NodePodsWait) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	node, nodeOK := str(get(cfg, "node_name"))
	refs, refsOK := modutil.StringList(get(cfg, "daemonsets"))
	subject := knownAfterApply
	if nodeOK && refsOK {
		subject = fmt.Sprintf("pods of %s on node %s", strings.Join(refs, ", "), node)
	}
	pending := modules.PlanResponse{
		Change: &modules.Change{Action: modules.Run, Subject: "wait for " + subject},
		Result: unknownResult(nodePodsWaitResults),
	}
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodePodsWaitResults), Diagnostics: diags}
	}
	if !known || !nodeOK || !refsOK {
		return pending
	}
	states, err := nodePods(ctx, cl, node, refs)
	switch {
	case err != nil && apierrors.IsNotFound(err):
		return modules.PlanResponse{Result: unknownResult(nodePodsWaitResults), Diagnostics: apiError(cfg, "daemonsets", "Cannot find a DaemonSet", err)}
	case err != nil && !transient(err):
		return modules.PlanResponse{Result: unknownResult(nodePodsWaitResults), Diagnostics: apiError(cfg, "daemonsets", "Cannot read the node's pods", err)}
	case err != nil:
		return pending
	}
	if ok, _ := podsReady(states); ok {
		return modules.PlanResponse{Result: podsResult(states, cty.NumberIntVal(0))}
	}
	return pending
}

func (m NodePodsWait) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(nodePodsWaitAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodePodsWaitResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodePodsWaitResults), Diagnostics: diags}
	}
	node, _ := str(get(cfg, "node_name"))
	refs, _ := modutil.StringList(get(cfg, "daemonsets"))
	timeout, interval := seconds(get(cfg, "timeout")), seconds(get(cfg, "interval"))
	var states []dsPodState
	// The node's own pods: one watch for this wait (not shared: each host
	// waits on its own node's pods).
	pods := kube.NodePodChanges(cl.Kube, node)
	res, err := waitFor(ctx, timeout, interval, []watchOn{{pods, node}}, func(ctx context.Context) (bool, string, error) {
		s, err := nodePods(ctx, cl, node, refs)
		if err != nil {
			return false, "", err
		}
		states = s
		ok, waiting := podsReady(s)
		return ok, waiting, nil
	})
	out := podsResult(states, waitedVal(res.waited))
	what := "the network pods on node " + node
	switch {
	case err != nil && ctx.Err() != nil:
		return modules.ApplyResponse{Result: out, Diagnostics: hcl.Diagnostics{cfg.Error("daemonsets", "Stopped waiting for "+what,
			fmt.Sprintf("Interrupted (%v); last observed: %s.", err, res.last))}}
	case err != nil:
		return modules.ApplyResponse{Result: out, Diagnostics: apiError(cfg, "daemonsets", "Cannot read "+what, err)}
	case res.timedOut:
		return modules.ApplyResponse{Result: out, Diagnostics: hcl.Diagnostics{cfg.Error("daemonsets", "Timed out waiting for "+what,
			fmt.Sprintf("Waited %s; still not running: %s. The node is not networked until they are: look at the DaemonSet's pod on the node (kubectl -n NAMESPACE describe pod).", timeout, res.last))}}
	}
	return modules.ApplyResponse{Result: out}
}
