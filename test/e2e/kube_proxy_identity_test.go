//go:build linux

package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/standin"
)

// TestKubeProxyOwnIdentity: on a kubeadm cluster with network ovn-hybrid,
// kube-proxy runs as a node service with an identity of its own bound to
// system:node-proxier (join's kube_proxy_identity default there), not the
// kubelet's: upstream's Node authorizer does not let a node list
// EndpointSlices. The kube-proxy stand-in, given each kubeconfig the node
// holds, really lists and watches with the one and is refused with the
// other. remove takes the identity away.
func TestKubeProxyOwnIdentity(t *testing.T) {
	ctx := context.Background()
	env := start(t, harness.Options{Hosts: 1})
	h := env.Hosts[0]
	requireSuccess(t, run(t, env, nil, "apply", "join"))

	var conf []byte
	require.NoError(t, env.WithSim(h, func(s *sim.Host) error {
		var err error
		conf, err = s.ReadFile(ctx, `C:\k\kube-proxy.conf`, 0)
		return err
	}))
	assert.Contains(t, string(conf), `kubeconfig: C:\k\kube-proxy\kubeconfig`, "kube-proxy's own kubeconfig")

	bins, err := standin.Build(ctx, t.TempDir(), "", "kubeproxy")
	require.NoError(t, err)
	own := kubeProxyAs(t, bins["kubeproxy"], h, `C:\k\kube-proxy\kubeconfig`)
	assert.Contains(t, own, "as system:serviceaccount:kube-system:wsu-kube-proxy-"+h.NodeName, "kube-proxy lists and watches as its own identity")
	kubelets := kubeProxyAs(t, bins["kubeproxy"], h, `C:\k\kubeconfig`)
	assert.Contains(t, kubelets, "forbidden", "the kubelet's identity may not list EndpointSlices")

	plan := run(t, env, nil, "plan", "join", "--detailed-exitcode")
	assert.Equalf(t, 0, plan.ExitCode, "a re-run changes nothing\n%s", plan.Failures())

	requireSuccess(t, run(t, env, nil, "apply", "remove"))
	_, err = env.Cluster.Client.CoreV1().ServiceAccounts("kube-system").Get(ctx, "wsu-kube-proxy-"+h.NodeName, metav1.GetOptions{})
	assert.Truef(t, apierrors.IsNotFound(err), "remove deletes kube-proxy's ServiceAccount: %v", err)
}

// kubeProxyAs runs the kube-proxy stand-in on h's simulated host with the
// node's kubeconfig at path until it has synced (then stops it) or exits;
// it returns what it printed.
func kubeProxyAs(t *testing.T, bin string, h *harness.Host, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig="+path, "--hostname-override="+h.NodeName)
	cmd.Env = append(os.Environ(), sim.EnvRoot+"="+h.Root)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case <-done:
			return out.String()
		case <-time.After(100 * time.Millisecond):
			if strings.Contains(out.String(), "synced:") {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-done
				return out.String()
			}
		case <-ctx.Done():
			t.Fatalf("kube-proxy stand-in neither synced nor exited:\n%s", out.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
