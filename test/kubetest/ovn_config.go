package kubetest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Where OVN-Kubernetes' manifests and Helm chart keep ovnkube's
// configuration. A join with network ovn-hybrid on a vanilla cluster reads
// it to know the hybrid overlay is on (k8s_windows_network).
const (
	OVNNamespace     = "ovn-kubernetes"
	OVNConfigMapName = "ovnkube-config"
)

// publishOVNConfig leaves what an OVN-Kubernetes install with the hybrid
// overlay leaves for others to read: the ovnkube-config ConfigMap whose
// ovnkube.conf enables [hybridoverlay] on the hybrid cluster network. The
// OVN master stand-in publishes it as it starts, as the real one's
// manifests come with it.
func (c *Cluster) publishOVNConfig(ctx context.Context, clusterCIDR string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OVNNamespace}}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: namespace %s: %w", OVNNamespace, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: OVNConfigMapName, Namespace: OVNNamespace},
		Data:       map[string]string{"ovnkube.conf": fmt.Sprintf("[default]\nmtu=1400\n\n[hybridoverlay]\nenabled=true\ncluster-subnets=%s\n", clusterCIDR)},
	}
	cms := c.Client.CoreV1().ConfigMaps(OVNNamespace)
	_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubetest: publishing %s/%s: %w", OVNNamespace, OVNConfigMapName, err)
	}
	return nil
}
