package approval

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// Approve approves plan hash for the instance key names (`wsu approve`): it
// sets the approved-plan annotation, but only while hash is the instance's
// last plan, so an admin never approves a plan they have not seen. The
// controller applies it on its next pass, and only if a fresh plan still
// has that hash.
func Approve(ctx context.Context, c client.Client, key client.ObjectKey, hash string) error {
	wi := &wsuv1.WindowsInstance{}
	if err := c.Get(ctx, key, wi); err != nil {
		return err
	}
	last := wi.Status.LastPlan
	switch {
	case last == nil:
		return fmt.Errorf("WindowsInstance %s has no plan yet", key)
	case hash != last.Hash:
		return fmt.Errorf("WindowsInstance %s: plan %s is not its last plan (now %s: %s); review that one and approve it by its hash", key, hash, last.Hash, Summary(last))
	}
	orig := wi.DeepCopy()
	if wi.Annotations == nil {
		wi.Annotations = map[string]string{}
	}
	wi.Annotations[wsuv1.ApprovedPlanAnnotation] = hash
	return c.Patch(ctx, wi, client.MergeFrom(orig))
}

// Summary renders a plan's counts as plan output does.
func Summary(p *wsuv1.PlanSummary) string {
	return fmt.Sprintf("%d to add, %d to change, %d to destroy, %d to run", p.Add, p.Change, p.Destroy, p.Run)
}
