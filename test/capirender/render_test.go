// Package capirender renders the user data Cluster API's kubeadm bootstrap
// provider (CABPK) makes from examples/capi's Windows KubeadmConfigTemplate,
// with Cluster API's own code (its v1beta2 API types, kubeadm marshalling
// and cloud-init templates), and checks what the example claims: the
// JoinConfiguration CABPK writes passes wsu's parser, and CABPK's appended
// kubeadm join runs after the PATH change that makes it wsu's shim.
//
// It is a module of its own so that Cluster API's dependencies stay out of
// wsu's go.mod: run it with `cd test/capirender && go test ./...` (SHOW=1
// and -v print the user data rendered).
package capirender

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/cloudinit"
	kubeadmtypes "sigs.k8s.io/cluster-api/bootstrap/kubeadm/pkg/types"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/kubeadmconfig"
)

const (
	token    = "k7q2zd.h3x9w0p5m1r8c4v6"
	pin      = "sha256:6e3b1a5c1d8f0b2a9c7e4d3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b"
	endpoint = "capz-win-7f2k9.eastus.cloudapp.azure.com:6443"
	hostname = "win-md-7f2k9"
	joinPath = "/run/kubeadm/kubeadm-join-config.yaml"
)

// render is CABPK's worker path (reconcileJoin in
// bootstrap/kubeadm/reconcilers/kubeadmconfig) for one machine of the
// template: the discovery its reconcileDiscovery fills in, the
// uninitialized taint it adds, files whose contentFrom it resolved, and
// cloudinit.NewNode.
func render(t *testing.T, spec bootstrapv1.KubeadmConfigSpec, version string) string {
	t.Helper()
	jc := spec.JoinConfiguration.DeepCopy()
	jc.Discovery.BootstrapToken = bootstrapv1.BootstrapTokenDiscovery{APIServerEndpoint: endpoint, Token: token, CACertHashes: []string{pin}}
	jc.NodeRegistration.Taints = ptr.To(append(ptr.Deref(jc.NodeRegistration.Taints, []corev1.Taint{}), clusterv1.NodeUninitializedTaint))
	v := semver.MustParse(version)
	joinData, err := kubeadmtypes.MarshalJoinConfigurationForVersion(jc, v)
	require.NoError(t, err)
	files := make([]bootstrapv1.File, 0, len(spec.Files))
	for _, f := range spec.Files {
		if f.ContentFrom.IsDefined() {
			f.ContentFrom, f.Content = bootstrapv1.FileSource{}, "resolved from Secret "+f.ContentFrom.Secret.Name
		}
		files = append(files, f)
	}
	out, err := cloudinit.NewNode(&cloudinit.NodeInput{
		BaseUserData: cloudinit.BaseUserData{
			AdditionalFiles:     files,
			PreKubeadmCommands:  spec.PreKubeadmCommands,
			PostKubeadmCommands: spec.PostKubeadmCommands,
			Users:               spec.Users,
			KubernetesVersion:   v,
		},
		JoinConfiguration: joinData,
	})
	require.NoError(t, err)
	return string(out)
}

// jinja is cloudbase-init's rendering of "## template: jinja" user data,
// for the one variable CABPK's Windows templates use.
func jinja(userData string) string {
	return strings.ReplaceAll(userData, `{{ ds.meta_data["local_hostname"] }}`, hostname)
}

// cloudConfig is what the test reads of the rendered user data.
type cloudConfig struct {
	WriteFiles []struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	} `json:"write_files"`
	Runcmd []string `json:"runcmd"`
}

// goldenUserData is what test/e2e's cloudbase-init stand-in runs on a
// simulated host (TestCABPKUserDataJoins): this module's rendering for
// Kubernetes 1.33 as CABPK hands it to cloudbase-init (jinja not rendered
// yet), kept current by TestGoldenUserData (-update rewrites it).
const goldenUserData = "../e2e/testdata/cabpk-windows-userdata.yaml"

var update = flag.Bool("update", false, "rewrite "+goldenUserData)

