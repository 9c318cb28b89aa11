package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/test/kubetest"
)

// testDaemonSet is a DaemonSet shaped like the Windows network's: a
// HostProcess pod selecting Windows nodes, unless linux.
func testDaemonSet(ns, name string, linux bool) *appsv1.DaemonSet {
	labels := map[string]string{"app": name}
	spec := corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelOSStable: "windows"},
		HostNetwork:  true,
		SecurityContext: &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
			HostProcess: ptrTo(true), RunAsUserName: ptrTo(`NT AUTHORITY\system`)}},
		Containers: []corev1.Container{{Name: "main", Image: "example.invalid/" + name + ":1"}},
	}
	if linux {
		spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
		spec.SecurityContext, spec.HostNetwork = nil, false
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }

func createDS(t *testing.T, cs kubernetes.Interface, ds *appsv1.DaemonSet) *appsv1.DaemonSet {
	t.Helper()
	ensureNamespace(t, cs, ds.Namespace)
	got, err := cs.AppsV1().DaemonSets(ds.Namespace).Create(ctx, ds, metav1.CreateOptions{})
	require.NoError(t, err)
	return got
}

func ensureNamespace(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

func TestWindowsNetworkHostProcess(t *testing.T) {
	// Its own cluster: the DaemonSets it creates must not reach other tests.
	c := kubetest.Start(t)
	m := WindowsNetwork{testClusters}
	cfg := kcfg(t, c, m, map[string]cty.Value{"network": cty.StringVal("hostprocess")})

	// Nothing for Windows: both are named as missing, at plan, with the fix.
	createDS(t, c.Client, testDaemonSet("kube-system", "calico-node", true))
	d := requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "The cluster does not run the network this node needs", "network")
	assert.Contains(t, d.Detail, "Windows CNI: no HostProcess DaemonSet selecting kubernetes.io/os=windows")
	assert.Contains(t, d.Detail, "windowsDataplane: HNS")
	assert.Contains(t, d.Detail, "Windows kube-proxy: no HostProcess DaemonSet")
	assert.Contains(t, d.Detail, "kube-proxy-windows")

	// The CNI alone: kube-proxy still missing.
	createDS(t, c.Client, testDaemonSet("calico-system", "calico-node-windows", false))
	d = requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "The cluster does not run the network this node needs", "network")
	assert.NotContains(t, d.Detail, "Windows CNI:")
	assert.Contains(t, d.Detail, "Windows kube-proxy:")

	createDS(t, c.Client, testDaemonSet("kube-system", "kube-proxy-windows", false))
	p := plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	require.Nil(t, p.Change, "a read changes nothing")
	assert.Equal(t, "calico-system/calico-node-windows", p.Result.GetAttr("cni_daemonset").AsString())
	assert.Equal(t, "kube-system/kube-proxy-windows", p.Result.GetAttr("kube_proxy_daemonset").AsString())
	assert.Equal(t, "hostprocess", p.Result.GetAttr("recognised").AsString())
	ar := apply(t, m, cfg, nil)
	require.Empty(t, ar.Diagnostics)
	assert.Equal(t, p.Result, ar.Result, "plan and apply read alike")

	// A named DaemonSet must be a Windows HostProcess one.
	named := kcfg(t, c, m, map[string]cty.Value{"network": cty.StringVal("hostprocess"), "cni_daemonset": cty.StringVal("kube-system/calico-node")})
	d = requireDiag(t, plan(t, m, named).Diagnostics, named, "The cluster does not run the network this node needs", "network")
	assert.Contains(t, d.Detail, "kube-system/calico-node does not select Windows nodes")

	// ovn-hybrid on this cluster: refused, and the error says what fits.
	ovn := kcfg(t, c, m, map[string]cty.Value{"network": cty.StringVal("ovn-hybrid")})
	d = requireDiag(t, plan(t, m, ovn).Diagnostics, ovn, "The cluster does not run the network this node needs", "network")
	assert.Contains(t, d.Detail, "ovn-kubernetes/ovnkube-config")
	assert.Contains(t, d.Detail, `This cluster looks made for network = "hostprocess".`)
}

func TestWindowsNetworkOVNHybrid(t *testing.T) {
	c := kubetest.Start(t)
	m := WindowsNetwork{testClusters}
	cfg := kcfg(t, c, m, map[string]cty.Value{"network": cty.StringVal("ovn-hybrid")})
	ensureNamespace(t, c.Client, "ovn-kubernetes")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ovn-kubernetes", Name: OVNConfigMapName},
		Data: map[string]string{"ovnkube.conf": "[default]\nmtu=1400\n\n[hybridoverlay]\nenabled=false\n"}}
	_, err := c.Client.CoreV1().ConfigMaps("ovn-kubernetes").Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	d := requireDiag(t, plan(t, m, cfg).Diagnostics, cfg, "The cluster does not run the network this node needs", "network")
	assert.Contains(t, d.Detail, "does not enable the hybrid overlay")

	cm.Data["ovnkube.conf"] = "[default]\nmtu=1400\n\n[hybridoverlay]\nenabled = true\ncluster-subnets=10.132.0.0/14\n"
	_, err = c.Client.CoreV1().ConfigMaps("ovn-kubernetes").Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	p := plan(t, m, cfg)
	require.Empty(t, p.Diagnostics)
	assert.Equal(t, "ovn-hybrid", p.Result.GetAttr("recognised").AsString())
	assert.True(t, p.Result.GetAttr("cni_daemonset").IsNull())

	// hostprocess here: both DaemonSets missing, and ovn-hybrid named.
	hp := kcfg(t, c, m, map[string]cty.Value{"network": cty.StringVal("hostprocess")})
	d = requireDiag(t, plan(t, m, hp).Diagnostics, hp, "The cluster does not run the network this node needs", "network")
	assert.Contains(t, d.Detail, `This cluster looks made for network = "ovn-hybrid".`)
}

func TestWindowsNetworkValidate(t *testing.T) {
	m := WindowsNetwork{}
	cfg := cfgFor(t, m, map[string]cty.Value{"network": cty.StringVal("flannel"), "kube_proxy_daemonset": cty.StringVal("kube-proxy")})
	diags := m.Validate(modules.ValidateRequest{Config: cfg})
	requireDiag(t, diags, cfg, "Invalid network", "network")
	requireDiag(t, diags, cfg, "Invalid DaemonSet reference", "kube_proxy_daemonset")
}
