package kube

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// NodeDrain cordons a Node and evicts its pods, as `kubectl drain` does.
type NodeDrain struct{ Clusters }

var (
	_ modules.Module    = NodeDrain{}
	_ modules.Validator = NodeDrain{}
)

var nodeDrainAttrs = withConn(append([]modules.Attribute{
	{Name: "name", Type: cty.String, Required: true, Description: "Name of the Node."},
	{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(300),
		Description: "Seconds to keep trying evictions and waiting for the pods to go before failing."},
	{Name: "interval", Type: cty.Number, Default: cty.NumberIntVal(5),
		Description: "Seconds between retries of an eviction a PodDisruptionBudget refused, and between checks that evicted pods are gone."},
	{Name: "grace_period", Type: cty.Number,
		Description: "Seconds each pod gets to terminate. Default: the pod's own `terminationGracePeriodSeconds`."},
	{Name: "ignore_daemonsets", Type: cty.Bool, Default: cty.True,
		Description: "Leave DaemonSet pods running (their controller would recreate them at once). With `false`, a DaemonSet pod stops the drain."},
	{Name: "delete_emptydir_data", Type: cty.Bool, Default: cty.False,
		Description: "Evict pods with `emptyDir` volumes, whose data is lost. Without it such a pod stops the drain."},
	{Name: "force", Type: cty.Bool, Default: cty.False,
		Description: "Evict pods no controller manages; nothing recreates them. Without it such a pod stops the drain."},
}, ownerAttrs...)...)

var nodeDrainResults = []modules.Attribute{
	{Name: "evicted", Type: cty.List(cty.String), Description: "Pods evicted, as `namespace/name`."},
	{Name: "skipped", Type: cty.List(cty.String), Description: "Pods left running: DaemonSet pods and mirror (static) pods."},
}

func (NodeDrain) Schema() modules.Schema {
	return modules.Schema{
		Name:    "k8s_node_drain",
		Summary: "Cordon a Node and evict its pods, honouring PodDisruptionBudgets.",
		Description: "Cordons the node, then evicts each pod through the Eviction API, so " +
			"PodDisruptionBudgets hold: an eviction a budget refuses is retried every `interval` seconds " +
			"until `timeout`, and the task then fails naming the pod and the budget that blocks it. " +
			"It waits until the evicted pods are gone. Mirror pods (static pods the kubelet runs) are " +
			"left alone, as are DaemonSet pods unless `ignore_daemonsets = false`. As with `kubectl " +
			"drain`, pods with `emptyDir` data and pods no controller manages stop the drain unless " +
			"`delete_emptydir_data` or `force` allow them; the plan already fails on them.\n\n" +
			"No change when the node is cordoned and holds nothing to evict. A node that does not exist " +
			"has nothing to drain: the task warns and changes nothing, so removal playbooks can run again." + ownedOnlyNote,
		Target:     modules.TargetController,
		Attributes: nodeDrainAttrs,
		Results:    nodeDrainResults,
		Example: `task "drain" {
  k8s_node_drain {
    name                 = lower(host.facts.hostname)
    timeout              = 600
    delete_emptydir_data = true
  }
}`,
	}
}

func (NodeDrain) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateNodeName(cfg, "name")
	return append(diags, validateSeconds(cfg, []string{"timeout", "grace_period"}, []string{"interval"})...)
}

// drainOptions are the decoded arguments.
type drainOptions struct {
	node              string
	timeout, interval time.Duration
	gracePeriod       *int64
	ignoreDaemonSets  bool
	deleteEmptyDir    bool
	force             bool
}

func decodeDrain(cfg modules.Config) drainOptions {
	o := drainOptions{
		timeout:          seconds(get(cfg, "timeout")),
		interval:         seconds(get(cfg, "interval")),
		ignoreDaemonSets: get(cfg, "ignore_daemonsets").True(),
		deleteEmptyDir:   get(cfg, "delete_emptydir_data").True(),
		force:            get(cfg, "force").True(),
	}
	o.node, _ = str(get(cfg, "name"))
	if gp := get(cfg, "grace_period"); !gp.IsNull() {
		s := int64(seconds(gp) / time.Second)
		o.gracePeriod = &s
	}
	return o
}

// drainPlan sorts a node's pods as kubectl drain's filters do.
type drainPlan struct {
	evict    []corev1.Pod
	skipped  []string // namespace/name
	blockers []string // why the drain cannot go ahead
}

const mirrorPodAnnotation = "kubernetes.io/config.mirror"

