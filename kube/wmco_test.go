package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WMCONode takes only an unmarked Windows Node with WMCO's version
// annotation that lists the host's address.
func TestWMCONode(t *testing.T) {
	node := func(os string, annotations map[string]string, addrs ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-01", Labels: map[string]string{OSLabel: os}, Annotations: annotations}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		return n
	}
	wmco := map[string]string{WMCOVersionAnnotation: "10.17.0"}
	tests := []struct {
		name    string
		node    *corev1.Node
		address string
		want    bool
	}{
		{"WMCO's Node of the host", node("windows", wmco, "10.1.42.1"), "10.1.42.1", true},
		{"a DNS name, in another case", node("windows", wmco, "10.1.42.1", "win-01.example.com"), "WIN-01.example.com", true},
		{"another host's address", node("windows", wmco, "10.1.42.1"), "10.1.42.2", false},
		{"no address given", node("windows", wmco, "10.1.42.1"), "", false},
		{"no WMCO annotation", node("windows", nil, "10.1.42.1"), "10.1.42.1", false},
		{"wsu's already", node("windows", map[string]string{WMCOVersionAnnotation: "1", OwnerAnnotation: "wsu"}, "10.1.42.1"), "10.1.42.1", false},
		{"a Linux Node", node("linux", wmco, "10.1.42.1"), "10.1.42.1", false},
		{"no Node", nil, "10.1.42.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, WMCONode(tt.node, tt.address))
		})
	}
}
