package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
)

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", 254)
	taint := func(key, value, effect string) cty.Value {
		v := map[string]cty.Value{"key": cty.StringVal(key), "effect": cty.StringVal(effect)}
		if value != "" {
			v["value"] = cty.StringVal(value)
		}
		return cty.ObjectVal(v)
	}
	tests := []struct {
		name    string
		module  modules.Module
		attrs   map[string]cty.Value
		summary string // "" for valid
		attr    string
	}{
		{name: "wait ok", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("win-1")}},
		{name: "wait unknown name", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.UnknownVal(cty.String)}},
		{name: "wait upper case name", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("WIN-1")}, summary: "Invalid node name", attr: "name"},
		{name: "wait long name", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal(long)}, summary: "Invalid node name", attr: "name"},
		{name: "wait null name", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.NullVal(cty.String)}, summary: "Missing node name", attr: "name"},
		{name: "wait bad status", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"), "status": cty.StringVal("true")}, summary: "Invalid status", attr: "status"},
		{name: "wait empty condition", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"), "condition": cty.StringVal("")}, summary: "Empty condition", attr: "condition"},
		{name: "wait negative timeout", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"), "timeout": cty.NumberIntVal(-1)}, summary: "Invalid timeout", attr: "timeout"},
		{name: "wait zero interval", module: NodeWait{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"), "interval": cty.NumberIntVal(0)}, summary: "Invalid interval", attr: "interval"},
		{name: "node ok", module: Node{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"),
			"labels":      cty.MapVal(map[string]cty.Value{"node.openshift.io/os_id": cty.StringVal("Windows"), "gone": cty.NullVal(cty.String)}),
			"annotations": cty.MapVal(map[string]cty.Value{"a.example/x": cty.StringVal("any value: {json}")}),
			"taints":      cty.TupleVal([]cty.Value{taint("os", "Windows", "NoSchedule"), taint("x", "", "NoExecute")}),
		}},
		{name: "node bad label key", module: Node{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"),
			"labels": cty.MapVal(map[string]cty.Value{"bad key": cty.StringVal("v")})}, summary: "Invalid key", attr: "labels"},
		{name: "node bad label value", module: Node{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"),
			"labels": cty.MapVal(map[string]cty.Value{"k": cty.StringVal("not a label value")})}, summary: "Invalid label value", attr: "labels"},
		{name: "node bad annotation key", module: Node{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"),
			"annotations": cty.MapVal(map[string]cty.Value{"a/b/c": cty.StringVal("v")})}, summary: "Invalid key", attr: "annotations"},
		{name: "node bad effect", module: Node{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"),
			"taints": cty.TupleVal([]cty.Value{taint("os", "Windows", "NoSchedul")})}, summary: "Invalid taint effect", attr: "taints"},
		{name: "node taint without effect", module: Node{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"),
			"taints": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("os"), "effect": cty.NullVal(cty.String)})})}, summary: "Missing taint effect", attr: "taints"},
		{name: "node bad taint key", module: Node{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"),
			"remove_taints": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("-x")})})}, summary: "Invalid taint key", attr: "remove_taints"},
		{name: "remove taint without effect ok", module: Node{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"),
			"remove_taints": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("os")})})}},
		{name: "cordon ok", module: NodeCordon{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"), "cordoned": cty.False}},
		{name: "cordon bad name", module: NodeCordon{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("a_b")}, summary: "Invalid node name", attr: "name"},
		{name: "drain ok", module: NodeDrain{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"), "grace_period": cty.NumberIntVal(0)}},
		{name: "drain negative grace", module: NodeDrain{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("n"), "grace_period": cty.NumberIntVal(-1)}, summary: "Invalid grace_period", attr: "grace_period"},
		{name: "delete bad name", module: NodeDelete{testClusters}, attrs: map[string]cty.Value{"name": cty.StringVal("")}, summary: "Invalid node name", attr: "name"},
		{name: "annotation ok", module: WaitAnnotation{testClusters}, attrs: map[string]cty.Value{"node": cty.StringVal("n"), "annotation": cty.StringVal("k8s.ovn.org/hybrid-overlay-node-subnet")}},
		{name: "annotation bad key", module: WaitAnnotation{testClusters}, attrs: map[string]cty.Value{"node": cty.StringVal("n"), "annotation": cty.StringVal("k8s.ovn.org/")}, summary: "Invalid annotation key", attr: "annotation"},
		{name: "annotation bad node", module: WaitAnnotation{testClusters}, attrs: map[string]cty.Value{"node": cty.StringVal("N"), "annotation": cty.StringVal("a")}, summary: "Invalid node name", attr: "node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, tt.module, tt.attrs)
			diags := tt.module.(modules.Validator).Validate(modules.ValidateRequest{Config: cfg})
			if tt.summary == "" {
				require.False(t, diags.HasErrors(), "%v", diags)
				return
			}
			requireDiag(t, diags, cfg, tt.summary, tt.attr)
		})
	}
}

// TestSchemas checks what every module here promises the engine.
func TestSchemas(t *testing.T) {
	moduletest.RequireRegistered(t, ".", "modules/kube/kube.go", Modules(testClusters.Cache))
	for _, m := range Modules(testClusters.Cache) {
		s := m.Schema()
		t.Run(s.Name, func(t *testing.T) {
			want := modules.TargetController
			if s.Name == "k8s_node_identity" {
				want = modules.TargetHost // its token lives on the node
			}
			assert.Equal(t, want, s.Target, "cluster modules never touch the host, but for the identity's token")
			assert.NotEmpty(t, s.Summary)
			assert.NotEmpty(t, s.Description)
			assert.NotEmpty(t, s.Example)
			for _, a := range append(s.Attributes, s.Results...) {
				assert.NotEmpty(t, a.Description, "attribute %s", a.Name)
			}
			if s.Name == "k8s_discovery" {
				// Its point is to need no credential but the token.
				assert.Nil(t, s.Attribute("kubeconfig"))
				assert.Nil(t, s.Attribute("kubeconfig_data"))
				return
			}
			require.NotNil(t, s.Attribute("kubeconfig"))
			require.NotNil(t, s.Attribute("context"))
		})
	}
}

func TestNodeWait(t *testing.T) {
	c := cluster(t)
	m := NodeWait{testClusters}
	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("wait-1"), "timeout": cty.NumberFloatVal(0.3), "interval": cty.NumberFloatVal(0.05)})

	// Not registered yet: a wait that times out saying so.
	p := plan(t, m, cfg)
	require.NotNil(t, p.Change)
	assert.Equal(t, modules.Run, p.Change.Action)
	assert.Equal(t, "wait for node wait-1 Ready=True", p.Change.Subject)
	assert.Equal(t, cty.StringVal("absent"), field(t, p.Change, "status").Old)
	a := apply(t, m, cfg, p.Change)
	d := requireDiag(t, a.Diagnostics, cfg, "Timed out waiting for node wait-1 Ready=True", "name")
	assert.Contains(t, d.Detail, "absent")

	// Registered, NotReady: the timeout names the kubelet's reason.
	_, err := c.CreateNode(ctx, "wait-1", nil)
	require.NoError(t, err)
	p = plan(t, m, cfg)
	assert.Equal(t, cty.StringVal("False"), field(t, p.Change, "status").Old)
	a = apply(t, m, cfg, p.Change)
	d = requireDiag(t, a.Diagnostics, cfg, "Timed out waiting for node wait-1 Ready=True", "name")
	assert.Contains(t, d.Detail, "KubeletNotReady")
	assert.Equal(t, cty.StringVal("False"), a.Result.GetAttr("status"))

	// The kubelet reports Ready while the task waits.
	cfg = kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("wait-1"), "timeout": cty.NumberIntVal(30), "interval": cty.NumberFloatVal(0.05)})
	p = plan(t, m, cfg)
	done := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		done <- c.SetNodeReady(ctx, "wait-1")
	}()
	a = apply(t, m, cfg, p.Change)
	require.NoError(t, <-done)
	require.False(t, a.Diagnostics.HasErrors(), "%v", a.Diagnostics)
	assert.Equal(t, cty.StringVal("True"), a.Result.GetAttr("status"))
	assert.True(t, a.Result.GetAttr("waited").AsBigFloat().Sign() > 0)

	// Ready: nothing to do, and the result is known at plan time.
	p = plan(t, m, cfg)
	require.Nil(t, p.Change)
	assert.Equal(t, cty.StringVal("True"), p.Result.GetAttr("status"))
	assert.Equal(t, cty.NumberIntVal(0), p.Result.GetAttr("waited"))

	// Another condition.
	p = plan(t, m, kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("wait-1"), "condition": cty.StringVal("MemoryPressure"), "status": cty.StringVal("False")}))
	require.NotNil(t, p.Change)
	assert.Equal(t, cty.StringVal("none"), field(t, p.Change, "status").Old)

	// Unknown name in plan: a wait, result unknown.
	p = plan(t, m, kcfg(t, c, m, map[string]cty.Value{"name": cty.UnknownVal(cty.String)}))
	require.NotNil(t, p.Change)
	assert.False(t, p.Result.GetAttr("waited").IsKnown())
}

