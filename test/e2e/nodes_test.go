//go:build linux

package e2e

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestStockPlaybooksRefuseForeignNodes (issue 26, finding 3): join,
// upgrade and remove from the CLI, given a node name a Node holds that is
// not a Windows Node wsu joined (a control-plane Node; a Windows Node
// another instance joined), fail at their first cluster task with a
// located error, and neither the host nor the Node changes.
func TestStockPlaybooksRefuseForeignNodes(t *testing.T) {
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	ctx := context.Background()
	nodes := env.Cluster.Client.CoreV1().Nodes()
	register := func(name string, labels map[string]string, owner string) *corev1.Node {
		_, err := env.Cluster.CreateNode(ctx, name, labels)
		require.NoError(t, err)
		if owner != "" {
			require.NoError(t, env.Cluster.AnnotateNode(ctx, name, "wsu.dev/owner", owner))
		}
		if labels[corev1.LabelOSStable] == "windows" {
			// The OVN-Kubernetes master stand-in annotates a new Windows
			// Node once, in its own time: the version taken below must
			// be the one after that write, or its late patch reads as
			// a change wsu made.
			require.Eventually(t, func() bool {
				n, err := nodes.Get(ctx, name, metav1.GetOptions{})
				return err == nil && n.Annotations[kubetest.HybridOverlaySubnetAnnotation] != ""
			}, time.Minute, 10*time.Millisecond, "the OVN-Kubernetes master stand-in annotates Node %s", name)
		}
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return n
	}
	cp := register("cp-e2e", map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""}, "")
	// The host's own name, held by a Windows Node another instance joined.
	other := register(h.NodeName, map[string]string{"kubernetes.io/os": "windows"}, "windowsinstance/wsu-system/other")

	tests := []struct {
		name string
		args []string
		node *corev1.Node
		file string
		want []string
	}{
		{name: "join a control-plane node's name", args: []string{"apply", "join", "-var", "node_name=cp-e2e"}, node: cp, file: "join.hcl",
			want: []string{"Node cp-e2e is not this host's", "not a Windows Node (label kubernetes.io/os is linux)"}},
		{name: "join another instance's node", args: []string{"apply", "join"}, node: other, file: "join.hcl",
			want: []string{"Node " + h.NodeName + " is not this host's", `belongs to wsu.dev/owner="windowsinstance/wsu-system/other", not "wsu"`}},
		{name: "remove a control-plane node", args: []string{"apply", "remove", "-var", "node_name=cp-e2e"}, node: cp, file: "remove.hcl",
			want: []string{"Node cp-e2e is not this host's", "not a Windows Node"}},
		{name: "remove another instance's node", args: []string{"apply", "remove"}, node: other, file: "remove.hcl",
			want: []string{`belongs to wsu.dev/owner="windowsinstance/wsu-system/other"`}},
		// The controller's removal of a joined host whose Node was replaced
		// since (same name and mark, another UID).
		{name: "remove a replaced node", args: []string{"apply", "remove", "-var", "node_owner=windowsinstance/wsu-system/other",
			"-var", "node_uid=00000000-0000-0000-0000-000000000001"}, node: other, file: "remove.hcl",
			want: []string{"Node " + h.NodeName + " is not this host's", "not 00000000-0000-0000-0000-000000000001, the Node wsu joined under that name"}},
		{name: "upgrade a control-plane node", args: []string{"apply", "upgrade", "-var", "node_name=cp-e2e"}, node: cp, file: "upgrade-node.hcl",
			want: []string{"Node cp-e2e is not this host's", "not a Windows Node"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := env.Snapshot(h)
			require.NoError(t, err)
			r, err := env.Run(ctx, io.Discard, tt.args...)
			require.NoError(t, err)
			out := r.Stdout + r.Stderr
			assert.NotEqual(t, 0, r.ExitCode, "refused")
			for _, w := range tt.want {
				assert.Contains(t, out, w)
			}
			assert.Contains(t, out, tt.file+" line", "the error points at the task")
			after, err := env.Snapshot(h)
			require.NoError(t, err)
			assert.Equal(t, before, after, "nothing on the host changed")
			n, err := nodes.Get(ctx, tt.node.Name, metav1.GetOptions{})
			require.NoError(t, err, "the Node is still there")
			assert.Equal(t, tt.node.ResourceVersion, n.ResourceVersion, "the Node is unchanged")
		})
	}

	// The controller's removal of an instance that never joined
	// (node_registered = false): whatever its node name, no Node is read
	// or touched, and the host is deconfigured.
	r, err := env.Run(ctx, io.Discard, "apply", "remove", "-var", "node_name=cp-e2e", "-var", "node_registered=false")
	require.NoError(t, err)
	assert.Equal(t, 0, r.ExitCode, "remove of a host that never registered:\n%s\n%s", tail(r.Stdout, 20), r.Stderr)
	for _, n := range []*corev1.Node{cp, other} {
		now, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, n.ResourceVersion, now.ResourceVersion, "Node %s unchanged", n.Name)
	}

	// A remove of a host whose Node does not exist (gone) touches no Node
	// and still deconfigures the host.
	require.NoError(t, nodes.Delete(ctx, h.NodeName, metav1.DeleteOptions{}))
	r, err = env.Run(ctx, io.Discard, "apply", "remove")
	require.NoError(t, err)
	assert.Equal(t, 0, r.ExitCode, "remove without a Node:\n%s\n%s", tail(r.Stdout, 20), r.Stderr)
	n, err := nodes.Get(ctx, "cp-e2e", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, cp.ResourceVersion, n.ResourceVersion)
}
