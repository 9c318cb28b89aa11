package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An instance's last plan as text, for its approver: the controller keeps
// it in the ConfigMap PlanConfigMapName(instance) (controller/plantext.go
// writes it), key PlanTextKey, with the plan's hash in PlanHashAnnotation;
// `wsu approve` reads it back.

// PlanTextKey is the key of the plan's text in its ConfigMap.
const PlanTextKey = "plan.txt"

// PlanHashAnnotation on the plan ConfigMap is the hash of the plan it
// holds (status.lastPlan.hash when current).
const PlanHashAnnotation = "wsu.dev/plan-hash"

// PlanConfigMapName is the ConfigMap holding instance's last plan text:
// wsu-plan-NAME, or for a name too long for that, its first characters
// and a hash of it.
func PlanConfigMapName(instance string) string {
	const prefix, max = "wsu-plan-", 253
	if len(prefix)+len(instance) <= max {
		return prefix + instance
	}
	sum := sha256.Sum256([]byte(instance))
	tail := "-" + hex.EncodeToString(sum[:8])
	return prefix + instance[:max-len(prefix)-len(tail)] + tail
}

// ReadPlanText is the kept text of instance key's plan hash (`wsu approve`
// shows it), or "" when none is kept for that hash: another plan's, Job
// mode, or a ConfigMap the caller may not read.
func ReadPlanText(ctx context.Context, c client.Reader, key client.ObjectKey, hash string) (string, error) {
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: PlanConfigMapName(key.Name)}, cm)
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return "", nil
	case err != nil:
		return "", err
	case hash == "" || cm.Annotations[PlanHashAnnotation] != hash:
		return "", nil
	}
	return cm.Data[PlanTextKey], nil
}