func TestNode(t *testing.T) {
	c := cluster(t)
	m := Node{testClusters}
	joinedNode(t, c, "label-1", map[string]string{"old": "x"})
	nodes := c.Client.CoreV1().Nodes()
	notReady := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}

	labels := cty.MapVal(map[string]cty.Value{
		"node.openshift.io/os_id": cty.StringVal("Windows"),
		"kubernetes.io/os":        cty.StringVal("windows"), // already so
		"old":                     cty.NullVal(cty.String),
		"never-there":             cty.NullVal(cty.String),
	})
	taints := cty.TupleVal([]cty.Value{
		cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("os"), "value": cty.StringVal("Windows"), "effect": cty.StringVal("NoSchedule")}),
		cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("wsu.example/upgrading"), "effect": cty.StringVal("NoExecute")}),
	})
	cfg := kcfg(t, c, m, map[string]cty.Value{
		"name":        cty.StringVal("label-1"),
		"labels":      labels,
		"annotations": cty.MapVal(map[string]cty.Value{"windowsmachineconfig.openshift.io/version": cty.StringVal("v1")}),
		"taints":      taints,
	})
	change, res := converge(t, m, cfg)
	require.NotNil(t, change)
	assert.Equal(t, modules.Update, change.Action)
	assert.Equal(t, "node label-1", change.Subject)
	assert.ElementsMatch(t, []string{
		`labels["node.openshift.io/os_id"]`, `labels["old"]`,
		`annotations["windowsmachineconfig.openshift.io/version"]`,
		`taints["os:NoSchedule"]`, `taints["wsu.example/upgrading:NoExecute"]`,
	}, fieldNames(change), "only differing keys")
	assert.Equal(t, cty.StringVal("x"), field(t, change, `labels["old"]`).Old)
	assert.True(t, field(t, change, `labels["old"]`).New.IsNull())
	assert.True(t, field(t, change, `taints["os:NoSchedule"]`).Old.IsNull())

	n, err := nodes.Get(ctx, "label-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"kubernetes.io/os": "windows", "node.openshift.io/os_id": "Windows"}, n.Labels)
	assert.Equal(t, "v1", n.Annotations["windowsmachineconfig.openshift.io/version"])
	assert.Equal(t, []corev1.Taint{
		notReady, // the API server's TaintNodesByCondition: not named, left alone
		{Key: "os", Value: "Windows", Effect: corev1.TaintEffectNoSchedule},
		{Key: "wsu.example/upgrading", Effect: corev1.TaintEffectNoExecute},
	}, n.Spec.Taints)
	assert.Equal(t, cty.StringVal("Windows"), res.GetAttr("labels").Index(cty.StringVal("node.openshift.io/os_id")))
	assert.Equal(t, 3, res.GetAttr("taints").LengthInt())

	// A new value for a taint updates it in place; remove_taints without an
	// effect removes every taint of the key; an annotation is removed.
	cfg = kcfg(t, c, m, map[string]cty.Value{
		"name":          cty.StringVal("label-1"),
		"annotations":   cty.MapVal(map[string]cty.Value{"windowsmachineconfig.openshift.io/version": cty.NullVal(cty.String)}),
		"taints":        cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("os"), "value": cty.StringVal("win"), "effect": cty.StringVal("NoSchedule")})}),
		"remove_taints": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal("wsu.example/upgrading")})}),
	})
	change, res = converge(t, m, cfg)
	assert.ElementsMatch(t, []string{
		`annotations["windowsmachineconfig.openshift.io/version"]`, `taints["os:NoSchedule"]`, `taints["wsu.example/upgrading:NoExecute"]`,
	}, fieldNames(change))
	assert.Equal(t, cty.StringVal("Windows"), field(t, change, `taints["os:NoSchedule"]`).Old)
	assert.Equal(t, cty.StringVal("win"), field(t, change, `taints["os:NoSchedule"]`).New)
	n, err = nodes.Get(ctx, "label-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []corev1.Taint{notReady, {Key: "os", Value: "win", Effect: corev1.TaintEffectNoSchedule}}, n.Spec.Taints)
	assert.NotContains(t, n.Annotations, "windowsmachineconfig.openshift.io/version")
	assert.Equal(t, 2, res.GetAttr("taints").LengthInt())

	// Plan before the kubelet registers the node; apply fails if it still
	// has not.
	cfg = kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("label-2"), "labels": cty.MapVal(map[string]cty.Value{"a": cty.StringVal("b")})})
	p := plan(t, m, cfg)
	require.NotNil(t, p.Change)
	assert.Equal(t, "node label-2 (not registered yet)", p.Change.Subject)
	assert.Equal(t, []string{`labels["a"]`}, fieldNames(p.Change))
	a := apply(t, m, cfg, p.Change)
	requireDiag(t, a.Diagnostics, cfg, "Node label-2 does not exist", "name")
}

