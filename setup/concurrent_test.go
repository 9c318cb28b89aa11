//go:build linux

package setup_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// markPlaybook writes a run's name into a file on each host (over SSH, with
// the run's key) and into a label of the Node "shared-name" (through the
// run's --kubeconfig, named by no task).
const markPlaybook = `
variable "run" {
  type = string
}

play "mark" {
  hosts = "windows"

  task "file" {
    win_file {
      path    = "C:\\wsu-run.txt"
      content = var.run
    }
  }

  task "node" {
    k8s_node {
      name          = "shared-name"
      labels        = { "wsu.dev/run" = var.run }
      only_if_owned = false # a Node of the test's, not one wsu joined
    }
  }
}
`

// TestConcurrentRunsKeepApart runs two playbooks at once in one process, as a
// controller does: each against its own simulated host behind its own sshd
// (its own key and known_hosts) and its own kube-apiserver (its own
// kubeconfig, given as the run's --kubeconfig). Each run must reach only its
// own host and cluster: nothing of a run (cluster clients, keys, agent
// binaries) is process-wide.
func TestConcurrentRunsKeepApart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	envs := map[string]*harness.Env{}
	for _, name := range []string{"a", "b"} {
		env, err := harness.Start(ctx, harness.Options{Hosts: 1, Logf: t.Logf})
		require.NoError(t, err)
		t.Cleanup(func() { env.Close() })
		_, err = env.Cluster.CreateNode(ctx, "shared-name", nil)
		require.NoError(t, err)
		envs[name] = env
	}
	book := filepath.Join(t.TempDir(), "mark.hcl")
	require.NoError(t, os.WriteFile(book, []byte(markPlaybook), 0o644))

	var wg sync.WaitGroup
	results := map[string]*engine.Result{}
	var mu sync.Mutex
	for name, env := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := runOnce(ctx, t, setup.Options{
				Request: setup.Request{Inputs: planfile.Inputs{Playbook: book, Inventory: env.Inventory, Vars: []string{"run=" + name},
					Kubeconfig: env.Cluster.Kubeconfig}, Mode: engine.ModeApply},
				Agents: agentbin.New(agentbin.Options{Dir: filepath.Dir(env.Agent)}),
			})
			mu.Lock()
			results[name] = res
			mu.Unlock()
		}()
	}
	wg.Wait()

	for name, env := range envs {
		res := results[name]
		require.NotNil(t, res, name)
		require.False(t, res.Failed(), "run %s: %v", name, res.Diagnostics)
		content, err := os.ReadFile(filepath.Join(env.Hosts[0].Root, "fs", "C", "wsu-run.txt"))
		require.NoError(t, err, "run %s wrote its own host", name)
		assert.Equal(t, name, string(content), "host of run %s", name)
		node, err := env.Cluster.Client.CoreV1().Nodes().Get(ctx, "shared-name", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, name, node.Labels["wsu.dev/run"], "cluster of run %s", name)
	}
}

// runOnce prepares and runs o, failing the test on setup errors.
func runOnce(ctx context.Context, t *testing.T, o setup.Options) *engine.Result {
	run, diags := setup.Prepare(ctx, o)
	if !assert.False(t, diags.HasErrors(), "%v", diags) {
		return nil
	}
	return engine.Run(ctx, run.Request)
}
