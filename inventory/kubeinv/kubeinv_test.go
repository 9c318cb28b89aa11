package kubeinv

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestParseRef(t *testing.T) {
	tests := []struct {
		arg, ns, name, err string
	}{
		{arg: "k8s://wmco/windows-instances", ns: "wmco", name: "windows-instances"},
		{arg: "k8s://openshift-windows-machine-config-operator/windows-instances", ns: "openshift-windows-machine-config-operator", name: "windows-instances"},
		{arg: "k8s://windows-instances", err: "does not name both a namespace and a ConfigMap"},
		{arg: "k8s:///x", err: "does not name both"},
		{arg: "k8s://ns/", err: "does not name both"},
		{arg: "k8s://ns/a/b", err: "more than two parts"},
		{arg: "k8s://Bad_NS/x", err: `invalid namespace "Bad_NS"`},
		{arg: "k8s://ns/Windows_Instances", err: `invalid ConfigMap name "Windows_Instances"`},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			ns, name, diags := ParseRef(tt.arg)
			if tt.err != "" {
				require.True(t, diags.HasErrors())
				assert.Equal(t, "Invalid inventory reference", diags[0].Summary)
				assert.Contains(t, diags[0].Detail, tt.err)
				assert.Contains(t, diags[0].Detail, "k8s://NAMESPACE/NAME")
				return
			}
			require.False(t, diags.HasErrors(), diags.Error())
			assert.Equal(t, [2]string{tt.ns, tt.name}, [2]string{ns, name})
		})
	}
	assert.True(t, IsRef("k8s://a/b"))
	assert.False(t, IsRef("inventory.ini"))
}

func testKey(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	block, err := gossh.MarshalPrivateKey(priv, "kubeinv test")
	require.NoError(t, err)
	return pem.EncodeToMemory(block)
}

