package controller

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
)

// TestBYOHConfigMapGoneWithItsNamespace: a BYOH ConfigMap in another
// namespace (WMCO's) that went with that namespace's deletion prunes no
// instance; one an admin deleted prunes them (their finalizers then remove
// the hosts).
func TestBYOHConfigMapGoneWithItsNamespace(t *testing.T) {
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	crdGVK := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	scheme.AddKnownTypeWithName(crdGVK, &metav1.PartialObjectMetadata{})
	crd := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: crdName}}
	crd.SetGroupVersionKind(crdGVK)
	wi := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.11", Namespace: "wsu",
		Labels: map[string]string{wsuv1.SourceLabel: wsuv1.SourceConfigMap}}}
	for _, tc := range []struct {
		name       string
		wmcoGoing  bool
		wantPruned bool
	}{
		{"WMCO's namespace being deleted", true, false},
		{"the ConfigMap deleted by hand", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wmco := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wmco"}}
			if tc.wmcoGoing {
				wmco.Finalizers = []string{"kubernetes"}
				wmco.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(crd, wmco,
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "wsu"}}, wi.DeepCopy()).Build()
			r := &ConfigMapReconciler{Client: c, Namespace: "wmco", InstanceNamespace: "wsu", Name: "windows-instances"}
			ctx := log.IntoContext(context.Background(), logr.Discard())
			_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "wmco", Name: "windows-instances"}})
			require.NoError(t, err)
			list := &wsuv1.WindowsInstanceList{}
			require.NoError(t, c.List(context.Background(), list))
			assert.Equal(t, tc.wantPruned, len(list.Items) == 0, "instances left: %d", len(list.Items))
		})
	}
}
