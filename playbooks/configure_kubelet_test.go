package playbooks_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/playbooks"
)

// kubeletPlan is what a plan of configure-kubelet on a new host would
// write: the kubelet config file and the service's arguments.
type kubeletPlan struct {
	config string // from the plan's diff, which drops a final newline
	sha256 string // of the exact bytes
	args   []string
}

// planKubelet plans configure-kubelet.hcl with vars on a fresh simulated
// host (win-1, 10.0.0.5).
func planKubelet(t *testing.T, vars ...string) kubeletPlan {
	t.Helper()
	loader := playbook.NewLoader(all.Schemas(), playbooks.FS)
	pb, diags := loader.Load("wsu:configure-kubelet.hcl")
	require.False(t, diags.HasErrors(), diags.Error())
	inv, diags := inventory.ParseINI("inventory.ini", []byte("[windows]\nwin-1\n"))
	require.False(t, diags.HasErrors(), diags.Error())
	root := t.TempDir()
	var mu sync.Mutex
	changes := map[string]*engine.ChangeView{}
	res := engine.Run(context.Background(), engine.Request{
		Playbook:  pb,
		Inventory: inv,
		Inputs:    engine.Inputs{Vars: vars},
		Mode:      engine.ModePlan,
		Registry:  all.Registry(all.Options{Clusters: kube.NewCache(kube.Defaults{})}),
		Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) {
			return sim.New(filepath.Join(root, "win-1"), sim.Options{Hostname: "WIN-1", IPv4: "10.0.0.5"})
		}),
		Hooks: engine.HooksFunc(func(e engine.Event) {
			if e.Type == engine.EventTaskResult && e.Change != nil {
				mu.Lock()
				defer mu.Unlock()
				changes[e.Address] = e.Change
			}
		}),
		Sources: loader.Sources(),
	})
	require.False(t, res.Failed(), "plan: %s %s", res.Diagnostics, res.SetupDiagnostics)
	conf := changes[`task["kubelet config"]`]
	require.NotNil(t, conf, "the config file is planned")
	svc := changes[`task["kubelet service"]`]
	require.NotNil(t, svc, "the service is planned")
	var p kubeletPlan
	for _, f := range conf.Fields {
		if f.Name == "sha256" {
			require.NoError(t, json.Unmarshal([]byte(f.New), &p.sha256))
		}
	}
	for _, f := range svc.Fields {
		if f.Name == "args" {
			require.NoError(t, json.Unmarshal([]byte(f.New), &p.args), "args rendered as %s", f.New)
		}
	}
	var lines []string
	for _, l := range strings.Split(conf.Diff, "\n") {
		if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++ ") {
			lines = append(lines, l[1:])
		}
	}
	p.config = strings.Join(lines, "\n") + "\n"
	return p
}

// openshiftArgs is the kubelet command line WMCO's defaults give.
var openshiftArgs = []string{`-log-file=C:\var\log\kubelet\kubelet.log`, `C:\k\kubelet.exe`, `--config=C:\k\kubelet.conf`,
	`--bootstrap-kubeconfig=C:\k\bootstrap-kubeconfig`, `--kubeconfig=C:\k\kubeconfig`, `--cert-dir=c:\var\lib\kubelet\pki\`,
	"--windows-service", "--node-labels=node.openshift.io/os_id=Windows", "--windows-priorityclass=ABOVE_NORMAL_PRIORITY_CLASS",
	"--v=2", "--hostname-override=win-1", "--node-ip=10.0.0.5"}

// TestConfigureKubeletOpenShift: the defaults (what join passes on
// OpenShift) give WMCO's config byte for byte, as before taints and the
// kubeadm path were variables.
func TestConfigureKubeletOpenShift(t *testing.T) {
	want, err := os.ReadFile("testdata/kubelet.conf.openshift")
	require.NoError(t, err)
	p := planKubelet(t)
	assert.Equal(t, string(want), p.config)
	sum := sha256.Sum256(want)
	assert.Equal(t, hex.EncodeToString(sum[:]), p.sha256, "byte for byte")
	assert.Equal(t, openshiftArgs, p.args)
}

// TestConfigureKubeletTemplateTaints: taints in the template, quoted where
// YAML would read another type; none leaves registerWithTaints out.
func TestConfigureKubeletTemplateTaints(t *testing.T) {
	p := planKubelet(t, `node_taints=[]`)
	assert.NotContains(t, p.config, "registerWithTaints")
	assert.Contains(t, p.config, "resolvConf: \"\"\n")

	p = planKubelet(t, `node_taints=[{ key = "node.cloudprovider.kubernetes.io/uninitialized", value = "true", effect = "NoSchedule" }, { key = "dedicated", value = "", effect = "NoExecute" }]`)
	assert.Contains(t, p.config, "registerWithTaints:\n"+
		"  - key: node.cloudprovider.kubernetes.io/uninitialized\n    value: \"true\"\n    effect: NoSchedule\n"+
		"  - key: dedicated\n    value: \"\"\n    effect: NoExecute\n")
	assert.Equal(t, openshiftArgs, p.args, "taints stay in the config file")
}

// TestConfigureKubeletGivenConfig: kubelet_config is written as given,
// taints go on the command line as kubeadm passes them, and no labels
// leave --node-labels out.
func TestConfigureKubeletGivenConfig(t *testing.T) {
	const given = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"
	p := planKubelet(t, "kubelet_config="+given, "node_labels=[]", "node_taints=[]")
	assert.Equal(t, given, p.config)
	sum := sha256.Sum256([]byte(given))
	assert.Equal(t, hex.EncodeToString(sum[:]), p.sha256, "written as given")
	assert.NotContains(t, p.args, "--node-labels=node.openshift.io/os_id=Windows")
	for _, a := range p.args {
		assert.NotRegexp(t, "^--(node-labels|register-with-taints)=", a)
	}

	p = planKubelet(t, "kubelet_config="+given, "node_labels=[]",
		`node_taints=[{ key = "os", value = "windows", effect = "NoSchedule" }, { key = "gpu", value = "", effect = "PreferNoSchedule" }]`)
	assert.Equal(t, given, p.config)
	assert.Equal(t, "--register-with-taints=os=windows:NoSchedule,gpu:PreferNoSchedule", p.args[len(p.args)-1])
}
