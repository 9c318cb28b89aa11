package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
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