// The fetch against a fake API: what becomes of each state of the
// ConfigMap and Secret. The real kube-apiserver test is in cmd/wsu.
func TestLoad(t *testing.T) {
	key, newKey := testKey(t), testKey(t)
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "wmco", Name: "windows-instances"}, Data: data}
	}
	secret := func(data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "wmco", Name: KeySecret}, Data: data}
	}
	forbidSecrets := func(c *fake.Clientset) {
		c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, KeySecret, nil)
		})
	}
	failSecrets := func(c *fake.Clientset) {
		c.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		})
	}
	good := map[string]string{"10.0.0.11": "username=Administrator"}
	tests := []struct {
		name    string
		ref     string
		objects []runtime.Object
		react   func(*fake.Clientset)
		hosts   []string
		key     bool     // ssh_private_key set
		newKey  bool     // new_private_key set
		diags   []string // "error|warning: summary: detail substring"
	}{
		{name: "ConfigMap and key", objects: []runtime.Object{cm(good), secret(map[string][]byte{KeySecretKey: key})},
			hosts: []string{"10.0.0.11"}, key: true},
		{name: "a rotation under way", objects: []runtime.Object{cm(good), secret(map[string][]byte{KeySecretKey: key, NewKeySecretKey: newKey})},
			hosts: []string{"10.0.0.11"}, key: true, newKey: true},
		{name: "new key invalid", objects: []runtime.Object{cm(good), secret(map[string][]byte{KeySecretKey: key, NewKeySecretKey: []byte("SECRETMATERIAL")})},
			hosts: []string{"10.0.0.11"},
			diags: []string{"error: Invalid SSH private key: Secret wmco/cloud-private-key, key private-key.pem.new, is not an OpenSSH or PEM private key"}},
		{name: "empty ConfigMap", objects: []runtime.Object{cm(nil), secret(map[string][]byte{KeySecretKey: key})},
			key: true},
		{name: "no Secret", objects: []runtime.Object{cm(good)}, hosts: []string{"10.0.0.11"},
			diags: []string{"warning: No SSH private key found: There is no Secret wmco/cloud-private-key, so the hosts get no ssh_private_key"}},
		{name: "Secret without the key", objects: []runtime.Object{cm(good), secret(map[string][]byte{"id_rsa": key})}, hosts: []string{"10.0.0.11"},
			diags: []string{"warning: No SSH private key found: Secret wmco/cloud-private-key has no key private-key.pem (it has: id_rsa)"}},
		{name: "Secret not readable", objects: []runtime.Object{cm(good)}, react: forbidSecrets, hosts: []string{"10.0.0.11"},
			diags: []string{"warning: No SSH private key found: wsu may not read Secret wmco/cloud-private-key"}},
		{name: "Secret read fails", objects: []runtime.Object{cm(good)}, react: failSecrets, hosts: []string{"10.0.0.11"},
			diags: []string{"error: Cannot read the SSH private key: Reading Secret wmco/cloud-private-key: etcd is down"}},
		{name: "not a key", objects: []runtime.Object{cm(good), secret(map[string][]byte{KeySecretKey: []byte("SECRETMATERIAL")})}, hosts: []string{"10.0.0.11"},
			diags: []string{"error: Invalid SSH private key: Secret wmco/cloud-private-key, key private-key.pem, is not an OpenSSH or PEM private key"}},
		{name: "bad entry", objects: []runtime.Object{cm(map[string]string{"10.0.0.11": "username=a", "fe80--x": "username=b", "b": "user=x"}), secret(map[string][]byte{KeySecretKey: key})},
			hosts: []string{"10.0.0.11", "fe80--x"}, key: true,
			diags: []string{`error: Invalid windows-instances entry: Entry "b": the value must be exactly username=<user>`}},
		{name: "binaryData", objects: []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "wmco", Name: "windows-instances"},
			Data: good, BinaryData: map[string][]byte{"10.0.0.12": []byte("username=x")}}, secret(map[string][]byte{KeySecretKey: key})},
			hosts: []string{"10.0.0.11"}, key: true,
			diags: []string{"warning: binaryData entries ignored: ConfigMap wmco/windows-instances has binaryData entries (10.0.0.12)"}},
		{name: "missing ConfigMap, with a suggestion", ref: "k8s://wmco/windows-instance", objects: []runtime.Object{cm(good)},
			diags: []string{`error: Inventory ConfigMap not found: There is no ConfigMap "windows-instance" in namespace "wmco". Did you mean "windows-instances" (k8s://wmco/windows-instances)?`}},
		{name: "missing ConfigMap, nothing close", ref: "k8s://wmco/hosts", objects: []runtime.Object{cm(good)},
			diags: []string{`error: Inventory ConfigMap not found: There is no ConfigMap "hosts" in namespace "wmco".`}},
		{name: "bad reference", ref: "k8s://x",
			diags: []string{`error: Invalid inventory reference: "k8s://x" does not name both`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(tt.objects...)
			if tt.react != nil {
				tt.react(client)
			}
			ref := tt.ref
			if ref == "" {
				ref = "k8s://wmco/windows-instances"
			}
			inv, text, diags := Load(context.Background(), client, ref)
			var got []string
			for _, d := range diags {
				sev := "error"
				if d.Severity == hcl.DiagWarning {
					sev = "warning"
				}
				got = append(got, sev+": "+d.Summary+": "+d.Detail)
				assert.NotContains(t, d.Detail, "SECRETMATERIAL", "the key is never quoted")
			}
			require.Len(t, got, len(tt.diags), strings.Join(got, "\n"))
			for i, want := range tt.diags {
				assert.Contains(t, got[i], want)
			}
			if inv == nil {
				assert.Nil(t, tt.hosts, "no inventory")
				return
			}
			assert.Equal(t, tt.hosts, inv.Order)
			assert.Equal(t, inv.Source, ref)
			assert.Equal(t, len(tt.hosts) > 0, len(text) > 0, "one line per entry")
			assert.NotContains(t, string(text), "PRIVATE KEY", "the key is not in the text")
			v, ok := inv.HostVars("10.0.0.11")[KeyVar]
			if hosts := inv.Groups["windows"].Vars; !tt.key {
				assert.NotContains(t, hosts, KeyVar)
				return
			}
			if len(tt.hosts) == 0 {
				v, ok = inv.Groups["windows"].Vars[KeyVar]
			}
			require.True(t, ok)
			assert.True(t, v.Value.HasMark("sensitive"), "the key is marked sensitive")
			raw, _ := v.Value.Unmark()
			assert.True(t, raw.RawEquals(cty.StringVal(string(key))))
			newV, hasNew := inv.Groups["windows"].Vars[NewKeyVar]
			require.Equal(t, tt.newKey, hasNew, "new_private_key set")
			if hasNew {
				assert.True(t, newV.Value.HasMark("sensitive"), "the new key is marked sensitive")
				raw, _ := newV.Value.Unmark()
				assert.True(t, raw.RawEquals(cty.StringVal(string(newKey))))
			}
		})
	}
}
