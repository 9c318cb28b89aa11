package run

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	corev1 "k8s.io/api/core/v1"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/setup"
)

// TestJobRequestRoundTrip: what a Job's pod rebuilds (setup.DecodeRequest
// and Unpack, as run-job does) is the run the controller asked for:
// inventory (values, types, groups), vars, var files and a site playbook
// by content, known_hosts, the plan salt and hash, the confinement; the
// secrets — the key, a rotation's new key, a varsFrom Secret's values —
// travel apart, as items of Secret volumes the Job mounts, never in the
// request (which is part of the Job's spec).
func TestJobRequestRoundTrip(t *testing.T) {
	state := t.TempDir()
	kh := filepath.Join(state, "known_hosts")
	require.NoError(t, os.WriteFile(kh, []byte("[127.0.0.1]:2222 ssh-ed25519 AAAA\n"), 0o600))
	site := filepath.Join(state, "playbook")
	require.NoError(t, os.MkdirAll(site, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(site, "playbook.hcl"), []byte("# site\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(site, "kubelet.tmpl"), []byte("tmpl"), 0o600))
	varFile := filepath.Join(state, "cluster.wsuvars")
	require.NoError(t, os.WriteFile(varFile, []byte(`payload_dir = "/payload"`), 0o600))

	inv, diags := inventory.ParseWindowsInstances("windowsinstance/ns/win-01", map[string]string{"win-01": "username=Administrator"})
	require.False(t, diags.HasErrors(), "%v", diags)
	h := inv.Hosts["win-01"]
	h.Vars[kubeinv.KeyVar] = inventory.Var{Value: cty.StringVal("PRIVATE KEY").Mark(engine.Sensitive)}
	h.Vars[kubeinv.NewKeyVar] = inventory.Var{Value: cty.StringVal("NEW PRIVATE KEY").Mark(engine.Sensitive)}
	h.Vars[knownHostsVar] = inventory.Var{Value: cty.StringVal(kh)}
	h.Vars["ansible_port"] = inventory.Var{Value: cty.StringVal("2222")}
	req := Request{Instance: "ns/win-01",
		Request: setup.Request{Mode: engine.ModeApply, Inventory: inv, ExpectHash: "abc", ReadDirs: []string{"/payload"},
			Inputs: planfile.Inputs{Playbook: filepath.Join(site, "playbook.hcl"), VarFiles: []string{varFile}, Kubeconfig: filepath.Join(state, "kubeconfig"),
				Vars: []string{"node_name=win-01", "proxy_password=hunter2", "cluster_flavour=kubeadm"}}},
		Secrets: Secrets{Key: SecretItem{"cloud-private-key", "private-key.pem"}, NewKey: SecretItem{"cloud-private-key", "private-key.pem.new"},
			Vars: map[int]SecretItem{1: {"proxy", "proxy_password"}}}}

	sr, data, mounts, err := jobRequestOf(req)
	require.NoError(t, err)
	for _, secret := range []string{"PRIVATE KEY", "hunter2"} {
		assert.NotContains(t, string(data), secret, "secrets are mounted from their Secrets, never copied")
	}
	assert.Contains(t, string(data), `"apiVersion":"`+setup.RequestVersion+`"`)
	require.Len(t, mounts.volumes, 2, "one volume per Secret")
	assert.Equal(t, "cloud-private-key", mounts.volumes[0].Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "private-key.pem", Path: jobKeyFile}, {Key: "private-key.pem.new", Path: jobNewKeyFile}}, mounts.volumes[0].Secret.Items)
	assert.Equal(t, "proxy", mounts.volumes[1].Secret.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "proxy_password", Path: "var-1"}}, mounts.volumes[1].Secret.Items)
	assert.Equal(t, jobSecretsDir+"/wsu-secret-0/"+jobNewKeyFile, sr.SecretFiles.HostVars[kubeinv.NewKeyVar])

	// In the pod, the mounted files hold the values.
	back, err := setup.DecodeRequest(data)
	require.NoError(t, err)
	secrets := t.TempDir()
	back.SecretFiles.HostVars[kubeinv.NewKeyVar] = filepath.Join(secrets, "new")
	require.NoError(t, os.WriteFile(back.SecretFiles.HostVars[kubeinv.NewKeyVar], []byte("NEW PRIVATE KEY"), 0o600))
	back.SecretFiles.HostVars[kubeinv.KeyVar] = filepath.Join(secrets, "key")
	require.NoError(t, os.WriteFile(back.SecretFiles.HostVars[kubeinv.KeyVar], []byte("PRIVATE KEY"), 0o600))
	back.SecretFiles.Vars[1] = filepath.Join(secrets, "var-1")
	require.NoError(t, os.WriteFile(back.SecretFiles.Vars[1], []byte("hunter2"), 0o600))
	dir := t.TempDir()
	got, err := back.Unpack(dir)
	require.NoError(t, err)
	sent := req.setup()
	assert.Equal(t, sent.Mode, got.Mode)
	assert.Equal(t, sent.Vars, got.Vars)
	assert.Equal(t, sent.Salt, got.Salt, "the instance's plan salt travels: the pod's plan hash is the controller's")
	assert.Equal(t, "abc", got.ExpectHash)
	assert.Empty(t, got.Kubeconfig, "the pod acts on the cluster as its own ServiceAccount, not with the controller's kubeconfig file")
	assert.Equal(t, []string{"proxy_password"}, got.SecretVars, "a varsFrom Secret's value is sensitive in the Job's run too")
	assert.True(t, got.Confined, "a site playbook's run is confined in the Job too")
	assert.Equal(t, []string{"/payload"}, got.ReadDirs)
	assert.Equal(t, filepath.Join(dir, "playbook", "playbook.hcl"), got.Playbook)
	tmpl, err := os.ReadFile(filepath.Join(dir, "playbook", "kubelet.tmpl"))
	require.NoError(t, err)
	assert.Equal(t, "tmpl", string(tmpl), "the site playbook's other files come along")
	require.Len(t, got.VarFiles, 1)
	vf, err := os.ReadFile(got.VarFiles[0])
	require.NoError(t, err)
	assert.Equal(t, `payload_dir = "/payload"`, string(vf))

	gh := got.Inventory.Hosts["win-01"]
	require.NotNil(t, gh)
	assert.Equal(t, h.Groups, gh.Groups)
	assert.Equal(t, inv.Order, got.Inventory.Order)
	for name, v := range h.Vars {
		gv, ok := gh.Vars[name]
		require.True(t, ok, name)
		if name == knownHostsVar {
			assert.Equal(t, dir, filepath.Dir(filepath.Dir(gv.Value.AsString())), "known_hosts lives in the pod's work directory")
			khData, err := os.ReadFile(gv.Value.AsString())
			require.NoError(t, err)
			assert.Equal(t, "[127.0.0.1]:2222 ssh-ed25519 AAAA\n", string(khData))
			continue
		}
		assert.True(t, v.Value.RawEquals(gv.Value), "%s: %#v, want %#v", name, gv.Value, v.Value)
	}
	for name, g := range inv.Groups {
		gg := got.Inventory.Groups[name]
		require.NotNil(t, gg, name)
		assert.Equal(t, g.Hosts, gg.Hosts, name)
		assert.Equal(t, len(g.Vars), len(gg.Vars), name)
	}
}

