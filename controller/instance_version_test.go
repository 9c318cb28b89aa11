package controller

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The version join wrote is found under either flavour's annotation, wsu's
// first (a kubeadm node joined by an older wsu may still carry WMCO's).
func TestNodeVersion(t *testing.T) {
	for _, tt := range []struct {
		annotations map[string]string
		want        string
	}{
		{annotations: nil, want: ""},
		{annotations: map[string]string{"windowsmachineconfig.openshift.io/version": "1.0"}, want: "1.0"},
		{annotations: map[string]string{"wsu.dev/version": "2.0"}, want: "2.0"},
		{annotations: map[string]string{"wsu.dev/version": "2.0", "windowsmachineconfig.openshift.io/version": "1.0"}, want: "2.0"},
	} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations}}
		assert.Equal(t, tt.want, nodeVersion(node), "%v", tt.annotations)
	}
}