func podName(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func classifyPods(pods []corev1.Pod, o drainOptions) drainPlan {
	var dp drainPlan
	var daemonSet, emptyDir, unmanaged []string
	for _, p := range pods {
		if _, ok := p.Annotations[mirrorPodAnnotation]; ok {
			dp.skipped = append(dp.skipped, podName(&p))
			continue
		}
		ctrl := metav1.GetControllerOf(&p)
		if ctrl != nil && ctrl.Kind == "DaemonSet" {
			if o.ignoreDaemonSets {
				dp.skipped = append(dp.skipped, podName(&p))
			} else {
				daemonSet = append(daemonSet, podName(&p))
			}
			continue
		}
		if !podFinished(&p) {
			if ctrl == nil && !o.force {
				unmanaged = append(unmanaged, podName(&p))
				continue
			}
			if !o.deleteEmptyDir && hasEmptyDir(&p) {
				emptyDir = append(emptyDir, podName(&p))
				continue
			}
		}
		dp.evict = append(dp.evict, p)
	}
	if len(daemonSet) > 0 {
		dp.blockers = append(dp.blockers, "DaemonSet pods (set ignore_daemonsets = true to leave them running): "+strings.Join(daemonSet, ", "))
	}
	if len(unmanaged) > 0 {
		dp.blockers = append(dp.blockers, "pods no controller manages, which nothing would recreate (set force = true to evict them anyway): "+strings.Join(unmanaged, ", "))
	}
	if len(emptyDir) > 0 {
		dp.blockers = append(dp.blockers, "pods with emptyDir data, which eviction deletes (set delete_emptydir_data = true to evict them anyway): "+strings.Join(emptyDir, ", "))
	}
	sort.Strings(dp.skipped)
	return dp
}

func hasEmptyDir(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil {
			return true
		}
	}
	return false
}

func podsOnNode(ctx context.Context, cl *kube.Client, node string) ([]corev1.Pod, error) {
	list, err := cl.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (m NodeDrain) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	cl, known, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeDrainResults), Diagnostics: diags}
	}
	if !known || !cfg.Value.IsWhollyKnown() {
		subject := knownAfterApply
		if name, ok := str(get(cfg, "name")); ok {
			subject = "drain node " + name
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Run, Subject: subject}, Result: unknownResult(nodeDrainResults)}
	}
	o := decodeDrain(cfg)
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, o.node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return modules.PlanResponse{
			Result: result(nodeDrainResults, map[string]cty.Value{"evicted": strList(nil), "skipped": strList(nil)}),
			Diagnostics: hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Node " + o.node + " does not exist",
				Detail: "There is nothing to drain.", Subject: cfg.Range("name")}},
		}
	}
	if err != nil {
		return modules.PlanResponse{Result: unknownResult(nodeDrainResults), Diagnostics: apiError(cfg, "name", "Cannot read node "+o.node, err)}
	}
	if diags := refuseNode(cfg, n); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(nodeDrainResults), Diagnostics: diags}
	}
	pods, err := podsOnNode(ctx, cl, o.node)
	if err != nil {
		return modules.PlanResponse{Result: unknownResult(nodeDrainResults), Diagnostics: apiError(cfg, "name", "Cannot list the pods on node "+o.node, err)}
	}
	dp := classifyPods(pods, o)
	if len(dp.blockers) > 0 {
		return modules.PlanResponse{Result: unknownResult(nodeDrainResults), Diagnostics: hcl.Diagnostics{cfg.Error("name",
			"Cannot drain node "+o.node, "The node holds "+strings.Join(dp.blockers, "; and ")+".")}}
	}
	if n.Spec.Unschedulable && len(dp.evict) == 0 {
		return modules.PlanResponse{Result: result(nodeDrainResults, map[string]cty.Value{"evicted": strList(nil), "skipped": strList(dp.skipped)})}
	}
	var fields []modules.FieldChange
	if !n.Spec.Unschedulable {
		fields = append(fields, modules.FieldChange{Name: "unschedulable", Old: cty.False, New: cty.True})
	}
	if len(dp.evict) > 0 {
		names := make([]string, len(dp.evict))
		for i := range dp.evict {
			names[i] = podName(&dp.evict[i])
		}
		sort.Strings(names)
		fields = append(fields, modules.FieldChange{Name: "pods", Old: strList(names), New: strList(nil)})
	}
	return modules.PlanResponse{
		Change: &modules.Change{Action: modules.Run, Subject: "drain node " + o.node, Fields: fields},
		Result: unknownResult(nodeDrainResults),
	}
}

// evicting is a pod the drain is moving off the node.
type evicting struct {
	pod      corev1.Pod
	accepted bool   // the eviction went through; waiting for the pod to go
	blocked  string // why the last eviction was refused
}