// TestJobRequestRefusesSecrets: a sensitive inventory variable other than
// the keys cannot go into a Job's request, which is part of its spec.
func TestJobRequestRefusesSecrets(t *testing.T) {
	inv, diags := inventory.ParseWindowsInstances("windowsinstance/ns/win-01", map[string]string{"win-01": "username=Administrator"})
	require.False(t, diags.HasErrors(), "%v", diags)
	inv.Hosts["win-01"].Vars["proxy_password"] = inventory.Var{Value: cty.StringVal("hunter2").Mark(engine.Sensitive)}
	_, _, _, err := jobRequestOf(Request{Instance: "ns/win-01", Request: setup.Request{Mode: engine.ModePlan, Inputs: planfile.Inputs{Playbook: "wsu:join.hcl"}, Inventory: inv},
		Secrets: Secrets{Key: SecretItem{"key", "k"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "proxy_password")
	assert.NotContains(t, err.Error(), "hunter2")
}

// TestJobResultBounded: a result fits the 4 KiB termination message however
// many tasks changed and however long the message; what is dropped is
// counted.
func TestJobResultBounded(t *testing.T) {
	var tasks []string
	for i := range maxPlanTasks {
		tasks = append(tasks, fmt.Sprintf("include.join.play.windows-node.task.install_component_number_%02d", i))
	}
	r := jobResult{Hash: strings.Repeat("f", 32), Add: 40, Change: 10, Changed: 50, Tasks: tasks,
		Facts:      &host.Facts{OS: "windows", Hostname: "WIN-01", IPv4: "10.0.0.1"},
		Failed:     true,
		Message:    strings.Repeat("é", 3000),
		KnownHosts: "[10.0.0.1]:22 ssh-rsa " + strings.Repeat("A", 544) + "\n",
	}
	data, err := encodeResult(r)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(data), maxJobResult)
	var back jobResult
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, r.Hash, back.Hash)
	assert.Equal(t, r.Changed, back.Changed)
	assert.Equal(t, r.KnownHosts, back.KnownHosts, "the host key is never cut")
	assert.Equal(t, r.Facts, back.Facts)
	assert.Equal(t, len(tasks), len(back.Tasks)+back.MoreTasks, "dropped tasks are counted")
	assert.Less(t, len(back.Tasks), len(tasks))
	assert.Equal(t, tasks[:len(back.Tasks)], back.Tasks, "the first tasks are kept")

	small := jobResult{Hash: "h", Changed: 1, Tasks: []string{"a"}}
	data, err = encodeResult(small)
	require.NoError(t, err)
	var smallBack jobResult
	require.NoError(t, json.Unmarshal(data, &smallBack))
	assert.Equal(t, small, smallBack, "a small result is unchanged")
}
