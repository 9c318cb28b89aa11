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

// nodeOnlyResult is what the kubeadm set-up measured (a cluster of its
// own with the hostprocess network, Calico's and kube-proxy's HostProcess
// DaemonSets and kube-controller-manager's real csrapproving): a cold join
// of one host with an admin kubeconfig, then a node-only cold join (a
// bootstrap token and no kubeconfig, as Cluster API's Windows machines run
// it from cloudbase-init) of another.
type nodeOnlyResult struct {
	// admin is the cold join with the admin kubeconfig.
	admin *joinResult
	join  *joinResult
	// bootstrap is the run's start to the kubelet's client certificate
	// (play "bootstrap credentials" saw C:\k\kubeconfig): what must fit
	// in the token's lifetime.
	bootstrap time.Duration
}

// measureNodeOnly starts the kubeadm set-up and times the two joins.
func measureNodeOnly(ctx context.Context, c config, wsu string) (*nodeOnlyResult, error) {
	c.logf("kubeadm set-up (hostprocess network): starting, 2 simulated hosts")
	env, err := harness.Start(ctx, harness.Options{Hosts: 2, WSU: wsu, Network: harness.NetworkHostProcess, Logf: c.logf})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	admin := env.Hosts[1]
	c.logf("kubeadm set-up: cold join with the admin kubeconfig")
	a, err := runJoin(ctx, env, []*harness.Host{admin}, []string{"apply", "join", "--auto-approve", "--limit", admin.Name}, "", c.split)
	if err != nil {
		return nil, fmt.Errorf("kubeadm cold join: %w", err)
	}
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
	j, err := runJoinCmd(ctx, cmd, env.Hosts[:1], args, "", false)
	if err != nil {
		return nil, fmt.Errorf("node-only join: %w", err)
	}
	for _, ev := range j.tasks {
		if ev.Play == "bootstrap credentials" && ev.Address == `task["kubelet kubeconfig"]` {
			return &nodeOnlyResult{admin: a, join: j, bootstrap: ev.Time.Sub(start)}, nil
		}
	}
	return nil, fmt.Errorf("node-only join: no result for the kubelet kubeconfig wait in play \"bootstrap credentials\"")
}

// kubeadmRows are the kubeadm set-up's rows: the admin cold join, the
// node-only join's wall time and its TLS bootstrap against Cluster API's
// token lifetime; and the notes splitting both joins by play.
func kubeadmRows(runs []*runResult) (rows [][]string, notes []string) {
	var ns []*nodeOnlyResult
	for _, r := range runs {
		if r.nodeOnly != nil {
			ns = append(ns, r.nodeOnly)
		}
	}
	if len(ns) == 0 {
		return nil, nil
	}
	admin, joins := make([]*joinResult, len(ns)), make([]*joinResult, len(ns))
	for i, n := range ns {
		admin[i], joins[i] = n.admin, n.join
	}
	const adminName, nodeOnlyName = "cold join (kubeadm, hostprocess, 1 host)", "node-only cold join (kubeadm, hostprocess, 1 host, no kubeconfig)"
	boot := median(ns, func(n *nodeOnlyResult) time.Duration { return n.bootstrap })
	rows = [][]string{
		joinRow(adminName, admin, splitCell(admin)),
		joinRow(nodeOnlyName, joins, ""),
		{"└ TLS bootstrap (run start → kubelet client certificate)", secs(boot), "", "", "", "", "", "", secs(capiTokenTTL), ratio(boot, capiTokenTTL),
			"≤ 15m (a Cluster API token's life)", pass(boot <= capiTokenTTL)},
	}
	for _, n := range []string{playNote(adminName, admin), playNote(nodeOnlyName, joins)} {
		if n != "" {
			notes = append(notes, n)
		}
	}
	return rows, notes
}

// joinRow is a whole join's informational row.
func joinRow(name string, js []*joinResult, split string) []string {
	return []string{name, secs(median(js, func(j *joinResult) time.Duration { return j.wall })), split, secs(median(js, func(j *joinResult) time.Duration { return j.cpu })),
		mb(medianInt(js, func(j *joinResult) int64 { return j.bytesSent })), "", rpcCell(js), mb(medianInt(js, func(j *joinResult) int64 { return j.maxRSS })), "", "", "— (whole join)", "info"}
}