// TestGoldenUserData: the e2e tier runs exactly what CABPK renders from the
// example; the main module does not depend on Cluster API, so the rendering
// reaches it as a file this test keeps current.
func TestGoldenUserData(t *testing.T) {
	userData := render(t, exampleTemplate(t).Spec.Template.Spec, "1.33.4")
	if *update {
		require.NoError(t, os.WriteFile(goldenUserData, []byte(userData), 0o644))
	}
	golden, err := os.ReadFile(goldenUserData)
	require.NoError(t, err)
	assert.Equal(t, string(golden), userData, "%s is stale: run (cd test/capirender && go test -run TestGoldenUserData -update)", goldenUserData)
}

// exampleTemplate is examples/capi's template, decoded strictly with
// Cluster API's own types.
func exampleTemplate(t *testing.T) bootstrapv1.KubeadmConfigTemplate {
	t.Helper()
	src, err := os.ReadFile("../../examples/capi/kubeadmconfigtemplate-windows.yaml")
	require.NoError(t, err)
	var tpl bootstrapv1.KubeadmConfigTemplate
	require.NoError(t, sigyaml.UnmarshalStrict(src, &tpl), "the template is a valid bootstrap v1beta2 KubeadmConfigTemplate")
	return tpl
}

func TestCABPKUserDataRunsWsu(t *testing.T) {
	tpl := exampleTemplate(t)

	// kubeadm.k8s.io/v1beta3 below Kubernetes 1.31, v1beta4 from it.
	for _, version := range []string{"1.30.9", "1.33.4"} {
		t.Run(version, func(t *testing.T) {
			userData := jinja(render(t, tpl.Spec.Template.Spec, version))
			require.True(t, strings.HasPrefix(userData, "## template: jinja\n#cloud-config\n"))
			if os.Getenv("SHOW") != "" {
				t.Log(userData)
			}
			var cc cloudConfig
			require.NoError(t, sigyaml.Unmarshal([]byte(userData), &cc))

			files := map[string]string{}
			for _, f := range cc.WriteFiles {
				files[f.Path] = f.Content
			}
			require.Contains(t, files, joinPath)
			j, diags := kubeadmconfig.Parse(joinPath, []byte(files[joinPath]))
			require.False(t, diags.HasErrors(), "CABPK's JoinConfiguration passes wsu's parser: %v\n%s", diags, files[joinPath])
			assert.Equal(t, endpoint, j.APIServerEndpoint)
			assert.Equal(t, token, j.Token)
			assert.Equal(t, []string{pin}, j.CACertHashes)
			assert.Equal(t, hostname, j.NodeName)
			assert.Equal(t, []string{"node.kubernetes.io/windows-build=10.0.20348"}, j.NodeLabels)
			assert.Contains(t, j.ExtraKubeletArgs, "--cloud-provider=external")
			assert.Equal(t, []kubeadmconfig.Taint{{Key: "node.cluster.x-k8s.io/uninitialized", Effect: "NoSchedule"}}, j.Taints,
				"CABPK adds its uninitialized taint; Cluster API removes it once it has synced the Machine's labels")
			assert.Contains(t, files, "C:/wsu/kubeadm.cmd")

			// cloudbase-init runs runcmd as one cmd.exe script, in order:
			// the PATH change comes before CABPK's kubeadm join.
			path, join := -1, -1
			for i, c := range cc.Runcmd {
				switch {
				case c == `set "PATH=C:\wsu;%PATH%"`:
					path = i
				case strings.HasPrefix(c, "kubeadm join --config "+joinPath+" ") && strings.HasSuffix(c, "&& echo success > /run/cluster-api/bootstrap-success.complete"):
					join = i
				}
			}
			require.NotEqual(t, -1, join, "CABPK appends kubeadm join: %q", cc.Runcmd)
			require.NotEqual(t, -1, path, "the template's PATH change: %q", cc.Runcmd)
			assert.Less(t, path, join)
		})
	}
}
