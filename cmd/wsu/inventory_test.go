package main

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/wsu-project/wsu/test/kubetest"
)

// TestHCLInventory: an HCL inventory through the CLI, its variables as a
// playbook sees them, and a bad one's located errors.
func TestHCLInventory(t *testing.T) {
	code, out, errs := wsu(t, nil, "plan", "--no-color", "testdata/inventory/vars.hcl", "-i", "testdata/inventory/inventory.hcl")
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, `win01: {"ansible_host":"10.0.0.11","ansible_user":"Administrator","connection":"ssh","max_pods":110,"ntp_server":"pool.ntp.org"} groups=all,cluster,windows`)
	assert.Contains(t, out, `win03.example.com: {"ansible_user":"Administrator","connection":"ssh","ntp_server":"pool.ntp.org"} groups=all,cluster,windows`)

	code, out, errs = wsu(t, nil, "plan", "--no-color", "testdata/inventory/vars.hcl", "-i", "testdata/inventory/bad.hcl")
	assert.Equal(t, 1, code, out)
	golden(t, "testdata/inventory/bad.hcl.stderr", errs)
}

// TestHostVar: --host-var sets an inventory variable on every host, over
// the inventory's own; a malformed one or a secret is refused before any
// host is touched.
func TestHostVar(t *testing.T) {
	code, out, errs := wsu(t, nil, "plan", "--no-color", "testdata/inventory/vars.hcl", "-i", "testdata/inventory/inventory.hcl",
		"--host-var", "ansible_port=2222", "--host-var", "ntp_server=ntp.example.com")
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, `win01: {"ansible_host":"10.0.0.11","ansible_port":"2222","ansible_user":"Administrator","connection":"ssh","max_pods":110,"ntp_server":"ntp.example.com"} groups=all,cluster,windows`)
	assert.Contains(t, out, `win03.example.com: {"ansible_port":"2222","ansible_user":"Administrator","connection":"ssh","ntp_server":"ntp.example.com"} groups=all,cluster,windows`)

	for arg, want := range map[string]string{
		"ansible_port":       `want NAME=VALUE`,
		"2port=1":            `"2port" is not a variable name`,
		"ansible_password=x": `"ansible_password" names a secret`,
	} {
		code, out, errs := wsu(t, nil, "plan", "--no-color", "testdata/inventory/vars.hcl", "-i", "testdata/inventory/inventory.hcl", "--host-var", arg)
		assert.Equal(t, 1, code, arg)
		assert.Contains(t, out+errs, want, arg)
		assert.NotContains(t, out, "groups=", "%s: no host was run", arg)
	}
}

