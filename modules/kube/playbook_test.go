package kube

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
	"github.com/wsu-project/wsu/test/kubetest"
)

// playbookSrc exercises the modules through the engine: HCL typing of the
// arguments (taint objects, null map values, computed keys), results used by
// later tasks, and controller-only plays that never connect to the host.
const playbookSrc = `
variable "kubeconfig" {
  type = string
}

locals {
  node = lower(host.name)
}

play "cluster" {
  hosts = "windows"

  task "ready" {
    k8s_node_wait {
      kubeconfig = var.kubeconfig
      name       = local.node
      timeout    = 30
      interval   = 0.1
    }
  }

  task "subnet" {
    k8s_wait_annotation {
      kubeconfig = var.kubeconfig
      node       = local.node
      annotation = "k8s.ovn.org/hybrid-overlay-node-subnet"
    }
  }

  task "mark" {
    k8s_node {
      kubeconfig  = var.kubeconfig
      name        = local.node
      labels      = { "node.openshift.io/os_id" = "Windows", stale = null }
      annotations = { ("wsu.example/subnet") = task.subnet.value }
      taints      = [{ key = "os", value = "Windows", effect = "NoSchedule" }]
    }
  }

  task "network" {
    k8s_cluster_check {
      kubeconfig = var.kubeconfig
    }
  }

  task "cordon" {
    k8s_node_cordon {
      kubeconfig = var.kubeconfig
      name       = local.node
    }
  }

  task "drain" {
    k8s_node_drain {
      kubeconfig = var.kubeconfig
      name       = local.node
    }
  }
}
`

func TestPlaybook(t *testing.T) {
	c := cluster(t)
	joinedNode(t, c, "win-e2e", map[string]string{"stale": "yes"})
	require.NoError(t, c.SetNodeReady(ctx, "win-e2e"))
	require.NoError(t, c.AnnotateNode(ctx, "win-e2e", "k8s.ovn.org/hybrid-overlay-node-subnet", "10.132.3.0/24"))

	reg := modules.NewRegistry(append(generic.Modules(), Modules(testClusters.Cache)...)...)
	loader := playbook.NewLoader(reg, nil)
	pb, diags := loader.LoadSource("play.hcl", []byte(playbookSrc))
	require.False(t, diags.HasErrors(), "load: %s", diags)
	inv, diags := inventory.ParseINI("inventory.ini", []byte("[windows]\nWIN-E2E\n"))
	require.False(t, diags.HasErrors(), "inventory: %s", diags)
	run := func(mode engine.Mode) *engine.Result {
		return engine.Run(ctx, engine.Request{
			Playbook:  pb,
			Inventory: inv,
			Inputs:    engine.Inputs{Vars: []string{"kubeconfig=" + c.Kubeconfig}},
			Mode:      mode,
			Registry:  reg,
			Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) {
				return nil, errors.New("cluster modules must not connect to the host")
			}),
			Sources: loader.Sources(),
		})
	}

	res := run(engine.ModeApply)
	require.False(t, res.Failed(), "apply: %s %s", res.Diagnostics, res.SetupDiagnostics)
	require.Len(t, res.Recap, 1)
	assert.Equal(t, 2, res.Recap[0].Changed, "mark and cordon; the drain then finds nothing to evict")

	n, err := c.Client.CoreV1().Nodes().Get(ctx, "win-e2e", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Windows", n.Labels["node.openshift.io/os_id"])
	assert.NotContains(t, n.Labels, "stale")
	assert.Equal(t, "10.132.3.0/24", n.Annotations["wsu.example/subnet"])
	assert.True(t, n.Spec.Unschedulable)

	res = run(engine.ModePlan)
	require.False(t, res.Failed(), "plan: %s", res.Diagnostics)
	assert.Equal(t, 0, res.Changes, "a second run has nothing to do")
}

// kubeletConfigSrc reads a kubeadm cluster's kubelet configuration and uses
// it in a later task, as join does.
const kubeletConfigSrc = `
variable "kubeconfig" {
  type = string
}

play "kubelet" {
  hosts = "windows"

  task "kubelet config" {
    k8s_kubelet_config {
      kubeconfig = var.kubeconfig
      node_name  = lower(host.name)
    }
  }

  task "windows fields" {
    assert {
      that = [
        strcontains(task["kubelet config"].config, "cgroupsPerQOS: false\n"),
        task["kubelet config"].cluster_domain == "example.internal",
      ]
    }
  }
}
`

// TestKubeletConfigPlaybook: a kubeadm cluster without its kubelet-config
// fails the plan at the task's block; with it, plan and apply read the same
// configuration and change nothing.
func TestKubeletConfigPlaybook(t *testing.T) {
	c := kubetest.Start(t) // kubeadm's ConfigMaps stay out of the shared cluster
	reg := modules.NewRegistry(append(generic.Modules(), Modules(testClusters.Cache)...)...)
	loader := playbook.NewLoader(reg, nil)
	pb, diags := loader.LoadSource("play.hcl", []byte(kubeletConfigSrc))
	require.False(t, diags.HasErrors(), "load: %s", diags)
	inv, diags := inventory.ParseINI("inventory.ini", []byte("[windows]\nWIN-KC\n"))
	require.False(t, diags.HasErrors(), "inventory: %s", diags)
	var mu sync.Mutex
	var failed []engine.DiagnosticView
	run := func(mode engine.Mode) *engine.Result {
		return engine.Run(ctx, engine.Request{
			Hooks: engine.HooksFunc(func(e engine.Event) {
				mu.Lock()
				defer mu.Unlock()
				if e.Type == engine.EventTaskResult && e.Status == engine.StatusFailed {
					failed = append(failed, e.Diagnostics...)
				}
			}),
			Playbook:  pb,
			Inventory: inv,
			Inputs:    engine.Inputs{Vars: []string{"kubeconfig=" + c.Kubeconfig}},
			Mode:      mode,
			Registry:  reg,
			Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) {
				return nil, errors.New("cluster modules must not connect to the host")
			}),
			Sources: loader.Sources(),
		})
	}

	res := run(engine.ModePlan)
	require.True(t, res.Failed(), "the plan finds the ConfigMap missing")
	require.Len(t, failed, 1, "the task fails, saying why")
	assert.Equal(t, "Missing kube-system/kubelet-config", failed[0].Summary)
	require.NotNil(t, failed[0].Range)
	assert.Equal(t, engine.RangeView{Filename: "play.hcl", Line: 11, Column: 20}, *failed[0].Range,
		"in the task: its kubeconfig value, the cluster that lacks it")

	putKubeadmConfigMaps(t, c, kubeadmKubelet, kubeadmClusterConfig)
	for _, mode := range []engine.Mode{engine.ModePlan, engine.ModeApply, engine.ModePlan} {
		res = run(mode)
		require.False(t, res.Failed(), "%v: %s", mode, res.Diagnostics)
		assert.Equal(t, 0, res.Changes, "%v: a read changes nothing", mode)
	}
}
