package kubetest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What InstallWindowsNetwork creates, by the names upstream uses: the
// Tigera operator's calico-node-windows DaemonSet and sig-windows-tools'
// kube-proxy-windows (hostprocess/calico/kube-proxy/kube-proxy.yml).
const (
	CalicoNamespace            = "calico-system"
	CalicoNodeWindowsDaemonSet = "calico-node-windows"
	CalicoNodeServiceAccount   = "calico-node"
	// CalicoServicesEndpointConfigMap is the operator's
	// kubernetes-services-endpoint: the API server's real address for
	// HostProcess pods, which cannot use the Service VIP.
	CalicoServicesEndpointConfigMap = "kubernetes-services-endpoint"
	KubeProxyWindowsDaemonSet       = "kube-proxy-windows" // in kube-system

	// DefaultCNIBinDir and DefaultCNIConfDir are the Tigera operator's
	// default windowsNodes.cniBinDir and cniConfigDir (the vanilla
	// paths), which containerd's CNI dirs must equal.
	DefaultCNIBinDir  = `C:\opt\cni\bin`
	DefaultCNIConfDir = `C:\etc\cni\net.d`
	// CalicoConflist is the CNI config file calico-node-windows writes.
	CalicoConflist = "10-calico.conflist"

	// CalicoHNSNetwork and CalicoHNSEndpoint are the HNS network (VXLAN:
	// type Overlay) calico-node-windows creates and its host endpoint,
	// whose address kube-proxy takes as its source VIP.
	CalicoHNSNetwork  = "Calico"
	CalicoHNSEndpoint = "Calico_ep"

	// DefaultCalicoNodeWindowsImage is the image the DaemonSet names; the
	// kubelet stand-in maps it to the calicowindows stand-in.
	DefaultCalicoNodeWindowsImage = "docker.io/calico/node-windows:v3.30.0"
)

// HostProcessUser is what both DaemonSets run as.
const HostProcessUser = `NT AUTHORITY\system`

// WindowsNetworkOptions configures InstallWindowsNetwork.
type WindowsNetworkOptions struct {
	// CNIBinDir and CNIConfDir are the Windows directories Calico writes
	// into (default DefaultCNIBinDir, DefaultCNIConfDir).
	CNIBinDir, CNIConfDir string
	// CalicoImage defaults to DefaultCalicoNodeWindowsImage.
	CalicoImage string
	// KubeProxyImage defaults to
	// sigwindowstools/kube-proxy:<API server version>-calico-hostprocess.
	KubeProxyImage string
}

// InstallWindowsNetwork applies, as a cluster admin would for Calico
// (VXLAN) with HostProcess Windows nodes, the two DaemonSets the cluster
// then schedules onto every Windows Node (CalicoNodeWindowsDaemonSet,
// KubeProxyWindowsDaemonSet) and what they need: the calico-system
// namespace, the calico-node ServiceAccount with read access to Nodes,
// and the kubernetes-services-endpoint ConfigMap. The kube-proxy
// ServiceAccount, RBAC and ConfigMap are InitKubeadm's. Running the
// DaemonSets' pods needs WithKubeadmControllers (the DaemonSet
// controller), WithScheduler and a kubelet stand-in on the node, which
// starts stand-ins for the images. It is idempotent.
func (c *Cluster) InstallWindowsNetwork(ctx context.Context, opts WindowsNetworkOptions) error {
	if opts.CNIBinDir == "" {
		opts.CNIBinDir = DefaultCNIBinDir
	}
	if opts.CNIConfDir == "" {
		opts.CNIConfDir = DefaultCNIConfDir
	}
	if opts.CalicoImage == "" {
		opts.CalicoImage = DefaultCalicoNodeWindowsImage
	}
	if opts.KubeProxyImage == "" {
		ver, err := c.Client.Discovery().ServerVersion()
		if err != nil {
			return fmt.Errorf("kubetest: API server version: %w", err)
		}
		// The tags are v1.x.y; a stamped test build may carry a suffix.
		v, _, _ := strings.Cut(ver.GitVersion, "-")
		opts.KubeProxyImage = "sigwindowstools/kube-proxy:" + v + "-calico-hostprocess"
	}
	host, port, err := c.apiHostPort()
	if err != nil {
		return err
	}
	c.logf("kubetest: as the cluster admin: applying %s/%s and kube-system/%s", CalicoNamespace, CalicoNodeWindowsDaemonSet, KubeProxyWindowsDaemonSet)
	u := &upserter{}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: CalicoNamespace}}
	nss := c.Client.CoreV1().Namespaces()
	upsert(ctx, u, "Namespace "+ns.Name, ns, nss.Create, nss.Update)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: CalicoNodeServiceAccount, Namespace: CalicoNamespace}}
	sas := c.Client.CoreV1().ServiceAccounts(CalicoNamespace)
	upsert(ctx, u, "ServiceAccount "+sa.Name, sa, sas.Create, sas.Update)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: CalicoServicesEndpointConfigMap, Namespace: CalicoNamespace},
		Data:       map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port},
	}
	cms := c.Client.CoreV1().ConfigMaps(CalicoNamespace)
	upsert(ctx, u, "ConfigMap "+cm.Name, cm, cms.Create, cms.Update)
	c.calicoNodeRBAC(ctx, u)
	for _, ds := range []*appsv1.DaemonSet{calicoNodeWindows(opts), kubeProxyWindows(opts)} {
		dss := c.Client.AppsV1().DaemonSets(ds.Namespace)
		upsert(ctx, u, "DaemonSet "+ds.Namespace+"/"+ds.Name, ds, dss.Create, dss.Update)
	}
	if len(u.errs) > 0 {
		return fmt.Errorf("kubetest: Windows network: %w", errors.Join(u.errs...))
	}
	return nil
}

