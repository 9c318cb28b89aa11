package kubetest

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// SetNodeAddresses sets a Node's status.addresses, as its kubelet reports
// them on registration and in each status update.
func (c *Cluster) SetNodeAddresses(ctx context.Context, name string, addrs ...corev1.NodeAddress) error {
	c.logf("kubetest: as the kubelet: node %s addresses %v", name, addrs)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status.Addresses = addrs
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubetest: setting node %s addresses: %w", name, err)
	}
	return nil
}
