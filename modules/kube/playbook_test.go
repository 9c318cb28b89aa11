package kube

import (
	"context"
	"errors"
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
	_, err := c.CreateNode(ctx, "win-e2e", map[string]string{"stale": "yes"})
	require.NoError(t, err)
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