// calicoNodeRBAC grants calico-node what the stand-in uses of Calico's
// much larger ClusterRole: reading Nodes (for spec.podCIDR).
func (c *Cluster) calicoNodeRBAC(ctx context.Context, u *upserter) {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "calico-node"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"},
			Verbs: []string{"get", "list", "watch"}}},
	}
	b := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "calico-node"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: CalicoNodeServiceAccount,
			Namespace: CalicoNamespace}},
	}
	crs, crbs := c.Client.RbacV1().ClusterRoles(), c.Client.RbacV1().ClusterRoleBindings()
	upsert(ctx, u, "ClusterRole "+role.Name, role, crs.Create, crs.Update)
	upsert(ctx, u, "ClusterRoleBinding "+b.Name, b, crbs.Create, crbs.Update)
}

// hostProcessPod is what both DaemonSets' pods share: HostProcess as
// SYSTEM on the host network, on Windows nodes only, tolerating every
// taint, node-critical.
func hostProcessPod(app, serviceAccount string, c corev1.Container) corev1.PodTemplateSpec {
	hostProcess, user := true, HostProcessUser
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": app}},
		Spec: corev1.PodSpec{
			ServiceAccountName: serviceAccount,
			HostNetwork:        true,
			SecurityContext: &corev1.PodSecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{
				HostProcess: &hostProcess, RunAsUserName: &user}},
			NodeSelector: map[string]string{corev1.LabelOSStable: "windows"},
			Tolerations: []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
				{Operator: corev1.TolerationOpExists}},
			PriorityClassName: "system-node-critical",
			Containers:        []corev1.Container{c},
		},
	}
}

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func configMapEnv(name, configMap string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap}, Key: name}}}
}

// calicoNodeWindows is the operator's calico-node-windows for VXLAN with
// one container, node; its install-cni init container's work (the CNI
// binaries and config) and the felix container are the same stand-in's.
func calicoNodeWindows(opts WindowsNetworkOptions) *appsv1.DaemonSet {
	node := corev1.Container{
		Name:  "node",
		Image: opts.CalicoImage,
		Env: []corev1.EnvVar{
			configMapEnv("KUBERNETES_SERVICE_HOST", CalicoServicesEndpointConfigMap),
			configMapEnv("KUBERNETES_SERVICE_PORT", CalicoServicesEndpointConfigMap),
			fieldEnv("NODENAME", "spec.nodeName"),
			fieldEnv("NODE_NAME", "spec.nodeName"),
			{Name: "CALICO_NETWORKING_BACKEND", Value: "vxlan"},
			{Name: "KUBE_NETWORK", Value: "Calico.*"},
			{Name: "VXLAN_VNI", Value: "4096"},
			{Name: "CNI_BIN_DIR", Value: opts.CNIBinDir},
			{Name: "CNI_NET_DIR", Value: opts.CNIConfDir},
			{Name: "CNI_CONF_NAME", Value: CalicoConflist},
			{Name: "KUBERNETES_SERVICE_CIDRS", Value: ServiceSubnet},
			{Name: "KUBERNETES_DNS_SERVERS", Value: ClusterDNSIP},
		},
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: CalicoNodeWindowsDaemonSet, Namespace: CalicoNamespace,
			Labels: map[string]string{"k8s-app": CalicoNodeWindowsDaemonSet}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": CalicoNodeWindowsDaemonSet}},
			Template: hostProcessPod(CalicoNodeWindowsDaemonSet, CalicoNodeServiceAccount, node),
		},
	}
}

// kubeProxyWindows is sig-windows-tools' kube-proxy-windows: start.ps1
// from the image, the kube-proxy ConfigMap at /var/lib/kube-proxy.
func kubeProxyWindows(opts WindowsNetworkOptions) *appsv1.DaemonSet {
	proxy := corev1.Container{
		Name:       "kube-proxy",
		Image:      opts.KubeProxyImage,
		Args:       []string{"$env:CONTAINER_SANDBOX_MOUNT_POINT/kube-proxy/start.ps1"},
		WorkingDir: "$env:CONTAINER_SANDBOX_MOUNT_POINT/kube-proxy/",
		Env: []corev1.EnvVar{
			fieldEnv("NODE_NAME", "spec.nodeName"),
			fieldEnv("POD_IP", "status.podIP"),
			{Name: "KUBE_NETWORK", Value: CalicoHNSNetwork},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "kube-proxy", MountPath: "/var/lib/kube-proxy"}},
	}
	tmpl := hostProcessPod(KubeProxyWindowsDaemonSet, KubeProxyServiceAccount, proxy)
	tmpl.Spec.Volumes = []corev1.Volume{{Name: "kube-proxy", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: KubeProxyConfigMap}}}}}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: KubeProxyWindowsDaemonSet, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-proxy"}},
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": KubeProxyWindowsDaemonSet}},
			Template:       tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
		},
	}
}
