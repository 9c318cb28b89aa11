//go:build linux

// Command demo is `make demo`: a join of simulated Windows hosts, end to
// end, on this machine only (127.0.0.1). It starts a real kube-apiserver
// and etcd, a real OpenSSH sshd with simulated Windows hosts behind it and
// a payload of stand-in binaries (see test/harness), then runs the wsu it
// is given: plan, apply join, plan again (no changes). It stops and removes
// everything at the end, or with --keep waits for Ctrl-C so the set-up can
// be explored with the commands it prints.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/test/harness"
)

func main() {
	wsu := flag.String("wsu", "bin/wsu", "the wsu binary to demonstrate")
	hosts := flag.Int("hosts", 1, "how many simulated Windows hosts")
	keep := flag.Bool("keep", false, "keep everything running until Ctrl-C")
	network := flag.String("network", harness.NetworkOVNHybrid, "the node network to show: ovn-hybrid (OVN-Kubernetes' hybrid overlay, as on OpenShift) or hostprocess (a vanilla kubeadm cluster whose CNI and kube-proxy run as HostProcess DaemonSets)")
	cluster := flag.Bool("controller", false, "the cluster face instead: the controller installed from the shipped manifests joins a BYOH ConfigMap entry (one host)")
	manifests := flag.String("manifests", "deploy/rendered/kubernetes.yaml", "with --controller: the manifests kubectl applies")
	flag.Parse()
	if *cluster {
		if err := runControllerDemo(*wsu, *manifests, *network, *keep, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
		return
	}
	if err := demo(*wsu, *hosts, *keep, *network); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) {
	fmt.Printf("\n\033[1m== "+format+"\033[0m\n", args...)
}

func demo(wsu string, hosts int, keep bool, network string) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	say("setting up (all on 127.0.0.1)")
	env, err := harness.Start(ctx, harness.Options{
		Hosts:   hosts,
		WSU:     wsu,
		Network: network,
		Logf:    func(f string, a ...any) { fmt.Printf("   "+f+"\n", a...) },
	})
	if err != nil {
		return err
	}
	defer func() {
		say("cleaning up")
		if cerr := env.Close(); cerr != nil {
			err = errors.Join(err, cerr)
			fmt.Println("   clean-up failed; left behind:", env.Dir, env.UserDir)
			return
		}
		fmt.Println("   stopped the simulated hosts' services, sshd, kube-apiserver and etcd; removed", env.Dir, "and", env.UserDir)
	}()
	fmt.Printf(`   started:
     kube-apiserver + etcd   %s   (admin kubeconfig %s)
     cluster parts           %s
     sshd                    %s   (OpenSSH, user %s)
`, env.Cluster.Config.Host, env.Cluster.Kubeconfig, clusterParts(network), env.SSHD.Addr, env.SSHUser)
	for _, h := range env.Hosts {
		fmt.Printf("     simulated Windows host  %s (%s, %s) state in %s\n", h.Name, h.Hostname, h.IPv4, h.Root)
	}
	fmt.Printf("     payload                 %s (stand-in binaries, version %s)\n     inventory               %s\n     variables               %s\n",
		env.PayloadDir, env.Manifest.Version, env.Inventory, env.VarFile)
	cmdline := func(args ...string) string {
		return strings.Join(append([]string{wsu}, append(args, "-i", env.Inventory, "--var-file", env.VarFile)...), " ")
	}

	say("%s", cmdline("plan", "join"))
	r, err := env.Run(ctx, os.Stdout, "plan", "join")
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("wsu plan join exited %d", r.ExitCode)
	}
	say("%s", cmdline("apply", "join", "--auto-approve"))
	r, err = env.Run(ctx, os.Stdout, "apply", "join", "--auto-approve")
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("wsu apply join exited %d", r.ExitCode)
	}
	say("the cluster's view")
	nodes, err := env.Cluster.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("   %-10s %-7s %-16s %s\n", "NODE", "READY", "VERSION", "PAYLOAD (annotation)")
	for _, n := range nodes.Items {
		ready := "False"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = string(c.Status)
			}
		}
		fmt.Printf("   %-10s %-7s %-16s %s\n", n.Name, ready, n.Status.NodeInfo.KubeletVersion, cmp.Or(n.Annotations["wsu.dev/version"], n.Annotations["windowsmachineconfig.openshift.io/version"]))
	}

	say("%s --detailed-exitcode   (again: nothing should change)", cmdline("plan", "join"))
	r, err = env.Run(ctx, os.Stdout, "plan", "join", "--detailed-exitcode")
	if err != nil {
		return err
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("the second plan should show no changes (exit 0), got exit %d", r.ExitCode)
	}

	if keep {
		say("running until Ctrl-C; try:")
		fmt.Printf("   %s\n   %s\n   KUBECONFIG=%s kubectl get nodes,csr   (if you have kubectl)\n   ls %s\n",
			cmdline("plan", "join", "-v"), cmdline("apply", "remove", "--auto-approve"), env.Cluster.Kubeconfig, filepath.Join(env.Hosts[0].Root, "fs", "C", "k"))
		<-ctx.Done()
		stop()
		time.Sleep(100 * time.Millisecond)
	}
	say("done: the host joined, and a second plan found nothing to change")
	return nil
}

// runControllerDemo is the cluster face's demo (controller.go), its
// output to out; Ctrl-C or SIGTERM ends it cleanly.
func runControllerDemo(wsu, manifests, network string, keep bool, out io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	abs, err := filepath.Abs(wsu)
	if err != nil {
		return err
	}
	d := &controllerDemo{wsu: abs, manifests: manifests, network: network, keep: keep, out: &lockedWriter{w: out}}
	return d.run(ctx)
}

// clusterParts says what plays the cluster's side for the network shown.
func clusterParts(network string) string {
	if network == harness.NetworkHostProcess {
		return "kube-controller-manager (kubeadm's controllers) and kube-scheduler; Calico and kube-proxy-windows DaemonSets, their pods stand-ins the kubelet stand-in runs (test/kubetest)"
	}
	return "CSR signer and OVN-Kubernetes master stand-ins (test/kubetest)"
}