func (m NodeDrain) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, attrNames(nodeDrainAttrs)...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeDrainResults), Diagnostics: diags}
	}
	cl, _, diags := m.client(cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeDrainResults), Diagnostics: diags}
	}
	o := decodeDrain(cfg)
	fail := func(summary string, err error) modules.ApplyResponse {
		return modules.ApplyResponse{Result: unknownResult(nodeDrainResults), Diagnostics: apiError(cfg, "name", summary, err)}
	}
	n, err := cl.Kube.CoreV1().Nodes().Get(ctx, o.node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return modules.ApplyResponse{Result: result(nodeDrainResults, map[string]cty.Value{"evicted": strList(nil), "skipped": strList(nil)})}
	}
	if err != nil {
		return fail("Cannot read node "+o.node, err)
	}
	if diags := refuseNode(cfg, n); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(nodeDrainResults), Diagnostics: diags}
	}
	if !n.Spec.Unschedulable {
		if err := setUnschedulable(ctx, cl, n, true); err != nil {
			return fail("Cannot cordon node "+o.node, err)
		}
	}
	pods, err := podsOnNode(ctx, cl, o.node)
	if err != nil {
		return fail("Cannot list the pods on node "+o.node, err)
	}
	dp := classifyPods(pods, o)
	if len(dp.blockers) > 0 {
		return modules.ApplyResponse{Result: unknownResult(nodeDrainResults), Diagnostics: hcl.Diagnostics{cfg.Error("name",
			"Cannot drain node "+o.node, "The node (now cordoned) holds "+strings.Join(dp.blockers, "; and ")+".")}}
	}

	work := make([]*evicting, len(dp.evict))
	var evicted []string
	for i, p := range dp.evict {
		work[i] = &evicting{pod: p}
		evicted = append(evicted, podName(&p))
	}
	sort.Strings(evicted)
	res := result(nodeDrainResults, map[string]cty.Value{"evicted": strList(evicted), "skipped": strList(dp.skipped)})

	deadline := time.Now().Add(o.timeout)
	for {
		remaining := work[:0]
		for _, w := range work {
			gone, err := drainStep(ctx, cl, w, o)
			if err != nil {
				return fail("Cannot evict pod "+podName(&w.pod), err)
			}
			if !gone {
				remaining = append(remaining, w)
			}
		}
		work = remaining
		if len(work) == 0 {
			return modules.ApplyResponse{Result: res}
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			summary, lead := "Timed out draining node "+o.node, fmt.Sprintf("After %s, ", o.timeout)
			if ctx.Err() != nil {
				summary, lead = "Stopped draining node "+o.node, fmt.Sprintf("Interrupted (%v); ", ctx.Err())
			}
			return modules.ApplyResponse{Result: res, Diagnostics: hcl.Diagnostics{cfg.Error("name", summary, lead+stuck(work))}}
		}
		timer := time.NewTimer(min(o.interval, left))
		select {
		case <-ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
	}
}

// drainStep evicts a pod, or checks whether an evicted one is gone.
func drainStep(ctx context.Context, cl *kube.Client, w *evicting, o drainOptions) (gone bool, err error) {
	pods := cl.Kube.CoreV1().Pods(w.pod.Namespace)
	if w.accepted {
		p, err := pods.Get(ctx, w.pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil && transient(err):
			return false, nil
		case err != nil:
			return false, err
		}
		return p.UID != w.pod.UID, nil // a replacement of the same name
	}
	uid := w.pod.UID
	ev := &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: w.pod.Name, Namespace: w.pod.Namespace},
		// The UID precondition keeps a StatefulSet's replacement pod of the
		// same name from being evicted in its predecessor's place.
		DeleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: o.gracePeriod, Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	err = pods.EvictV1(ctx, ev)
	switch {
	case err == nil:
		w.accepted, w.blocked = true, ""
		return drainStep(ctx, cl, w, o) // often gone at once
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone already, or replaced (the UID precondition failed).
		return true, nil
	case apierrors.IsTooManyRequests(err):
		w.blocked = blockedBy(ctx, cl, &w.pod, err)
		return false, nil
	case transient(err):
		w.blocked = err.Error()
		return false, nil
	}
	return false, err
}

// blockedBy explains a refused eviction, naming the PodDisruptionBudget: the
// API server's refusal carries it as a cause; failing that, the budgets
// whose selector matches the pod are listed.
func blockedBy(ctx context.Context, cl *kube.Client, p *corev1.Pod, err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			var msgs []string
			for _, c := range d.Causes {
				if c.Type == policyv1.DisruptionBudgetCause {
					msgs = append(msgs, c.Message)
				}
			}
			if len(msgs) > 0 {
				return strings.Join(msgs, "; ")
			}
		}
	}
	msg := err.Error()
	pdbs, lerr := cl.Kube.PolicyV1().PodDisruptionBudgets(p.Namespace).List(ctx, metav1.ListOptions{})
	if lerr != nil {
		return msg
	}
	var names []string
	for _, pdb := range pdbs.Items {
		sel, serr := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if serr == nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
			names = append(names, pdb.Namespace+"/"+pdb.Name)
		}
	}
	if len(names) > 0 {
		msg += " (PodDisruptionBudget " + strings.Join(names, ", ") + ")"
	}
	return msg
}

// stuck describes the pods a drain could not move.
func stuck(work []*evicting) string {
	var lines []string
	for _, w := range work {
		switch {
		case w.accepted:
			lines = append(lines, fmt.Sprintf("pod %s was evicted but is still terminating", podName(&w.pod)))
		case w.blocked != "":
			lines = append(lines, fmt.Sprintf("pod %s: eviction refused: %s", podName(&w.pod), w.blocked))
		default:
			lines = append(lines, fmt.Sprintf("pod %s was not evicted yet", podName(&w.pod)))
		}
	}
	return strings.Join(lines, "\n")
}
