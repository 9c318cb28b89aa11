package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules"
)

// TestNodeModulesRefuseForeignNodes: k8s_node, k8s_node_cordon,
// k8s_node_drain and k8s_node_delete refuse, at the task's name and in
// both plan and apply, every Node that is not a Windows Node wsu joined
// with the owner and UID the task names, and leave it as it was.
func TestNodeModulesRefuseForeignNodes(t *testing.T) {
	c := cluster(t)
	_, err := c.CreateNode(ctx, "guard-cp", map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""})
	require.NoError(t, err)
	_, err = c.CreateNode(ctx, "guard-unmarked", map[string]string{"kubernetes.io/os": "windows"})
	require.NoError(t, err)
	joinedNode(t, c, "guard-other", nil)
	require.NoError(t, c.AnnotateNode(ctx, "guard-other", OwnerAnnotation, "windowsinstance/wsu-system/other"))
	joinedNode(t, c, "guard-mine", nil)

	mods := map[string]struct {
		m     modules.Module
		attrs map[string]cty.Value
	}{
		"k8s_node":        {Node{testClusters}, map[string]cty.Value{"labels": cty.MapVal(map[string]cty.Value{"evil": cty.StringVal("yes")})}},
		"k8s_node_cordon": {NodeCordon{testClusters}, nil},
		"k8s_node_drain":  {NodeDrain{testClusters}, map[string]cty.Value{"grace_period": cty.NumberIntVal(0)}},
		"k8s_node_delete": {NodeDelete{testClusters}, nil},
	}
	refused := []struct {
		name, node string
		guard      map[string]cty.Value
		detail     string
	}{
		{name: "linux control-plane node", node: "guard-cp", detail: "not a Windows Node (label kubernetes.io/os is linux)"},
		{name: "windows node wsu did not join", node: "guard-unmarked", detail: "has no wsu.dev/owner annotation"},
		{name: "another instance's node", node: "guard-other", guard: map[string]cty.Value{"owner": cty.StringVal("windowsinstance/wsu-system/me")},
			detail: `belongs to wsu.dev/owner="windowsinstance/wsu-system/other"`},
		{name: "same name, another UID", node: "guard-mine", guard: map[string]cty.Value{"uid": cty.StringVal("5f1b0c3e-0000-0000-0000-000000000000")},
			detail: "not 5f1b0c3e-0000-0000-0000-000000000000"},
	}
	for mname, mod := range mods {
		for _, tt := range refused {
			t.Run(mname+"/"+tt.name, func(t *testing.T) {
				before, err := c.Client.CoreV1().Nodes().Get(ctx, tt.node, metav1.GetOptions{})
				require.NoError(t, err)
				attrs := map[string]cty.Value{"name": cty.StringVal(tt.node)}
				for k, v := range mod.attrs {
					attrs[k] = v
				}
				for k, v := range tt.guard {
					attrs[k] = v
				}
				cfg := kcfg(t, c, mod.m, attrs)
				d := requireDiag(t, plan(t, mod.m, cfg).Diagnostics, cfg, "Node "+tt.node+" is not wsu's", "name")
				assert.Contains(t, d.Detail, tt.detail)
				// Apply checks again: a plan is no licence.
				a := apply(t, mod.m, cfg, &modules.Change{Action: modules.Update, Subject: "node " + tt.node})
				d = requireDiag(t, a.Diagnostics, cfg, "Node "+tt.node+" is not wsu's", "name")
				assert.Contains(t, d.Detail, tt.detail)
				after, err := c.Client.CoreV1().Nodes().Get(ctx, tt.node, metav1.GetOptions{})
				require.NoError(t, err, "the Node is still there")
				assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the Node is unchanged")
			})
		}
	}

	t.Run("owner and uid that match", func(t *testing.T) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "guard-mine", metav1.GetOptions{})
		require.NoError(t, err)
		m := NodeCordon{testClusters}
		change, _ := converge(t, m, kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("guard-mine"),
			"owner": cty.StringVal("wsu"), "uid": cty.StringVal(string(n.UID))}))
		require.NotNil(t, change)
		n, err = c.Client.CoreV1().Nodes().Get(ctx, "guard-mine", metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, n.Spec.Unschedulable)
	})

	t.Run("only_if_owned false: a site's own node", func(t *testing.T) {
		m := Node{testClusters}
		converge(t, m, kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("guard-cp"), "only_if_owned": cty.False,
			"labels": cty.MapVal(map[string]cty.Value{"site": cty.StringVal("yes")})}))
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "guard-cp", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "yes", n.Labels["site"])
	})
}

