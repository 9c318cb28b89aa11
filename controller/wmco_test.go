package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
)

// TestDeploymentRuns: WMCO counts as running while its Deployment wants a
// replica (a pod starting or crash-looping acts once up) or still has one
// (pods terminating after a scale to zero); only zero wanted and zero left
// lets wsu resume.
func TestDeploymentRuns(t *testing.T) {
	for _, c := range []struct {
		name     string
		replicas *int32
		status   appsv1.DeploymentStatus
		wantRuns bool
	}{
		{"available", ptr.To(int32(1)), appsv1.DeploymentStatus{Replicas: 1, AvailableReplicas: 1}, true},
		{"starting, none available yet", ptr.To(int32(1)), appsv1.DeploymentStatus{}, true},
		{"replicas unset: one", nil, appsv1.DeploymentStatus{}, true},
		{"scaled to zero, a pod terminating", ptr.To(int32(0)), appsv1.DeploymentStatus{Replicas: 1}, true},
		{"scaled to zero, none left", ptr.To(int32(0)), appsv1.DeploymentStatus{}, false},
	} {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: c.replicas}, Status: c.status}
		assert.Equal(t, c.wantRuns, deploymentRuns(d), c.name)
	}
}

// TestWaitingEntries: what the ConfigMap's WMCORunning event names — the
// entries with no instance, the instances whose entry is gone (not those
// being deleted) — and whether an instance was told already; a fleet in
// line with its ConfigMap and told has nothing new to report.
func TestWaitingEntries(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{"10.0.0.1": "username=a", "Win-B.example": "username=a", "10.0.0.3": "username=a"}}
	told := wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.1"},
		Status: wsuv1.WindowsInstanceStatus{Conditions: []metav1.Condition{{Type: wsuv1.ConditionConfigMapManaged, Status: metav1.ConditionFalse}}}}
	gone := wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.9"}}
	deleting := wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.8", DeletionTimestamp: ptr.To(metav1.Now())}}
	added, removed, wasTold := waitingEntries(cm, []wsuv1.WindowsInstance{told, gone, deleting})
	assert.Equal(t, []string{"10.0.0.3", "win-b.example"}, added)
	assert.Equal(t, []string{"10.0.0.9"}, removed)
	assert.True(t, wasTold)

	inLine := []wsuv1.WindowsInstance{told, {ObjectMeta: metav1.ObjectMeta{Name: "win-b.example"}}, {ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.3"}}}
	added, removed, wasTold = waitingEntries(cm, inLine)
	assert.Empty(t, added)
	assert.Empty(t, removed)
	assert.True(t, wasTold)
	_, _, wasTold = waitingEntries(cm, inLine[1:])
	assert.False(t, wasTold, "no instance shows the condition yet")
}