// TestKubeInventory loads -i k8s://NAMESPACE/NAME from a real kube-apiserver
// through the CLI: the BYOH windows-instances ConfigMap and the
// cloud-private-key Secret.
func TestKubeInventory(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	const ns = "openshift-windows-machine-config-operator"
	ref := "k8s://" + ns + "/windows-instances"
	kubeconfig := c.Kubeconfig
	t.Setenv("KUBECONFIG", "") // only --kubeconfig, or the KUBECONFIG a case sets, names the cluster

	require.NoError(t, c.EnsureNamespace(ctx, ns))
	cm := configMapFixture(t, "../../inventory/testdata/windows-instances.yaml")
	_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	key := newPrivateKey(t)
	_, err = c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "cloud-private-key"},
		Data:       map[string][]byte{"private-key.pem": key},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.CreateNode(ctx, "byoh-node", nil)
	require.NoError(t, err)
	require.NoError(t, c.SetNodeReady(ctx, "byoh-node"))
	// A line of the key's base64 body: none of it may ever be printed.
	keyLine := strings.Split(string(key), "\n")[1]

	pb := "testdata/inventory/byoh.hcl"
	noKey := func(t *testing.T, outputs ...string) {
		t.Helper()
		for _, o := range outputs {
			assert.NotContains(t, o, keyLine, "the private key leaked")
			assert.NotContains(t, o, "PRIVATE KEY")
		}
	}

	t.Run("hosts and vars, key sensitive", func(t *testing.T) {
		code, out, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", ref, "--kubeconfig", kubeconfig)
		require.Equal(t, 0, code, out+errs)
		assert.Empty(t, errs)
		assert.Contains(t, out, `PLAY "byoh" (3 hosts)`)
		for _, want := range []string{
			`[10.0.0.11] task "vars": host=10.0.0.11 user=Administrator connection=ssh groups=all,windows`,
			`[10.0.0.12] task "vars": host=10.0.0.12 user=Administrator connection=ssh groups=all,windows`,
			`[win03.example.com] task "vars": host=win03.example.com user=CORP\wsu-admin connection=ssh groups=all,windows`,
			`[10.0.0.11] task "key": (sensitive)`,
		} {
			assert.Contains(t, out, want)
		}
		assert.Contains(t, out, "No changes.", "k8s_node_wait read the Ready node through --kubeconfig")
		noKey(t, out, errs)

		code, out, errs = wsu(t, nil, "plan", "--output", "json", pb, "-i", ref, "-kubeconfig="+kubeconfig)
		require.Equal(t, 0, code, out+errs)
		assert.Contains(t, out, `"hosts":["10.0.0.11","10.0.0.12","win03.example.com"]`)
		noKey(t, out, errs)
	})

	t.Run("KUBECONFIG is honoured", func(t *testing.T) {
		code, _, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", ref)
		assert.Equal(t, 1, code, "without a kubeconfig there is no cluster")
		assert.Contains(t, errs, "Cannot connect to the cluster")
		t.Setenv("KUBECONFIG", kubeconfig)
		code, out, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", ref)
		require.Equal(t, 0, code, out+errs)
		assert.Contains(t, out, `PLAY "byoh" (3 hosts)`)
	})

	t.Run("saved plan goes stale when the ConfigMap changes", func(t *testing.T) {
		planFile := filepath.Join(t.TempDir(), "byoh.plan")
		code, out, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", ref, "--kubeconfig", kubeconfig, "-out", planFile)
		require.Equal(t, 0, code, out+errs)
		saved, err := os.ReadFile(planFile)
		require.NoError(t, err)
		noKey(t, string(saved))

		cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "windows-instances", metav1.GetOptions{})
		require.NoError(t, err)
		cm.Data["10.0.0.13"] = "username=Administrator"
		_, err = c.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			delete(cm.Data, "10.0.0.13")
			cm.ResourceVersion = ""
			_, _ = c.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		})

		// The plan carries its --kubeconfig: apply reads the same cluster.
		code, out, errs = wsu(t, nil, "apply", "--no-color", planFile)
		assert.Equal(t, 1, code)
		assert.Contains(t, out+errs, "Saved plan is stale")
		assert.Contains(t, out+errs, "file inventory:"+ref+" changed")
	})

	// The other cases each get a namespace of their own.
	setup := func(t *testing.T, ns string, data map[string]string, withKey bool) string {
		t.Helper()
		require.NoError(t, c.EnsureNamespace(ctx, ns))
		_, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "windows-instances"}, Data: data,
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		if withKey {
			_, err = c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "cloud-private-key"},
				Data:       map[string][]byte{"private-key.pem": key},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		return "k8s://" + ns + "/windows-instances"
	}

	t.Run("bad entry is a located error", func(t *testing.T) {
		ref := setup(t, "bad-entry", map[string]string{
			"10.0.0.11":  "username=Administrator",
			"10.0.0.300": "username=Administrator",
			"10.0.0.12":  "user=Administrator",
		}, true)
		code, out, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", ref, "--kubeconfig", kubeconfig)
		assert.Equal(t, 1, code, out)
		golden(t, "testdata/inventory/bad-entry.stderr", errs)
		noKey(t, out, errs)
	})

	t.Run("missing Secret is a warning; the hosts still load", func(t *testing.T) {
		ref := setup(t, "no-key", map[string]string{"10.0.0.21": "username=Administrator"}, false)
		code, out, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", ref, "--kubeconfig", kubeconfig)
		require.Equal(t, 0, code, out+errs)
		assert.Contains(t, errs, "Warning: No SSH private key found")
		assert.Contains(t, flat(errs), `There is no Secret no-key/cloud-private-key, so the hosts get no ssh_private_key`)
		assert.Contains(t, out, `[10.0.0.21] task "vars": host=10.0.0.21 user=Administrator`)
		assert.Contains(t, out, `[10.0.0.21] task "key": key=none`, "no ssh_private_key variable at all")
	})

	t.Run("empty ConfigMap is no hosts", func(t *testing.T) {
		ref := setup(t, "empty", map[string]string{}, true)
		code, out, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", ref, "--kubeconfig", kubeconfig)
		require.Equal(t, 0, code, out+errs)
		assert.Contains(t, out, `PLAY "byoh" (0 hosts)`)
		assert.Empty(t, errs)
	})

	t.Run("missing ConfigMap is an error with a suggestion", func(t *testing.T) {
		code, out, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", "k8s://"+ns+"/windows-instance", "--kubeconfig", kubeconfig)
		assert.Equal(t, 1, code, out)
		assert.Contains(t, errs, "Inventory ConfigMap not found")
		assert.Contains(t, flat(errs), `Did you mean "windows-instances" (k8s://`+ns+`/windows-instances)?`)
		assert.Contains(t, flat(errs), "Cluster: kubeconfig "+kubeconfig)
	})

	t.Run("malformed reference", func(t *testing.T) {
		code, _, errs := wsu(t, nil, "plan", "--no-color", pb, "-i", "k8s://windows-instances")
		assert.Equal(t, 1, code)
		assert.Contains(t, errs, "Invalid inventory reference")
		assert.Contains(t, errs, "k8s://NAMESPACE/NAME")
	})
}