// TestNodeDeleteOnlyTheNodeChecked: a Node deleted and registered again
// between the check and the delete is not deleted (UID precondition), and
// a Node replaced after the controller recorded its UID is refused.
func TestNodeDeleteOnlyTheNodeChecked(t *testing.T) {
	c := cluster(t)
	m := NodeDelete{testClusters}
	joinedNode(t, c, "replaced-1", nil)
	old, err := c.Client.CoreV1().Nodes().Get(ctx, "replaced-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Client.CoreV1().Nodes().Delete(ctx, "replaced-1", metav1.DeleteOptions{}))
	joinedNode(t, c, "replaced-1", nil) // same name, same mark: another Node

	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("replaced-1"), "uid": cty.StringVal(string(old.UID))})
	requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Node replaced-1 is not wsu's", "name")
	requireDiag(t, apply(t, m, cfg, &modules.Change{Action: modules.Delete}).Diagnostics, cfg, "Node replaced-1 is not wsu's", "name")
	_, err = c.Client.CoreV1().Nodes().Get(ctx, "replaced-1", metav1.GetOptions{})
	require.NoError(t, err, "the new Node stays")
}

func TestNodeOwner(t *testing.T) {
	c := cluster(t)
	m := NodeOwner{testClusters}
	nodes := c.Client.CoreV1().Nodes()
	owner := func(name string) string {
		n, err := nodes.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return n.Annotations[OwnerAnnotation]
	}

	t.Run("no node: nothing to claim yet", func(t *testing.T) {
		cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("owner-new"), "owner": cty.StringVal("wsu")})
		change, res := converge(t, m, cfg)
		assert.Nil(t, change)
		assert.Equal(t, cty.False, res.GetAttr("exists"))
	})

	t.Run("wait: marks the node the kubelet registers", func(t *testing.T) {
		cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("owner-new"), "owner": cty.StringVal("wsu"),
			"adopt": cty.True, "wait": cty.NumberIntVal(10), "interval": cty.NumberFloatVal(0.05)})
		p := plan(t, m, cfg)
		require.NotNil(t, p.Change)
		assert.Equal(t, "mark node owner-new as wsu's once it registers", p.Change.Subject)
		_, err := c.CreateNode(ctx, "owner-new", map[string]string{"kubernetes.io/os": "windows"})
		require.NoError(t, err)
		a := apply(t, m, cfg, p.Change)
		require.False(t, a.Diagnostics.HasErrors(), "%s", a.Diagnostics)
		assert.Equal(t, "wsu", owner("owner-new"))
		n, err := nodes.Get(ctx, "owner-new", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, cty.StringVal(string(n.UID)), a.Result.GetAttr("uid"))
		// Joining again: the node is this owner's, no change.
		change, _ := converge(t, m, cfg)
		assert.Nil(t, change)
	})

	_, err := c.CreateNode(ctx, "owner-cp", map[string]string{"kubernetes.io/os": "linux"})
	require.NoError(t, err)
	_, err = c.CreateNode(ctx, "owner-unmarked", map[string]string{"kubernetes.io/os": "windows"})
	require.NoError(t, err)
	refused := []struct {
		name, node string
		attrs      map[string]cty.Value
		detail     string
	}{
		{name: "a linux node's name, adopt or not", node: "owner-cp", attrs: map[string]cty.Value{"adopt": cty.True}, detail: "not a Windows Node"},
		{name: "an unmarked windows node", node: "owner-unmarked", detail: "adopt_node = true"},
		{name: "another owner's node", node: "owner-new", attrs: map[string]cty.Value{"owner": cty.StringVal("windowsinstance/ns/b"), "adopt": cty.True},
			detail: `belongs to wsu.dev/owner="wsu", not "windowsinstance/ns/b"`},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			attrs := map[string]cty.Value{"name": cty.StringVal(tt.node), "owner": cty.StringVal("wsu")}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := kcfg(t, c, m, attrs)
			d := requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Node "+tt.node+" is not this host's", "name")
			assert.Contains(t, d.Detail, tt.detail)
			d = requireDiag(t, apply(t, m, cfg, &modules.Change{Action: modules.Update}).Diagnostics, cfg, "Node "+tt.node+" is not this host's", "name")
			assert.Contains(t, d.Detail, tt.detail)
		})
	}
	assert.Empty(t, owner("owner-cp"))
	assert.Empty(t, owner("owner-unmarked"))

	t.Run("adopt an unmarked windows node", func(t *testing.T) {
		cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("owner-unmarked"), "owner": cty.StringVal("wsu"), "adopt": cty.True})
		change, _ := converge(t, m, cfg)
		require.NotNil(t, change)
		assert.Equal(t, cty.NullVal(cty.String), field(t, change, `annotations["wsu.dev/owner"]`).Old)
		assert.Equal(t, "wsu", owner("owner-unmarked"))
	})

	t.Run("a node that did not register in time", func(t *testing.T) {
		cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("owner-never"), "owner": cty.StringVal("wsu"),
			"wait": cty.NumberFloatVal(0.2), "interval": cty.NumberFloatVal(0.05)})
		requireDiag(t, apply(t, m, cfg, &modules.Change{Action: modules.Update}).Diagnostics, cfg, "Node owner-never did not register", "wait")
	})
}

