package kube

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/wsu-project/wsu/kube"
)

// A conflict on the owner mark is the kubelet updating its Node between
// the check and the patch (a 100-host bench join failed this way): the
// mark reads the Node again and checks it again. The conflict is
// injected (client-go's fake clientset, a stand-in): a real API server
// gives one only under a race no test can time.
func TestMarkOwnerRetriesConflict(t *testing.T) {
	unmarked := func() *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "win-1", UID: "uid-1", ResourceVersion: "1",
			Labels: map[string]string{kube.OSLabel: "windows"}}}
	}
	spec := ownerSpec{name: "win-1", owner: "wsu/host-a", adopt: true}

	t.Run("marked after a conflict", func(t *testing.T) {
		cs := fake.NewClientset(unmarked())
		patches := conflictOnce(cs)
		_, refusal, err := markOwner(context.Background(), cs.CoreV1().Nodes(), unmarked(), spec)
		require.NoError(t, err)
		assert.Empty(t, refusal)
		assert.Equal(t, 2, *patches, "the conflict is tried again")
		got, err := cs.CoreV1().Nodes().Get(context.Background(), "win-1", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "wsu/host-a", got.Annotations[OwnerAnnotation])
	})

	t.Run("checked again after a conflict", func(t *testing.T) {
		// Between the check and the patch another host marked the Node.
		other := unmarked()
		other.Annotations = map[string]string{OwnerAnnotation: "wsu/host-b"}
		cs := fake.NewClientset(other)
		patches := conflictOnce(cs)
		_, refusal, err := markOwner(context.Background(), cs.CoreV1().Nodes(), unmarked(), spec)
		require.NoError(t, err)
		assert.Contains(t, refusal, `belongs to wsu.dev/owner="wsu/host-b"`)
		assert.Equal(t, 1, *patches, "not marked once it is another's")
		got, err := cs.CoreV1().Nodes().Get(context.Background(), "win-1", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "wsu/host-b", got.Annotations[OwnerAnnotation])
	})
}

// conflictOnce makes the first Node patch fail with a conflict and counts
// the patches.
func conflictOnce(cs *fake.Clientset) *int {
	n := 0
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if n++; n == 1 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, "win-1", assert.AnError)
		}
		return false, nil, nil
	})
	return &n
}
