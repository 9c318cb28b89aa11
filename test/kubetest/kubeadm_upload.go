package kubetest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The objects `kubeadm init` uploads that a join (and the kube-proxy
// DaemonSets) read, by kubeadm's names (cmd/kubeadm/app/constants,
// phases/uploadconfig, phases/kubelet, phases/addons/proxy).
const (
	// KubeletConfigMap holds, under key "kubelet", the cluster-wide
	// KubeletConfiguration `kubeadm join` writes to
	// /var/lib/kubelet/config.yaml.
	KubeletConfigMap = "kubelet-config"
	// KubeadmConfigMap holds, under key "ClusterConfiguration", the
	// cluster's kubeadm ClusterConfiguration.
	KubeadmConfigMap = "kubeadm-config"
	// KubeProxyConfigMap holds kube-proxy's config.conf and
	// kubeconfig.conf; KubeProxyServiceAccount is its identity. Both are
	// in kube-system.
	KubeProxyConfigMap      = "kube-proxy"
	KubeProxyServiceAccount = "kube-proxy"
	// KubeDNSService is the cluster DNS Service, at ClusterDNSIP.
	KubeDNSService = "kube-dns"
)

// kubeletConfigTemplate is the KubeletConfiguration kubeadm (v1.3x)
// uploads, with its defaults spelled out as it writes them; %s is the
// cluster DNS address, then the domain.
const kubeletConfigTemplate = `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- %s
clusterDomain: %s
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
resolvConf: /run/systemd/resolve/resolv.conf
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`

// clusterConfigTemplate is kubeadm's ClusterConfiguration (v1beta4);
// the arguments are the control plane endpoint, the Kubernetes version,
// the DNS domain, the pod subnet and the service subnet.
const clusterConfigTemplate = `apiServer: {}
apiVersion: kubeadm.k8s.io/v1beta4
caCertificateValidityPeriod: 87600h0m0s
certificateValidityPeriod: 8760h0m0s
certificatesDir: /etc/kubernetes/pki
clusterName: kubernetes
controlPlaneEndpoint: %s
controllerManager: {}
dns: {}
encryptionAlgorithm: RSA-2048
etcd:
  local:
    dataDir: /var/lib/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: %s
networking:
  dnsDomain: %s
  podSubnet: %s
  serviceSubnet: %s
proxy: {}
scheduler: {}
`

// kubeProxyConfigTemplate is the kube-proxy addon's config.conf (the
// fields kubeadm sets; the rest default); %s is the cluster CIDR.
const kubeProxyConfigTemplate = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: %s
configSyncPeriod: 0s
kind: KubeProxyConfiguration
mode: ""
`

// kubeProxyKubeconfigTemplate is the addon's kubeconfig.conf: the
// in-cluster token and CA files, the API server's real URL (%s).
const kubeProxyKubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: %s
  name: default
contexts:
- context:
    cluster: default
    namespace: default
    user: default
  name: default
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`

// KubeletConfiguration is the kubelet configuration InitKubeadm uploads
// as kube-system/kubelet-config, as `kubeadm init` writes it for this
// cluster.
func KubeletConfiguration() string {
	return fmt.Sprintf(kubeletConfigTemplate, ClusterDNSIP, ClusterDomain)
}

// upserter creates objects or, when they exist, updates them, and
// collects the failures.
type upserter struct{ errs []error }

// upsert is one create-or-update; T is the API type.
func upsert[T any](ctx context.Context, u *upserter, what string, obj *T,
	create func(context.Context, *T, metav1.CreateOptions) (*T, error),
	update func(context.Context, *T, metav1.UpdateOptions) (*T, error)) {
	_, err := create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		u.errs = append(u.errs, fmt.Errorf("%s: %w", what, err))
	}
}

