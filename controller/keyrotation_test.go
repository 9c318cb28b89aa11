package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/setup"
)

// TestRotatedReasonStays: a rotation's KeyRotated reason is kept while the
// host uses the Secret's .new key, and gives way to KeyInUse once the admin
// made that key the Secret's key (or for any other key).
func TestRotatedReasonStays(t *testing.T) {
	during := instanceKeys{current: "OLD", currentFP: "SHA256:old", next: "NEW", nextFP: "SHA256:new"}
	swapped := instanceKeys{current: "NEW", currentFP: "SHA256:new"}
	withCondition := func(fp, reason string) *wsuv1.WindowsInstance {
		wi := &wsuv1.WindowsInstance{}
		wi.Status.Identity.KeyFingerprint = fp
		wi.Status.Conditions = []metav1.Condition{{Type: wsuv1.ConditionKeyRotated, Status: metav1.ConditionTrue, Reason: reason}}
		return wi
	}
	assert.True(t, rotatedToNext(withCondition("SHA256:new", ReasonKeyRotated), during), "rotated, .new still there")
	assert.False(t, rotatedToNext(withCondition("SHA256:new", ReasonKeyRotated), swapped), "keys swapped by the admin")
	assert.False(t, rotatedToNext(withCondition("SHA256:old", ReasonKeyRotated), during), "not on the new key")
	assert.False(t, rotatedToNext(withCondition("SHA256:new", ReasonKeyInUse), during), "never rotated here")
	assert.False(t, rotatedToNext(&wsuv1.WindowsInstance{}, during), "no condition")
}

// TestKeyInUse: which key of the Secret an instance logs in with, and
// whether a rotation waits for it, from the fingerprint its status records.
func TestKeyInUse(t *testing.T) {
	k := instanceKeys{current: "OLD", currentFP: "SHA256:old", next: "NEW", nextFP: "SHA256:new"}
	tests := []struct {
		name     string
		keys     instanceKeys
		recorded string
		use      string
		pending  bool
	}{
		{"not rotated yet", k, "SHA256:old", "OLD", true},
		{"first run during a rotation", k, "", "OLD", true},
		{"rotated, keys not swapped yet", k, "SHA256:new", "NEW", false},
		{"no rotation", instanceKeys{current: "OLD", currentFP: "SHA256:old"}, "SHA256:old", "OLD", false},
		{"keys swapped by the admin", instanceKeys{current: "NEW", currentFP: "SHA256:new"}, "SHA256:new", "NEW", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.use, tt.keys.inUse(tt.recorded))
			assert.Equal(t, tt.pending, tt.keys.pending(tt.recorded))
		})
	}
}

// TestRotationVars: a rotation passes on only the -var values rotate-key
// declares; the join's settings would be refused as undeclared.
func TestRotationVars(t *testing.T) {
	got, fromSecrets, err := onlyDeclared(rotateKeyPlaybook,
		[]string{"cluster_flavour=openshift", "proxy=secret", `authorized_keys_file=C:\keys`, "old_public_key=ssh-ed25519 AAAA", "node_name=win-01"},
		map[int]run.SecretItem{1: {Secret: "proxy", Key: "proxy"}, 3: {Secret: "keys", Key: "old_public_key"}})
	require.NoError(t, err)
	assert.Equal(t, []string{`authorized_keys_file=C:\keys`, "old_public_key=ssh-ed25519 AAAA"}, got)
	assert.Equal(t, map[int]run.SecretItem{1: {Secret: "keys", Key: "old_public_key"}}, fromSecrets, "the Secret a kept value came from follows it")
}

// TestSecretToInstances: a Secret's change wakes exactly the instances
// whose key is in it (the default cloud-private-key, or their
// keySecretRef), in its namespace.
func TestSecretToInstances(t *testing.T) {
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	wi := func(ns, name, secret string) *wsuv1.WindowsInstance {
		w := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if secret != "" {
			w.Spec.KeySecretRef = &wsuv1.SecretKeyRef{Name: secret, Key: "key"}
		}
		return w
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithIndex(&wsuv1.WindowsInstance{}, keySecretIndex, indexKeySecret("")).
		WithObjects(wi("ns", "default-key", ""), wi("ns", "own-key", "site-key"), wi("other", "elsewhere", "")).Build()
	h := secretToInstances(c)
	assert.Equal(t, []string{"ns/default-key"}, wake(t, h, "ns", "cloud-private-key"))
	assert.Equal(t, []string{"ns/own-key"}, wake(t, h, "ns", "site-key"))
	assert.Empty(t, wake(t, h, "ns", "unrelated"))
	assert.Empty(t, wake(t, h, "other", "site-key"), "a Secret of that name elsewhere")

	// With the BYOH namespace another (WMCO's, on OpenShift), the default
	// key Secret is the one there; a keySecretRef stays in the instance's.
	c = fake.NewClientBuilder().WithScheme(scheme).WithIndex(&wsuv1.WindowsInstance{}, keySecretIndex, indexKeySecret("wmco")).
		WithObjects(wi("ns", "default-key", ""), wi("ns", "own-key", "site-key")).Build()
	h = secretToInstances(c)
	assert.Equal(t, []string{"ns/default-key"}, wake(t, h, "wmco", "cloud-private-key"))
	assert.Empty(t, wake(t, h, "ns", "cloud-private-key"), "not the instance namespace's")
	assert.Equal(t, []string{"ns/own-key"}, wake(t, h, "ns", "site-key"))
	assert.Empty(t, wake(t, h, "wmco", "site-key"))
}

// wake is what the handler enqueues for a change of Secret ns/name.
func wake(t *testing.T, h handler.EventHandler, ns, name string) []string {
	t.Helper()
	q := &fakeQueue{}
	sec := secretMetadata()
	sec.SetNamespace(ns)
	sec.SetName(name)
	h.Update(context.Background(), event.TypedUpdateEvent[client.Object]{ObjectOld: sec, ObjectNew: sec}, q)
	return q.names
}

// fakeQueue records what a handler adds.
type fakeQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	names []string
}

func (q *fakeQueue) Add(r reconcile.Request) { q.names = append(q.names, r.String()) }

// TestSetLoginKey: the run's key is swapped in its inventory and its
// Secret reference, and can be put back.
func TestSetLoginKey(t *testing.T) {
	inv, diags := inventory.ParseWindowsInstances("test", map[string]string{"10.1.42.1": "username=Administrator"})
	require.False(t, diags.HasErrors())
	h := inv.Hosts["10.1.42.1"]
	h.Vars[kubeinv.KeyVar] = inventory.Var{Value: cty.StringVal("OLD").Mark(engine.Sensitive)}
	rr := &run.Request{Request: setup.Request{Inventory: inv}, Secrets: run.Secrets{Key: run.SecretItem{Secret: "keys", Key: "k"}}}
	was := setLoginKey(rr, "NEW", run.SecretItem{Secret: "keys", Key: "k.new"})
	v, _ := h.Vars[kubeinv.KeyVar].Value.Unmark()
	assert.Equal(t, "NEW", v.AsString())
	assert.True(t, h.Vars[kubeinv.KeyVar].Value.HasMark(engine.Sensitive), "the key stays sensitive")
	assert.Equal(t, run.SecretItem{Secret: "keys", Key: "k.new"}, rr.Secrets.Key)
	setLoginKey(rr, was.key, was.item)
	v, _ = h.Vars[kubeinv.KeyVar].Value.Unmark()
	assert.Equal(t, "OLD", v.AsString())
	assert.Equal(t, run.SecretItem{Secret: "keys", Key: "k"}, rr.Secrets.Key)
}
