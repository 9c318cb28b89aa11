package controller

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/payload"
)

func TestMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		total int
		want  int
	}{
		{"1", 10, 1},
		{"3", 2, 3},
		{"25%", 8, 2},
		{"25%", 7, 1}, // rounds down
		{"10%", 3, 1}, // at least one
		{"0", 5, 1},
		{"100%", 4, 4},
	} {
		v, err := ParseMaxUnavailable(tc.flag)
		require.NoError(t, err, tc.flag)
		got, err := scaledMaxUnavailable(v, tc.total)
		require.NoError(t, err, tc.flag)
		assert.Equal(t, tc.want, got, "%s of %d", tc.flag, tc.total)
	}
	for _, bad := range []string{"abc", "-1", "5%%", "x%"} {
		_, err := ParseMaxUnavailable(bad)
		assert.Error(t, err, bad)
	}
	o := Options{StateDir: t.TempDir(), MaxUnavailable: intstr.FromString("half")}
	o.defaults()
	assert.Error(t, o.check(), "Setup refuses a max unavailable that is neither a number nor a percentage")
}

// TestRolloutSlots: the rollout limit counts the instances whose recorded
// Node carries the out-of-service mark (whoever set it) and the slots
// taken in this process; an instance whose Node is marked holds its slot;
// a mark on a Node whose instance is gone is neither counted nor kept.
func TestRolloutSlots(t *testing.T) {
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	inst := func(name string) *wsuv1.WindowsInstance {
		wi := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		wi.Status.NodeName, wi.Status.NodeUID = "node-"+name, "uid-"+name
		return wi
	}
	node := func(name, owner, mark string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, UID: types.UID("uid-" + name),
			Annotations: map[string]string{kube.OwnerAnnotation: kube.InstanceOwner("ns", owner)}}}
		if mark != "" {
			n.Labels = map[string]string{UnavailableLabel: mark}
		}
		return n
	}
	a, b, c := inst("a"), inst("b"), inst("c")
	objs := []client.Object{a, b, c, node("a", "a", unavailableUpgrade), node("b", "b", ""), node("c", "c", ""),
		node("ghost", "ghost", unavailableUpgrade), node("other", "x", unavailableRemove)}
	objs[len(objs)-1].SetAnnotations(map[string]string{kube.OwnerAnnotation: kube.InstanceOwner("elsewhere", "x")})
	cl := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&wsuv1.WindowsInstance{}).WithObjects(objs...).Build()
	r := &InstanceReconciler{Client: cl, Options: Options{MaxUnavailable: intstr.FromInt32(1)}, rollouts: newRolloutLimit()}
	ctx := context.Background()
	take := func(wi *wsuv1.WindowsInstance) bool {
		ok, err := r.takeSlot(ctx, wi)
		require.NoError(t, err)
		return ok
	}
	markOf := func(name string) string {
		n := &corev1.Node{}
		require.NoError(t, cl.Get(ctx, client.ObjectKey{Name: "node-" + name}, n))
		return n.Labels[UnavailableLabel]
	}

	assert.False(t, take(b), "a's Node is marked (by a previous leader): b waits")
	assert.Empty(t, markOf("ghost"), "the mark of an instance that is gone is cleared")
	assert.Equal(t, unavailableRemove, markOf("other"), "another namespace's mark is left alone")
	assert.True(t, take(a), "a holds its slot: it resumes")
	r.rollouts.release(a)
	assert.False(t, take(b), "released in memory, a's Node is still out of service")

	require.NoError(t, r.markNode(ctx, a, ""))
	assert.True(t, take(b), "a is back")
	assert.False(t, take(c), "b holds the slot in this process, before any mark")
	require.NoError(t, r.markNode(ctx, b, unavailableUpgrade))
	r.rollouts.release(b)
	assert.False(t, take(c), "b's Node is marked")
	assert.True(t, take(b))

	r.Options.MaxUnavailable = intstr.FromString("100%")
	assert.True(t, take(c), "a larger limit has room")
}

func TestControllerPayloadDir(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "a.wsuvars")
	second := filepath.Join(dir, "b.wsuvars")
	none := filepath.Join(dir, "c.wsuvars")
	bad := filepath.Join(dir, "d.wsuvars")
	write(t, first, "payload_dir = \"/srv/one\"\ncluster_flavour = \"kubeadm\"\n")
	write(t, second, "payload_dir = \"/srv/two\"\n")
	write(t, none, "cluster_flavour = \"openshift\"\n")
	write(t, bad, "payload_dir = 42\n")

	got, err := controllerPayloadDir([]string{first, second, none}, nil)
	require.NoError(t, err)
	assert.Equal(t, "/srv/two", got, "the last var file that sets it")
	got, err = controllerPayloadDir([]string{first}, []string{"payload_dir=/srv/cli", "node_name=x"})
	require.NoError(t, err)
	assert.Equal(t, "/srv/cli", got, "a -var wins over var files")
	got, err = controllerPayloadDir([]string{none}, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = controllerPayloadDir([]string{bad}, nil)
	assert.ErrorContains(t, err, "not a string")
	_, err = controllerPayloadDir([]string{filepath.Join(dir, "missing")}, nil)
	assert.Error(t, err)
}

func TestPayloadVersions(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	writeManifest(t, dir, "4.18.0")
	writeManifest(t, other, "4.17.2")
	p := &payloadVersions{dir: dir, cache: map[string]manifestStamp{}}
	wi := &wsuv1.WindowsInstance{}
	v, err := p.want(wi)
	require.NoError(t, err)
	assert.Equal(t, "4.18.0", v)

	writeManifest(t, dir, "4.18.10") // a new payload in place
	v, err = p.want(wi)
	require.NoError(t, err)
	assert.Equal(t, "4.18.10", v, "a changed manifest is read again")

	wi.Spec.Vars = map[string]string{"payload_dir": `"` + other + `"`}
	v, err = p.want(wi)
	require.NoError(t, err)
	assert.Equal(t, "4.17.2", v, "the instance's own payload_dir")

	none := &payloadVersions{cache: map[string]manifestStamp{}}
	v, err = none.want(&wsuv1.WindowsInstance{})
	require.NoError(t, err)
	assert.Empty(t, v, "no payload_dir: no version, no upgrades")

	require.NoError(t, os.Remove(filepath.Join(other, payload.ManifestFile)))
	_, err = p.want(wi)
	assert.Error(t, err)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

func writeManifest(t *testing.T, dir, version string) {
	t.Helper()
	m := payload.Manifest{Version: version, Components: []payload.Component{{
		Name: "kubelet", File: "kubelet.exe", Version: "v1.31.0", SHA256: strings.Repeat("ab", 32), Destination: `C:\k\kubelet.exe`,
	}}}
	data, err := json.Marshal(m)
	require.NoError(t, err)
	write(t, filepath.Join(dir, payload.ManifestFile), string(data))
}
