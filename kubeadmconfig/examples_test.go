package kubeadmconfig

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	"gopkg.in/yaml.v3"
)

// The examples in examples/capi are parsed here so they cannot rot: the
// JoinConfiguration each one leads to must pass Parse, and the command
// that replaces kubeadm join must be wsu's.

const examples = "../examples/capi/"

// joinConfigPath is where CABPK writes the JoinConfiguration (C:\run\... on
// Windows).
const joinConfigPath = "/run/kubeadm/kubeadm-join-config.yaml"

func readExample(t *testing.T, name string) []byte {
	t.Helper()
	src, err := os.ReadFile(examples + name)
	require.NoError(t, err)
	return src
}

// TestExampleCloudbaseInitUserData: the plain user data writes only the
// JoinConfiguration, which parses, and runs wsu on it.
func TestExampleCloudbaseInitUserData(t *testing.T) {
	src := readExample(t, "cloudbase-init-user-data.yaml")
	require.True(t, strings.HasPrefix(string(src), "#cloud-config\n"), "cloudbase-init reads it as cloud-config")
	var ud struct {
		WriteFiles []struct {
			Path        string `yaml:"path"`
			Content     string `yaml:"content"`
			Permissions string `yaml:"permissions"`
		} `yaml:"write_files"`
		Runcmd []string `yaml:"runcmd"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(src)))
	dec.KnownFields(true) // write_files and runcmd only
	require.NoError(t, dec.Decode(&ud))
	require.Len(t, ud.WriteFiles, 1, "it writes the JoinConfiguration and nothing else")
	assert.Equal(t, joinConfigPath, ud.WriteFiles[0].Path)
	j, diags := Parse(joinConfigPath, []byte(ud.WriteFiles[0].Content))
	require.Empty(t, diags, "%v", diags)
	assert.Equal(t, "win-node-01", j.NodeName)
	require.Len(t, ud.Runcmd, 1)
	assert.Contains(t, ud.Runcmd[0], `C:\wsu\wsu.exe apply join --local --auto-approve`)
	assert.Contains(t, ud.Runcmd[0], "--join-config "+joinConfigPath)
	assert.NotContains(t, ud.Runcmd[0]+ud.WriteFiles[0].Content, "kubeconfig", "the node needs no kubeconfig")
}

// capiTemplate is the part of a KubeadmConfigTemplate the test reads.
type capiTemplate struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Template struct {
			Spec struct {
				Files []struct {
					Path    string `yaml:"path"`
					Content string `yaml:"content"`
				} `yaml:"files"`
				PreKubeadmCommands  []string `yaml:"preKubeadmCommands"`
				PostKubeadmCommands []string `yaml:"postKubeadmCommands"`
				JoinConfiguration   struct {
					NodeRegistration yaml.Node `yaml:"nodeRegistration"`
				} `yaml:"joinConfiguration"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestExampleKubeadmConfigTemplate: the JoinConfiguration CABPK makes from
// the template parses, and CABPK's appended kubeadm join reaches wsu
// through the shim.
func TestExampleKubeadmConfigTemplate(t *testing.T) {
	var tpl capiTemplate
	require.NoError(t, yaml.Unmarshal(readExample(t, "kubeadmconfigtemplate-windows.yaml"), &tpl))
	assert.Equal(t, "bootstrap.cluster.x-k8s.io/v1beta2", tpl.APIVersion)
	assert.Equal(t, "KubeadmConfigTemplate", tpl.Kind)
	spec := tpl.Spec.Template.Spec

	j, diags := Parse(joinConfigPath, renderJoin(t, &spec.JoinConfiguration.NodeRegistration))
	require.Empty(t, diags, "%v", diags)
	got := map[string]cty.Value{}
	for _, v := range j.Variables() {
		got[v.Name] = v.Value
	}
	assert.Equal(t, cty.StringVal("win-md-7f2k9"), got["node_name"])
	assert.True(t, got["extra_kubelet_args"].RawEquals(strs("--cloud-provider=external",
		"--register-with-taints=node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule", "--v=2", "--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS")), "%#v", got["extra_kubelet_args"])
	assert.True(t, got["node_labels"].RawEquals(strs("node.kubernetes.io/windows-build=10.0.20348")))

	// cloudbase-init runs runcmd as one cmd.exe script: the PATH set first
	// makes CABPK's "kubeadm join --config FILE" find the shim.
	require.NotEmpty(t, spec.PreKubeadmCommands)
	assert.Equal(t, `set "PATH=C:\wsu;%PATH%"`, spec.PreKubeadmCommands[0])
	assert.Empty(t, spec.PostKubeadmCommands, "nothing runs after the join but CABPK's success file")
	var shim string
	for _, f := range spec.Files {
		if f.Path == "C:/wsu/kubeadm.cmd" {
			shim = f.Content
		}
	}
	require.NotEmpty(t, shim, "the template ships C:/wsu/kubeadm.cmd")
	assert.Contains(t, shim, `if /i not "%~1"=="join" goto kubeadm`)
	assert.Contains(t, shim, `if /i not "%~2"=="--config" goto kubeadm`)
	assert.Contains(t, shim, `C:\wsu\wsu.exe apply join --local --auto-approve --no-color --join-config "%~3"`)
	assert.Contains(t, shim, "exit /b %ERRORLEVEL%", "wsu's exit code decides whether CABPK writes its success file")
}

// renderJoin is the JoinConfiguration CABPK writes for a Kubernetes 1.31+
// machine from a template's nodeRegistration (kubeadm.k8s.io/v1beta4 has
// the same nodeRegistration fields as bootstrap v1beta2): the discovery it
// fills in from the cluster, taints: null when the template has none, and
// the name cloudbase-init renders from its Jinja template.
func renderJoin(t *testing.T, nodeRegistration *yaml.Node) []byte {
	t.Helper()
	if child(nodeRegistration, "taints") == nil {
		nodeRegistration.Content = append(nodeRegistration.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: "taints"}, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"})
	}
	doc := map[string]any{
		"apiVersion": "kubeadm.k8s.io/v1beta4",
		"kind":       "JoinConfiguration",
		"discovery": map[string]any{"bootstrapToken": map[string]any{
			"apiServerEndpoint": "capz-win-7f2k9.eastus.cloudapp.azure.com:6443",
			"caCertHashes":      []string{testPin},
			"token":             testToken,
		}},
		"nodeRegistration": nodeRegistration,
	}
	out, err := yaml.Marshal(doc)
	require.NoError(t, err)
	return []byte(strings.ReplaceAll(string(out), `'{{ ds.meta_data["local_hostname"] }}'`, "win-md-7f2k9"))
}