// flat undoes the wrapping of diagnostic text.
func flat(s string) string { return strings.Join(strings.Fields(s), " ") }

// configMapFixture decodes a ConfigMap manifest.
func configMapFixture(t *testing.T, path string) *corev1.ConfigMap {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(src, nil, nil)
	require.NoError(t, err)
	cm, ok := obj.(*corev1.ConfigMap)
	require.True(t, ok, "%s is not a ConfigMap", path)
	cm.Namespace = ""
	return cm
}

// newPrivateKey is an unencrypted OpenSSH ed25519 private key.
func newPrivateKey(t *testing.T) []byte {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	block, err := gossh.MarshalPrivateKey(priv, "byoh test")
	require.NoError(t, err)
	return pem.EncodeToMemory(block)
}

// TestSeveralInventories: several -i merge in order as Ansible's do (a
// later source's host and group vars win, groups merge), an inline list
// expands ranges, and a range it cannot expand is refused before any host
// is touched.
func TestSeveralInventories(t *testing.T) {
	site := writeFile(t, t.TempDir(), "site.ini", "[windows]\nwin01 max_pods=120\n\n[all:vars]\nntp_server=ntp.example.com\n")
	code, out, errs := wsu(t, nil, "plan", "--no-color", "testdata/inventory/vars.hcl", "-i", "testdata/inventory/inventory.hcl", "-i", site, "-i", "lin[1:2],")
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, `win01: {"ansible_host":"10.0.0.11","ansible_user":"Administrator","connection":"ssh","max_pods":"120","ntp_server":"ntp.example.com"} groups=all,cluster,windows`)
	assert.Contains(t, out, `win03.example.com: {"ansible_user":"Administrator","connection":"ssh","ntp_server":"ntp.example.com"} groups=all,cluster,windows`)
	assert.Contains(t, out, `lin1: {"ntp_server":"ntp.example.com"} groups=all,ungrouped`)
	assert.Contains(t, out, `lin2: {"ntp_server":"ntp.example.com"} groups=all,ungrouped`)
	assert.Contains(t, out, "PLAY \"vars\" (5 hosts)")

	code, out, errs = wsu(t, nil, "plan", "--no-color", "testdata/inventory/vars.hcl", "-i", "win[1:x],")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, flat(errs), `In the inline host list -i "win[1:x],", entry "win[1:x]":`)
	assert.NotContains(t, out, "groups=", "no host was run")
}

// TestHostVarLocal: with --local and no -i, --host-var is checked as over
// an inventory (a secret refused, before any host, with no plan saved),
// and `wsu show` lists the --host-var options a saved plan applies, the
// value of a secret-named one (in an edited plan) hidden.
func TestHostVarLocal(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	require.NoError(t, os.WriteFile("book.hcl", []byte(`
play "p" {
  hosts = "all"
  task "t" {
    print { msg = "port ${host.vars.ansible_port}" }
  }
}
`), 0o644))
	code, out, errs := wsu(t, nil, "plan", "book.hcl", "--local", "--host-var", "ansible_password=Hunter2-secret", "-out", "pw.plan")
	assert.Equal(t, 1, code, out+errs)
	assert.Contains(t, out+errs, `"ansible_password" names a secret`)
	assert.NotContains(t, out+errs, "Hunter2-secret")
	assert.NoFileExists(t, "pw.plan")

	code, out, errs = wsu(t, nil, "plan", "book.hcl", "--local", "--host-var", "ansible_port=2222", "--host-var", "ansible_host=10.0.0.99", "-out", "ok.plan")
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "port 2222", "the --host-var is set on --local's host")
	code, out, errs = wsu(t, nil, "show", "ok.plan")
	require.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "host vars:  ansible_port=2222 ansible_host=10.0.0.99")

	data, err := os.ReadFile("ok.plan")
	require.NoError(t, err)
	edited := strings.Replace(string(data), `"ansible_host=10.0.0.99"`, `"ansible_host=10.0.0.99", "ansible_password=Hunter2-secret"`, 1)
	require.NoError(t, os.WriteFile("edited.plan", []byte(edited), 0o600))
	// A secret can only reach a plan by editing it, and an edited plan is
	// refused (its checksum), without quoting what was added.
	code, out, errs = wsu(t, nil, "show", "edited.plan")
	assert.Equal(t, 1, code, out+errs)
	assert.Contains(t, out+errs, "was changed after wsu saved it")
	assert.NotContains(t, out+errs, "Hunter2-secret")
}
