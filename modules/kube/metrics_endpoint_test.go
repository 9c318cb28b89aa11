package kube

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
)

// Two nodes publish their exporters under one Service; a re-run changes
// nothing; a new address updates the node's slice; absent removes only
// that node's slice.
func TestMetricsEndpoint(t *testing.T) {
	c := cluster(t)
	const ns = "metrics-1"
	require.NoError(t, c.EnsureNamespace(ctx, ns))
	m := MetricsEndpoint{testClusters}
	cfg := func(node, addr, state string) modules.Config {
		return kcfg(t, c, m, map[string]cty.Value{"namespace": cty.StringVal(ns), "node_name": cty.StringVal(node), "address": cty.StringVal(addr), "state": cty.StringVal(state)})
	}
	var uids []string
	for _, n := range []string{"mwin-1", "mwin-2"} {
		node, err := c.CreateNode(ctx, n, nil)
		require.NoError(t, err)
		uids = append(uids, string(node.UID))
	}

	ch, _ := converge(t, m, cfg("mwin-1", "10.0.0.11", "present"))
	assert.Equal(t, modules.Create, ch.Action)
	assert.ElementsMatch(t, []string{"service", "addresses"}, fieldNames(ch))
	ch, _ = converge(t, m, cfg("mwin-2", "10.0.0.12", "present"))
	assert.Equal(t, []string{"addresses"}, fieldNames(ch), "the Service is there already")

	svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "windows-exporter", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, svc.Spec.Selector, "no selector: the slices say where the exporters are")
	assert.Equal(t, corev1.ClusterIPNone, svc.Spec.ClusterIP, "headless, as WMCO's")
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, int32(9182), svc.Spec.Ports[0].Port)
	assert.Equal(t, "metrics", svc.Spec.Ports[0].Name)

	list, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=windows-exporter"})
	require.NoError(t, err)
	got := map[string]string{}
	for _, s := range list.Items {
		require.Len(t, s.Endpoints, 1)
		assert.Equal(t, ManagedBy, s.Labels[discoveryv1.LabelManagedBy])
		require.Len(t, s.OwnerReferences, 1, "owned by the Node: gone with it")
		assert.Equal(t, "Node", s.OwnerReferences[0].Kind)
		assert.Contains(t, uids, string(s.OwnerReferences[0].UID))
		got[*s.Endpoints[0].NodeName] = s.Endpoints[0].Addresses[0]
		assert.Equal(t, int32(9182), *s.Ports[0].Port)
	}
	assert.Equal(t, map[string]string{"mwin-1": "10.0.0.11", "mwin-2": "10.0.0.12"}, got)

	ch, _ = converge(t, m, cfg("mwin-1", "10.0.0.21", "present"))
	assert.Equal(t, modules.Update, ch.Action)
	f := field(t, ch, "addresses")
	assert.Equal(t, strs("10.0.0.11"), f.Old)
	assert.Equal(t, strs("10.0.0.21"), f.New)

	ch, _ = converge(t, m, cfg("mwin-1", "10.0.0.21", "absent"))
	assert.Equal(t, modules.Delete, ch.Action)
	_, err = c.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "windows-exporter-mwin-1", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the node's slice is gone: %v", err)
	_, err = c.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "windows-exporter-mwin-2", metav1.GetOptions{})
	assert.NoError(t, err, "the other node's stays")
	_, err = c.Client.CoreV1().Services(ns).Get(ctx, "windows-exporter", metav1.GetOptions{})
	assert.NoError(t, err, "the Service stays for the other nodes")
}

// A Service of that name someone else made is not taken over.
func TestMetricsEndpointForeignService(t *testing.T) {
	c := cluster(t)
	const ns = "metrics-2"
	require.NoError(t, c.EnsureNamespace(ctx, ns))
	_, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "windows-exporter"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 9182}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CreateNode(ctx, "mwin-3", nil)
	require.NoError(t, err)
	m := MetricsEndpoint{testClusters}
	cfg := kcfg(t, c, m, map[string]cty.Value{"namespace": cty.StringVal(ns), "node_name": cty.StringVal("mwin-3"), "address": cty.StringVal("10.0.0.13")})
	pr := plan(t, m, cfg)
	requireDiag(t, pr.Diagnostics, cfg, "Service not managed by wsu", "service")
}

// An address the API server refuses as an endpoint (loopback, link-local,
// unspecified) is left out with a warning at the address, and a slice
// published for an earlier address is taken back; the Service stays.
func TestMetricsEndpointUnlistedAddress(t *testing.T) {
	c := cluster(t)
	const ns = "metrics-3"
	require.NoError(t, c.EnsureNamespace(ctx, ns))
	_, err := c.CreateNode(ctx, "mwin-4", nil)
	require.NoError(t, err)
	m := MetricsEndpoint{testClusters}
	cfg := func(addr string) modules.Config {
		return kcfg(t, c, m, map[string]cty.Value{"namespace": cty.StringVal(ns), "node_name": cty.StringVal("mwin-4"), "address": cty.StringVal(addr)})
	}
	converge(t, m, cfg("10.0.0.14"))

	for _, addr := range []string{"127.0.10.2", "169.254.3.4", "0.0.0.0", "::1"} {
		c := cfg(addr)
		pr := plan(t, m, c)
		moduletest.RequireDiag(t, pr.Diagnostics, c, hcl.DiagWarning, "Node address not published", "address")
		assert.False(t, pr.Diagnostics.HasErrors(), "%s: a warning, not an error", addr)
	}
	ch, _ := converge(t, m, cfg("127.0.10.2"))
	require.NotNil(t, ch)
	f := field(t, ch, "addresses")
	assert.Equal(t, strs("10.0.0.14"), f.Old, "the earlier address is taken out")
	_, err = c.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, "windows-exporter-mwin-4", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no slice for a loopback address: %v", err)
	_, err = c.Client.CoreV1().Services(ns).Get(ctx, "windows-exporter", metav1.GetOptions{})
	assert.NoError(t, err, "the Service stays")
	ch, _ = converge(t, m, cfg("127.0.10.2"))
	assert.Nil(t, ch, "nothing more to do")
}
