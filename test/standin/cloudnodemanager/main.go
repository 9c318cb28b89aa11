// Command cloudnodemanager is a TEST STAND-IN, not a product binary: it
// plays Azure's azure-cloud-node-manager.exe on the simulated Windows host
// (agent/platform/sim), doing visibly what the real one does that a join
// depends on, and nothing else: with the kubeconfig it is given (the one
// k8s_node_identity writes: a tokenFile and a CA file, Windows paths on the
// simulated host) it removes the taint
// node.cloudprovider.kubernetes.io/uninitialized from its Node (listed with
// the field selector metadata.name=NAME as the real one's informer lists
// it, then updated, retried on conflict)
// and runs until SIGTERM or SIGINT, exiting 0. It re-reads the token file
// for every request, as client-go's tokenFile does.
//
// Its arguments are WMCO's (playbooks/cloud-node-manager.hcl):
//
//	--windows-service --node-name=NAME --wait-routes=false --kubeconfig=C:\k\cloud-node-manager\kubeconfig
//
// Limits: no Azure: the provider ID, addresses, instance type and zone
// labels the real one reads from the instance metadata service are not
// set; routes are not waited for. A Node that does not exist yet, or an
// API server away, is waited for (the real one retries too); a refusal
// (401, 403) is logged and retried, as the SCM restarts the real one.
// Unknown flags are ignored.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/wsu-project/wsu/test/standin/simhost"
)

// Uninitialized is the taint a kubelet with --cloud-provider=external
// registers with, and the cloud node manager removes.
const Uninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cloud-node-manager stand-in:", err)
		os.Exit(1)
	}
}

// flags reads --name=value and --name value forms; others are ignored.
func flags(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := strings.TrimLeft(args[i], "-")
		if k, v, ok := strings.Cut(a, "="); ok {
			out[k] = v
		} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[a] = args[i+1]
			i++
		} else {
			out[a] = "true"
		}
	}
	return out
}

func run(ctx context.Context, args []string) error {
	f := flags(args)
	node, kc := f["node-name"], f["kubeconfig"]
	if node == "" || kc == "" {
		return errors.New("--node-name and --kubeconfig are required")
	}
	paths, err := simhost.Open()
	if err != nil {
		return err
	}
	cfg, err := loadKubeconfig(paths, kc)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kc, err)
	}
	cl, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	last := ""
	for {
		msg := "initialized"
		if err := initialize(ctx, cl, node); err != nil {
			msg = err.Error()
		}
		if msg != last {
			fmt.Fprintf(os.Stderr, "node %s: %s\n", node, msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// initialize removes the uninitialized taint from the Node, if it is there.
func initialize(ctx context.Context, cl kubernetes.Interface, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// As the real one's informer: a list of its own Node by field selector.
		list, err := cl.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("node %s is not registered yet", name)
		}
		n := &list.Items[0]
		i := slices.IndexFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == Uninitialized })
		if i < 0 {
			return nil
		}
		n.Spec.Taints = slices.Delete(n.Spec.Taints, i, i+1)
		_, err = cl.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// loadKubeconfig reads a kubeconfig whose file references are Windows
// paths on the simulated host.
func loadKubeconfig(paths *simhost.Paths, path string) (*rest.Config, error) {
	local, err := paths.Local(path)
	if err != nil {
		return nil, err
	}
	raw, err := clientcmd.LoadFromFile(local)
	if err != nil {
		return nil, err
	}
	fix := func(p *string) error {
		if *p == "" {
			return nil
		}
		lp, err := paths.Local(*p)
		*p = lp
		return err
	}
	for _, c := range raw.Clusters {
		if err := fix(&c.CertificateAuthority); err != nil {
			return nil, err
		}
	}
	for _, a := range raw.AuthInfos {
		if err := fix(&a.TokenFile); err != nil {
			return nil, err
		}
	}
	return clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
}