func TestNodeCordon(t *testing.T) {
	c := cluster(t)
	m := NodeCordon{testClusters}
	joinedNode(t, c, "cordon-1", nil)
	unschedulable := func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, "cordon-1", metav1.GetOptions{})
		require.NoError(t, err)
		return n.Spec.Unschedulable
	}

	tests := []struct {
		name        string
		cordoned    cty.Value // NilVal: the default
		wantSubject string
	}{
		{name: "cordon by default", cordoned: cty.NilVal, wantSubject: "cordon node cordon-1"},
		{name: "uncordon", cordoned: cty.False, wantSubject: "uncordon node cordon-1"},
		{name: "cordon", cordoned: cty.True, wantSubject: "cordon node cordon-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attrs := map[string]cty.Value{"name": cty.StringVal("cordon-1")}
			want := true
			if tt.cordoned != cty.NilVal {
				attrs["cordoned"] = tt.cordoned
				want = tt.cordoned.True()
			}
			change, res := converge(t, m, kcfg(t, c, m, attrs))
			require.NotNil(t, change)
			assert.Equal(t, tt.wantSubject, change.Subject)
			assert.Equal(t, cty.BoolVal(!want), field(t, change, "unschedulable").Old)
			assert.Equal(t, want, unschedulable())
			assert.Equal(t, cty.BoolVal(want), res.GetAttr("cordoned"))
		})
	}

	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("no-such-node")})
	requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Node no-such-node does not exist", "name")
}

