//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/wsu-project/wsu/test/harness"
)

// capiTokenTTL is how long Cluster API's bootstrap tokens live: a
// node-only join must finish the kubelet's TLS bootstrap inside it.
const capiTokenTTL = 15 * time.Minute

// nodeOnlyResult is a node-only cold join (join with a bootstrap token and
// no kubeconfig, as Cluster API's Windows machines run it from
// cloudbase-init) of one host, on a kubeadm set-up of its own with the
// hostprocess network and kube-controller-manager's real csrapproving.
type nodeOnlyResult struct {
	join *joinResult
	// bootstrap is the run's start to the kubelet's client certificate
	// (play "bootstrap credentials" saw C:\k\kubeconfig): what must fit
	// in the token's lifetime.
	bootstrap time.Duration
}

// measureNodeOnly starts the kubeadm set-up and times the join.
func measureNodeOnly(ctx context.Context, c config, wsu string) (*nodeOnlyResult, error) {
	c.logf("node-only join: starting a kubeadm set-up (hostprocess network), 1 simulated host")
	env, err := harness.Start(ctx, harness.Options{Hosts: 1, WSU: wsu, Network: harness.NetworkHostProcess, Logf: c.logf})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	dir, err := os.MkdirTemp("", "wsu-bench-node-only-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	n, err := env.NodeOnly(env.Hosts[0], dir, "")
	if err != nil {
		return nil, err
	}
	tok, err := env.KubeadmToken(ctx, capiTokenTTL)
	if err != nil {
		return nil, err
	}
	args := []string{"--auto-approve", "-var", "bootstrap_token=" + tok.String()}
	cmd := func(args []string) *exec.Cmd { return n.Cmd(ctx, "apply", args...) }
	c.logf("node-only join: cold")
	start := time.Now()
	j, err := runJoinCmd(ctx, cmd, env.Hosts, args, "", false)
	if err != nil {
		return nil, fmt.Errorf("node-only join: %w", err)
	}
	for _, ev := range j.tasks {
		if ev.Play == "bootstrap credentials" && ev.Address == `task["kubelet kubeconfig"]` {
			return &nodeOnlyResult{join: j, bootstrap: ev.Time.Sub(start)}, nil
		}
	}
	return nil, fmt.Errorf("node-only join: no result for the kubelet kubeconfig wait in play \"bootstrap credentials\"")
}

// nodeOnlyRows is the node-only join's row: its wall time, and the TLS
// bootstrap against Cluster API's token lifetime.
func nodeOnlyRows(runs []*runResult) [][]string {
	var ns []*nodeOnlyResult
	for _, r := range runs {
		if r.nodeOnly != nil {
			ns = append(ns, r.nodeOnly)
		}
	}
	if len(ns) == 0 {
		return nil
	}
	joins := make([]*joinResult, len(ns))
	for i, n := range ns {
		joins[i] = n.join
	}
	wall := median(joins, func(j *joinResult) time.Duration { return j.wall })
	boot := median(ns, func(n *nodeOnlyResult) time.Duration { return n.bootstrap })
	return [][]string{
		{"node-only cold join (kubeadm, hostprocess, 1 host, no kubeconfig)", secs(wall), "", secs(median(joins, func(j *joinResult) time.Duration { return j.cpu })),
			mb(medianInt(joins, func(j *joinResult) int64 { return j.bytesSent })), "", rpcCell(joins), mb(medianInt(joins, func(j *joinResult) int64 { return j.maxRSS })), "", "", "— (whole join)", "info"},
		{"└ TLS bootstrap (run start → kubelet client certificate)", secs(boot), "", "", "", "", "", "", secs(capiTokenTTL), ratio(boot, capiTokenTTL),
			"≤ 15m (a Cluster API token's life)", pass(boot <= capiTokenTTL)},
	}
}
