package host_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/wsu-project/wsu/host"
)

// The node's services as the stock playbooks make them, plus bystanders.
var nodeServices = map[string][]string{
	"containerd":          nil,
	"kubelet":             {"containerd"},
	"hybrid-overlay-node": {"kubelet"},
	"kube-proxy":          {"hybrid-overlay-node"},
	"csi-proxy":           nil,
	"Dnscache":            {"nsi", "+TDI"},
}

func TestStopOrder(t *testing.T) {
	tests := []struct {
		name      string
		services  map[string][]string
		of        string
		wantOrder []string
	}{
		{name: "a chain, deepest first", services: nodeServices, of: "containerd",
			wantOrder: []string{"kube-proxy", "hybrid-overlay-node", "kubelet"}},
		{name: "middle of the chain", services: nodeServices, of: "kubelet",
			wantOrder: []string{"kube-proxy", "hybrid-overlay-node"}},
		{name: "names compare case-insensitively", services: nodeServices, of: "KUBELET",
			wantOrder: []string{"kube-proxy", "hybrid-overlay-node"}},
		{name: "nothing depends on it", services: nodeServices, of: "kube-proxy"},
		{name: "a service nobody knows", services: nodeServices, of: "absent"},
		{name: "load-order groups are not services", services: nodeServices, of: "TDI"},
		{
			name: "a diamond: the shared dependent first, ties by name",
			services: map[string][]string{
				"base": nil, "left": {"base"}, "right": {"BASE"}, "top": {"left", "right"}, "other": {"base"},
			},
			of:        "base",
			wantOrder: []string{"other", "top", "left", "right"},
		},
		{
			name: "an indirect dependent also depending directly",
			services: map[string][]string{
				"base": nil, "mid": {"base"}, "top": {"base", "mid"},
			},
			of:        "base",
			wantOrder: []string{"top", "mid"},
		},
		{
			name:      "a cycle does not loop",
			services:  map[string][]string{"base": nil, "a": {"base", "b"}, "b": {"a"}},
			of:        "base",
			wantOrder: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.wantOrder, host.StopOrder(tt.of, tt.services))
		})
	}
}