func TestNodeDelete(t *testing.T) {
	c := cluster(t)
	m := NodeDelete{testClusters}
	joinedNode(t, c, "delete-1", nil)
	cfg := kcfg(t, c, m, map[string]cty.Value{"name": cty.StringVal("delete-1")})
	change, res := converge(t, m, cfg)
	require.NotNil(t, change)
	assert.Equal(t, modules.Delete, change.Action)
	assert.Equal(t, "node delete-1", change.Subject)
	assert.Equal(t, cty.True, res.GetAttr("existed"))
	_, err := c.Client.CoreV1().Nodes().Get(ctx, "delete-1", metav1.GetOptions{})
	require.Error(t, err)
	assert.Equal(t, cty.False, plan(t, m, cfg).Result.GetAttr("existed"))
}

func TestWaitAnnotation(t *testing.T) {
	c := cluster(t)
	m := WaitAnnotation{testClusters}
	const key = "k8s.ovn.org/hybrid-overlay-node-subnet"
	attrs := func(timeout float64) map[string]cty.Value {
		return map[string]cty.Value{"node": cty.StringVal("annotate-1"), "annotation": cty.StringVal(key),
			"timeout": cty.NumberFloatVal(timeout), "interval": cty.NumberFloatVal(0.05)}
	}

	cfg := kcfg(t, c, m, attrs(0.2))
	p := plan(t, m, cfg)
	require.NotNil(t, p.Change)
	assert.Equal(t, "wait for node annotate-1 annotation "+key, p.Change.Subject)
	a := apply(t, m, cfg, p.Change)
	d := requireDiag(t, a.Diagnostics, cfg, "Timed out waiting for annotation "+key+" on node annotate-1", "annotation")
	assert.Contains(t, d.Detail, "node annotate-1 does not exist")

	_, err := c.CreateNode(ctx, "annotate-1", nil)
	require.NoError(t, err)
	a = apply(t, m, cfg, p.Change)
	d = requireDiag(t, a.Diagnostics, cfg, "Timed out waiting for annotation "+key+" on node annotate-1", "annotation")
	assert.Contains(t, d.Detail, "has no such annotation")

	// The OVN-Kubernetes master allocates the subnet while the task waits.
	cfg = kcfg(t, c, m, attrs(30))
	done := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		done <- c.AnnotateNode(ctx, "annotate-1", key, "10.132.1.0/24")
	}()
	a = apply(t, m, cfg, p.Change)
	require.NoError(t, <-done)
	require.False(t, a.Diagnostics.HasErrors(), "%v", a.Diagnostics)
	assert.Equal(t, cty.StringVal("10.132.1.0/24"), a.Result.GetAttr("value"))

	p = plan(t, m, cfg)
	require.Nil(t, p.Change)
	assert.Equal(t, cty.StringVal("10.132.1.0/24"), p.Result.GetAttr("value"), "known at plan time")
}

func TestConnectionErrors(t *testing.T) {
	m := NodeWait{testClusters}
	cfg := cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("n"), "kubeconfig": cty.StringVal(t.TempDir() + "/missing")})
	requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "Cannot connect to the cluster", "kubeconfig")

	// Unknown kubeconfig (written by an earlier task): a pending change.
	cfg = cfgFor(t, m, map[string]cty.Value{"name": cty.StringVal("n"), "kubeconfig": cty.UnknownVal(cty.String)})
	p := plan(t, m, cfg)
	require.False(t, p.Diagnostics.HasErrors())
	require.NotNil(t, p.Change)
}
