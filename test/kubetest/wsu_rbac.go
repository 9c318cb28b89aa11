package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/deploy/rbac"
)

// WSUBootstrapGroup is the group of wsu's own bootstrap tokens, which
// InstallWSUBootstrappers lets create CSRs but not have them auto-approved.
const WSUBootstrapGroup = "system:bootstrappers:wsu"

// InstallWSUBootstrappers installs what wsu's kubernetes overlay grants its
// bootstrap token group (deploy/rbac/kubeadm-bootstrappers, the shipped
// file): create and watch CSRs, get Nodes. A kubeadm join as wsu makes it
// needs this beside InitKubeadm. It is idempotent.
func (c *Cluster) InstallWSUBootstrappers(ctx context.Context) error {
	c.logf("kubetest: as wsu's install: the RBAC of %s", WSUBootstrapGroup)
	dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(rbac.KubeadmBootstrappers)))
	rb := c.Client.RbacV1()
	var errs []error
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("kubetest: deploy/rbac/kubeadm-bootstrappers: %w", err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return fmt.Errorf("kubetest: deploy/rbac/kubeadm-bootstrappers: %w", err)
		}
		switch meta.Kind {
		case "":
			continue
		case "ClusterRole":
			var o rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(doc, &o); err != nil {
				return fmt.Errorf("kubetest: deploy/rbac/kubeadm-bootstrappers: %w", err)
			}
			_, err = rb.ClusterRoles().Create(ctx, &o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				_, err = rb.ClusterRoles().Update(ctx, &o, metav1.UpdateOptions{})
			}
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			if err := yaml.UnmarshalStrict(doc, &o); err != nil {
				return fmt.Errorf("kubetest: deploy/rbac/kubeadm-bootstrappers: %w", err)
			}
			_, err = rb.ClusterRoleBindings().Create(ctx, &o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				_, err = rb.ClusterRoleBindings().Update(ctx, &o, metav1.UpdateOptions{})
			}
		default:
			return fmt.Errorf("kubetest: deploy/rbac/kubeadm-bootstrappers: unexpected %s", meta.Kind)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubetest: wsu bootstrap RBAC: %w", errors.Join(errs...))
	}
	return nil
}