// uploadKubeadmConfig does kubeadm init's upload-config (kubeadm,
// kubelet) and addon kube-proxy phases, minus the DaemonSet, and makes
// the kube-dns Service exist.
func (c *Cluster) uploadKubeadmConfig(ctx context.Context) error {
	c.logf("kubetest: as kubeadm init: uploading %s, %s, the kube-proxy addon's ConfigMap and RBAC, Service %s",
		KubeletConfigMap, KubeadmConfigMap, KubeDNSService)
	ver, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("kubetest: API server version: %w", err)
	}
	endpoint, err := url.Parse(c.Config.Host)
	if err != nil {
		return fmt.Errorf("kubetest: API server URL %q: %w", c.Config.Host, err)
	}
	u := &upserter{}
	cms := c.Client.CoreV1().ConfigMaps(metav1.NamespaceSystem)
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: KubeletConfigMap, Namespace: metav1.NamespaceSystem},
			Data: map[string]string{"kubelet": KubeletConfiguration()}},
		{ObjectMeta: metav1.ObjectMeta{Name: KubeadmConfigMap, Namespace: metav1.NamespaceSystem},
			Data: map[string]string{"ClusterConfiguration": fmt.Sprintf(clusterConfigTemplate,
				endpoint.Host, ver.GitVersion, ClusterDomain, KubeadmPodSubnet, ServiceSubnet)}},
		{ObjectMeta: metav1.ObjectMeta{Name: KubeProxyConfigMap, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"app": "kube-proxy"}},
			Data: map[string]string{
				"config.conf":     fmt.Sprintf(kubeProxyConfigTemplate, KubeadmPodSubnet),
				"kubeconfig.conf": fmt.Sprintf(kubeProxyKubeconfigTemplate, c.Config.Host),
			}},
	} {
		upsert(ctx, u, "ConfigMap "+cm.Name, cm, cms.Create, cms.Update)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: KubeProxyServiceAccount, Namespace: metav1.NamespaceSystem}}
	sas := c.Client.CoreV1().ServiceAccounts(metav1.NamespaceSystem)
	upsert(ctx, u, "ServiceAccount "+sa.Name, sa, sas.Create, sas.Update)
	c.uploadKubeadmRBAC(ctx, u)
	if err := c.ensureKubeDNS(ctx); err != nil {
		u.errs = append(u.errs, err)
	}
	if len(u.errs) > 0 {
		return fmt.Errorf("kubetest: kubeadm uploads: %w", errors.Join(u.errs...))
	}
	return nil
}

// uploadKubeadmRBAC is the RBAC of the uploads: who may read each
// ConfigMap, and kube-proxy's ClusterRoleBinding.
func (c *Cluster) uploadKubeadmRBAC(ctx context.Context, u *upserter) {
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	tokensAndNodes := []rbacv1.Subject{group("system:nodes"), group(KubeadmNodeTokenGroup)}
	reads := []struct {
		role, configMap string
		subjects        []rbacv1.Subject
	}{
		{"kubeadm:kubelet-config", KubeletConfigMap, tokensAndNodes},
		{"kubeadm:nodes-kubeadm-config", KubeadmConfigMap, tokensAndNodes},
		// kubeadm join reads kube-proxy's ConfigMap with the token.
		{"kube-proxy", KubeProxyConfigMap, []rbacv1.Subject{group(KubeadmNodeTokenGroup)}},
	}
	rbac := c.Client.RbacV1()
	roles, rbs := rbac.Roles(metav1.NamespaceSystem), rbac.RoleBindings(metav1.NamespaceSystem)
	for _, r := range reads {
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: r.role, Namespace: metav1.NamespaceSystem},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
				ResourceNames: []string{r.configMap}, Verbs: []string{"get"}}},
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: r.role, Namespace: metav1.NamespaceSystem},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.role},
			Subjects:   r.subjects,
		}
		upsert(ctx, u, "Role "+role.Name, role, roles.Create, roles.Update)
		upsert(ctx, u, "RoleBinding "+rb.Name, rb, rbs.Create, rbs.Update)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:node-proxier"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node-proxier"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: KubeProxyServiceAccount,
			Namespace: metav1.NamespaceSystem}},
	}
	crbs := rbac.ClusterRoleBindings()
	upsert(ctx, u, "ClusterRoleBinding "+crb.Name, crb, crbs.Create, crbs.Update)
}

// ensureKubeDNS creates kube-system/kube-dns at ClusterDNSIP, as the
// CoreDNS addon does, unless it exists (a Service's address cannot be
// updated). No DNS server answers behind it.
func (c *Cluster) ensureKubeDNS(ctx context.Context) error {
	svcs := c.Client.CoreV1().Services(metav1.NamespaceSystem)
	if _, err := svcs.Get(ctx, KubeDNSService, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubetest: service %s: %w", KubeDNSService, err)
	}
	port := func(name string, proto corev1.Protocol, p int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: proto, Port: p, TargetPort: intstr.FromInt32(p)}
	}
	labels := map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS", "kubernetes.io/cluster-service": "true"}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: KubeDNSService, Namespace: metav1.NamespaceSystem, Labels: labels},
		Spec: corev1.ServiceSpec{
			ClusterIP: ClusterDNSIP,
			Selector:  map[string]string{"k8s-app": "kube-dns"},
			Ports: []corev1.ServicePort{port("dns", corev1.ProtocolUDP, 53), port("dns-tcp", corev1.ProtocolTCP, 53),
				port("metrics", corev1.ProtocolTCP, 9153)},
		},
	}
	_, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: service %s: %w", KubeDNSService, err)
	}
	return nil
}

// apiHostPort splits the API server URL into what in-cluster clients
// take as KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
func (c *Cluster) apiHostPort() (host, port string, err error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil || u.Port() == "" {
		return "", "", fmt.Errorf("kubetest: API server URL %q has no port: %v", c.Config.Host, err)
	}
	return strings.Trim(u.Hostname(), "[]"), u.Port(), nil
}
