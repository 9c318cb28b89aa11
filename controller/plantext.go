package controller

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/view"
)

// The last plan's text. status.lastPlan holds a plan's hash, counts and
// task addresses; an approver reviewing a Manual plan needs what `wsu
// plan` shows: each changing task's fields and file diffs. So each new
// plan of an instance is kept as text, as `wsu show` prints a saved plan
// (view.PlanChanges: secrets were hidden by the engine as it planned), in
// the ConfigMap wsu-plan-NAME beside the instance, key plan.txt, owned by
// it (the garbage collector deletes it with the instance), as
// tofu-controller keeps a readable plan:
//
//	kubectl get configmap -n NS wsu-plan-NAME -o jsonpath='{.data.plan\.txt}'
//
// It is written only when the plan's hash changes (the wsu.dev/plan-hash
// annotation), so a drift pass that finds the same plan writes nothing.
// In Job mode the plan stays in the Job (only its hash comes back): no
// text is kept.

// maxPlanText bounds the text kept (a ConfigMap holds at most 1 MiB).
const maxPlanText = 900 << 10

// keepPlanText writes out's plan as text for wi, when it is a new one. A
// failure is logged, not the pass's: the plan's summary is in status.
func (r *InstanceReconciler) keepPlanText(ctx context.Context, wi *wsuv1.WindowsInstance, playbook string, out run.Outcome) {
	if out.Plan == nil || out.Hash == "" {
		return
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: approval.PlanConfigMapName(wi.Name), Namespace: wi.Namespace}}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, cm, func() error {
		if cm.Annotations[approval.PlanHashAnnotation] == out.Hash {
			return nil
		}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Labels[run.JobInstanceLabel] = wi.Name
		cm.Annotations[approval.PlanHashAnnotation] = out.Hash
		cm.Data = map[string]string{approval.PlanTextKey: planText(wi, playbook, out)}
		return controllerutil.SetControllerReference(wi, cm, r.Client.Scheme())
	})
	if err != nil {
		log.FromContext(ctx).Error(err, "keeping the plan's text", "configmap", cm.Name)
	}
}

// planText is the plan as an approver reads it: what it is of, its
// changes as `wsu show` prints them, and how to approve it.
func planText(wi *wsuv1.WindowsInstance, playbook string, out run.Outcome) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Plan %s of %s for WindowsInstance %s/%s (%s), made %s\n",
		out.Hash, playbook, wi.Namespace, wi.Name, wi.Spec.Address, metav1.Now().UTC().Format("2006-01-02T15:04:05Z"))
	view.NewHuman(&b, view.HumanOptions{}).PlanChanges(out.Plan)
	if out.Changed > 0 {
		fmt.Fprintf(&b, "Approve it (approval: Manual) with: wsu approve %s -n %s --plan %s\n", wi.Name, wi.Namespace, out.Hash)
	}
	text := b.String()
	if len(text) > maxPlanText {
		text = text[:maxPlanText] + "\n(cut: the plan's text is longer than the ConfigMap can hold; `wsu plan` from a workstation shows it whole)\n"
	}
	return text
}