// TestNodeOwnerAdoptsWMCONode: a Windows Node WMCO configured (its
// version annotation, no wsu mark) is taken only for the host at one of
// its addresses; the result says it was WMCO's, and the mark is written.
func TestNodeOwnerAdoptsWMCONode(t *testing.T) {
	c := cluster(t)
	m := NodeOwner{testClusters}
	nodes := c.Client.CoreV1().Nodes()
	wmcoNode := func(name, addr string, annotated bool) {
		_, err := c.CreateNode(ctx, name, map[string]string{"kubernetes.io/os": "windows"})
		require.NoError(t, err)
		if annotated {
			require.NoError(t, c.AnnotateNode(ctx, name, kube.WMCOVersionAnnotation, "10.17.0"))
		}
		require.NoError(t, c.SetNodeAddresses(ctx, name, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: addr}))
	}
	wmcoNode("wmco-a", "10.1.42.1", true)
	wmcoNode("wmco-b", "10.1.42.2", false)

	refused := []struct {
		name, node, address string
	}{
		{name: "WMCO's Node of another host", node: "wmco-a", address: "10.1.42.9"},
		{name: "an unmarked Node without WMCO's annotation", node: "wmco-b", address: "10.1.42.2"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal(tt.node), "owner": cty.StringVal("wsu"), "wmco_address": cty.StringVal(tt.address)})
			d := requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Node "+tt.node+" is not this host's", "name")
			assert.Contains(t, d.Detail, "has no wsu.dev/owner annotation")
		})
	}

	t.Run("WMCO's Node of this host", func(t *testing.T) {
		cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("wmco-a"), "owner": cty.StringVal("wsu"), "wmco_address": cty.StringVal("10.1.42.1")})
		p := plan(t, m, cfg)
		require.False(t, p.Diagnostics.HasErrors(), "%s", p.Diagnostics)
		require.NotNil(t, p.Change)
		assert.Equal(t, cty.True, p.Result.GetAttr("wmco"), "the plan says the Node is WMCO's")
		before, err := nodes.Get(ctx, "wmco-a", metav1.GetOptions{})
		require.NoError(t, err)
		a := apply(t, m, cfg, p.Change)
		require.False(t, a.Diagnostics.HasErrors(), "%s", a.Diagnostics)
		assert.Equal(t, cty.True, a.Result.GetAttr("wmco"), "it was WMCO's when read")
		after, err := nodes.Get(ctx, "wmco-a", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "wsu", after.Annotations[OwnerAnnotation])
		assert.Equal(t, before.UID, after.UID, "the same Node")
		// Marked: the next run finds wsu's Node, no longer WMCO's.
		change, res := converge(t, m, cfg)
		assert.Nil(t, change)
		assert.Equal(t, cty.False, res.GetAttr("wmco"))
	})
}

// TestNodeOwnerKubeadmRule: a node-only join (no owner: its bootstrap
// token cannot mark Nodes) follows kubeadm join's rule, and never changes
// anything.
func TestNodeOwnerKubeadmRule(t *testing.T) {
	c := cluster(t)
	m := NodeOwner{testClusters}
	_, err := c.CreateNode(ctx, "kubeadm-linux", map[string]string{"kubernetes.io/os": "linux"})
	require.NoError(t, err)
	_, err = c.CreateNode(ctx, "kubeadm-notready", map[string]string{"kubernetes.io/os": "windows"})
	require.NoError(t, err)
	_, err = c.CreateNode(ctx, "kubeadm-ready", map[string]string{"kubernetes.io/os": "windows"})
	require.NoError(t, err)
	require.NoError(t, c.SetNodeReady(ctx, "kubeadm-ready"))

	cases := []struct {
		name, node string
		joined     bool
		refusal    string // "" passes
	}{
		{name: "no node", node: "kubeadm-none"},
		{name: "a NotReady windows node may be joined again", node: "kubeadm-notready"},
		{name: "a Ready node is another machine's", node: "kubeadm-ready", refusal: "A Ready Node named kubeadm-ready exists"},
		{name: "a Ready node this host joined: a re-run", node: "kubeadm-ready", joined: true},
		{name: "a linux node, joined or not", node: "kubeadm-linux", joined: true, refusal: "not a Windows Node"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal(tt.node), "joined": cty.BoolVal(tt.joined)})
			p := plan(t, m, cfg)
			a := apply(t, m, cfg, nil)
			if tt.refusal == "" {
				require.False(t, p.Diagnostics.HasErrors(), "%s", p.Diagnostics)
				require.False(t, a.Diagnostics.HasErrors(), "%s", a.Diagnostics)
				assert.Nil(t, p.Change, "nothing is ever marked without an owner")
				return
			}
			d := requireDiag(t, p.Diagnostics, cfg, "Node "+tt.node+" is not this host's", "name")
			assert.Contains(t, d.Detail, tt.refusal)
			d = requireDiag(t, a.Diagnostics, cfg, "Node "+tt.node+" is not this host's", "name")
			assert.Contains(t, d.Detail, tt.refusal)
		})
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "kubeadm-notready", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, n.Annotations[OwnerAnnotation], "no mark written")

	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("kubeadm-none"), "wait": cty.NumberIntVal(5)})
	requireDiag(t, m.Validate(modules.ValidateRequest{Config: cfg}), cfg, "Nothing to wait for", "wait")
}
