//go:build linux

package main

// The cluster face's demo (`make demo-controller`, `scripts/demo.sh
// --controller`): the same bed as the CLI demo, and the controller
// installed from the shipped manifests (deploy/rendered/kubernetes.yaml)
// with the real kubectl the test bed builds. The bed has no kubelet to
// run the controller's pod, so the Deployment stays without one and the
// controller runs as a process here instead — `wsu controller` with the
// ServiceAccount's own token (kubectl create token) and so exactly the
// shipped RBAC, the settings the Deployment gives it, plus how to reach
// the simulated host behind the test sshd. A BYOH ConfigMap entry makes a
// Manual instance: `kubectl get windowsinstances -w` shows it planned and
// awaiting approval, `wsu approve` approves the plan, and it joins and
// turns Ready; the entry removed, the host is deconfigured and the Node
// deleted. Every wait has a deadline; a join that does not happen is an
// error, so the demo's test fails.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
)

// What the kubernetes overlay installs, and the timings of the demo.
const (
	demoNamespace      = "wsu-system"
	demoServiceAccount = "wsu-controller"
	demoDeadline       = 4 * time.Minute
)

// controllerDemo is one run of the cluster face's demo.
type controllerDemo struct {
	wsu, manifests, network string
	keep                    bool
	out                     io.Writer // all output, shared by the watch

	env       *harness.Env
	kubectl   string
	client    client.Client
	instance  string            // the BYOH entry's address: the instance's name
	before    map[string]string // the host before the join (harness.Env.Snapshot)
	stopProcs []func() error
}

// lockedWriter serialises the writes of the demo and its watch.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (d *controllerDemo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "\n\033[1m== "+format+"\033[0m\n", args...)
}

func (d *controllerDemo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

// run is the whole demo: set up, install, join, approve, remove, clean up.
func (d *controllerDemo) run(ctx context.Context) (err error) {
	d.say("setting up (all on 127.0.0.1)")
	d.env, err = harness.Start(ctx, harness.Options{Hosts: 1, WSU: d.wsu, Network: d.network,
		Logf: func(f string, a ...any) { d.printf("   "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.cleanUp()) }()
	bins, err := kubetest.Binaries(ctx, func(f string, a ...any) { d.printf("   "+f+"\n", a...) }, kubetest.Kubectl)
	if err != nil {
		return fmt.Errorf("kubectl (make kubetest builds it): %w", err)
	}
	d.kubectl = bins[kubetest.Kubectl]
	scheme, err := approval.NewScheme()
	if err != nil {
		return err
	}
	if d.client, err = client.New(d.env.Cluster.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	d.instance = d.env.Hosts[0].Name
	d.printf(`   started:
     kube-apiserver + etcd   %s   (admin kubeconfig %s)
     cluster parts           %s
     sshd                    %s   (OpenSSH, user %s)
     simulated Windows host  %s (%s, %s) state in %s
     kubectl                 %s (built from k8s.io/kubectl, test/kubetest)
`, d.env.Cluster.Config.Host, d.env.Cluster.Kubeconfig, clusterParts(d.network), d.env.SSHD.Addr, d.env.SSHUser,
		d.instance, d.env.Hosts[0].Hostname, d.env.Hosts[0].IPv4, d.env.Hosts[0].Root, d.kubectl)

	for _, step := range []func(context.Context) error{d.install, d.startController, d.join, d.remove} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	if d.keep {
		d.say("running until Ctrl-C; try:")
		d.printf("   export KUBECONFIG=%s\n   kubectl get windowsinstances,nodes,csr -A\n   kubectl -n %s create configmap windows-instances --from-literal=%s=username=%s   # join it again\n   tail -f %s\n",
			d.env.Cluster.Kubeconfig, demoNamespace, d.instance, d.env.SSHUser, d.logFile())
		<-ctx.Done()
	}
	d.say("done: the BYOH entry joined a Ready Node after approval, and its removal deconfigured the host")
	return nil
}

// install applies the shipped manifests and the key Secret, as an admin.
func (d *controllerDemo) install(ctx context.Context) error {
	d.say("installing wsu from the shipped manifests (%s)", d.manifests)
	if err := d.kube(ctx, "apply", "-f", d.manifests); err != nil {
		return err
	}
	if err := d.kube(ctx, "wait", "--for=condition=Established", "crd/windowsinstances.wsu.dev", "--timeout=60s"); err != nil {
		return err
	}
	// docs/install.md: on kubeadm, kube-proxy's own identity (join's
	// default) needs this file bound to wsu's ServiceAccounts; no overlay
	// binds it.
	d.say("kubeadm: kube-proxy's own identity (deploy/rbac/kubeadm-kube-proxy.yaml, bound as its header shows)")
	sas := []string{"--serviceaccount=" + demoNamespace + ":wsu-controller", "--serviceaccount=" + demoNamespace + ":wsu-join"}
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(filepath.Dir(d.manifests), "..", "rbac", "kubeadm-kube-proxy.yaml")},
		append([]string{"create", "clusterrolebinding", "wsu-kube-proxy-identity", "--clusterrole=wsu-kube-proxy-identity"}, sas...),
		append([]string{"-n", "kube-system", "create", "rolebinding", "wsu-kube-proxy-identity", "--role=wsu-kube-proxy-identity"}, sas...),
	} {
		if err := d.kube(ctx, args...); err != nil {
			return err
		}
	}
	d.printf("   note: the Deployment wsu-controller gets no pod here: the bed has no kubelet (nor the\n" +
		"   controllers that make pods). The controller runs as a process on this machine instead, as the\n" +
		"   Deployment's ServiceAccount with the shipped RBAC: a stand-in for the pod, not the pod — the\n" +
		"   image, its probes, security context and the leader election across replicas are not shown.\n")
	d.say("the key the hosts accept, as WMCO's users keep it")
	return d.kube(ctx, "-n", demoNamespace, "create", "secret", "generic", "cloud-private-key",
		"--from-file=private-key.pem="+d.env.KeyFile)
}

// startController runs `wsu controller` as the ServiceAccount.
func (d *controllerDemo) startController(ctx context.Context) error {
	d.say("kubectl -n %s create token %s   (the controller's credentials; not printed)", demoNamespace, demoServiceAccount)
	token, err := d.kubeOutput(ctx, "-n", demoNamespace, "create", "token", demoServiceAccount, "--duration=2h")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(d.env.Dir, "wsu-controller.kubeconfig")
	if err := d.writeKubeconfig(kubeconfig, strings.TrimSpace(token)); err != nil {
		return err
	}
	varFile, err := d.controllerVars()
	if err != nil {
		return err
	}
	args := []string{"controller", "--kubeconfig", kubeconfig, "--namespace", demoNamespace,
		"--default-approval", "Manual", "--var-file", varFile, "--state-dir", filepath.Join(d.env.Dir, "controller-state"),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	hostVars, err := d.env.InstanceHostVars(d.env.Hosts[0])
	if err != nil {
		return err
	}
	shown := slices.Clone(args)
	for _, k := range slices.Sorted(maps.Keys(hostVars)) {
		args = append(args, "--address-host-var", d.instance+":"+k+"="+hostVars[k])
		shown = append(shown, "--address-host-var", fmt.Sprintf("'%s:%s=…'", d.instance, k))
	}
	d.say("wsu %s", strings.Join(shown, " "))
	d.printf("   (the Deployment's settings, --default-approval Manual, and how to reach the simulated host behind\n" +
		"   the test sshd: trusted per-address variables an admin gives, never the instance)\n")
	if err := os.MkdirAll(filepath.Join(d.env.Dir, "controller-state"), 0o700); err != nil {
		return err
	}
	logf, err := os.Create(d.logFile())
	if err != nil {
		return err
	}
	cmd := exec.Command(d.wsu, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	d.printf("   started: wsu controller, pid %d, log %s\n", cmd.Process.Pid, d.logFile())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	d.stopProcs = append(d.stopProcs, func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
		d.printf("   stopped wsu controller (pid %d)\n", cmd.Process.Pid)
		return nil
	})
	return d.watch()
}

// watch runs kubectl get windowsinstances -w, its lines in the output.
func (d *controllerDemo) watch() error {
	d.say("kubectl -n %s get windowsinstances -w   (in the background; its lines start with 'watch |')", demoNamespace)
	cmd := d.kubeCmd(context.Background(), "-n", demoNamespace, "get", "windowsinstances", "-w")
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			d.printf("   watch | %s\n", sc.Text())
		}
	}()
	d.stopProcs = append(d.stopProcs, func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		w.Close()
		<-copied
		return nil
	})
	return nil
}

// join adds the BYOH entry, approves the plan and waits for a Ready Node.
func (d *controllerDemo) join(ctx context.Context) (err error) {
	if d.before, err = d.env.Snapshot(d.env.Hosts[0]); err != nil {
		return err
	}
	d.say("a BYOH entry for the simulated host")
	if err := d.kube(ctx, "-n", demoNamespace, "create", "configmap", "windows-instances",
		"--from-literal="+d.instance+"=username="+d.env.SSHUser); err != nil {
		return err
	}
	wi, err := d.await(ctx, "the instance's plan awaits approval", func(wi *wsuv1.WindowsInstance) bool {
		return wi != nil && wi.Status.Phase == wsuv1.PhaseAwaitingApproval && wi.Status.LastPlan != nil
	})
	if err != nil {
		return err
	}
	d.say("wsu approve %s -n %s   (shows the plan the controller made)", d.instance, demoNamespace)
	if err := d.wsuRun(ctx, "approve", d.instance, "-n", demoNamespace, "--kubeconfig", d.env.Cluster.Kubeconfig); err != nil {
		return err
	}
	hash := wi.Status.LastPlan.Hash
	d.say("wsu approve %s -n %s --plan %s", d.instance, demoNamespace, hash)
	if err := d.wsuRun(ctx, "approve", d.instance, "-n", demoNamespace, "--plan", hash, "--kubeconfig", d.env.Cluster.Kubeconfig); err != nil {
		return err
	}
	wi, err = d.await(ctx, "joined, its Node Ready", func(wi *wsuv1.WindowsInstance) bool {
		return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined &&
			meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady)
	})
	if err != nil {
		return err
	}
	d.say("the cluster's view")
	d.printf("   instance %s joined: Node %s Ready\n", d.instance, wi.Status.NodeName)
	return d.kube(ctx, "get", "nodes,windowsinstances", "-A")
}

// remove takes the entry out and waits for the host to be deconfigured.
func (d *controllerDemo) remove(ctx context.Context) error {
	wi := &wsuv1.WindowsInstance{}
	if err := d.client.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: d.instance}, wi); err != nil {
		return err
	}
	node := wi.Status.NodeName
	d.say("the BYOH entry removed")
	patch := fmt.Sprintf(`[{"op":"remove","path":"/data/%s"}]`, d.instance)
	if err := d.kube(ctx, "-n", demoNamespace, "patch", "configmap", "windows-instances", "--type=json", "-p", patch); err != nil {
		return err
	}
	// The finalizer goes only once the remove playbook deconfigured the
	// host and the Node was deleted.
	if _, err := d.await(ctx, "the host deconfigured and the instance gone", func(wi *wsuv1.WindowsInstance) bool { return wi == nil }); err != nil {
		return err
	}
	err := d.client.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("the Node %s is still there after the removal: %v", node, err)
	}
	after, err := d.env.Snapshot(d.env.Hosts[0])
	if err != nil {
		return err
	}
	if changed := snapshotDiff(d.before, after); len(changed) > 0 {
		return fmt.Errorf("the host is not as before the join: %d differences, e.g. %s", len(changed), strings.Join(changed[:min(5, len(changed))], "; "))
	}
	d.printf("   instance %s removed: the host deconfigured, Node %s deleted\n", d.instance, node)
	d.printf("   the host is as before the join: every file, service, registry value, HNS network and firewall rule\n")
	return d.kube(ctx, "get", "nodes,windowsinstances", "-A")
}

// await polls the instance until ok holds (nil: it does not exist), within
// demoDeadline; on timeout the controller's log tail says why.
func (d *controllerDemo) await(ctx context.Context, what string, ok func(*wsuv1.WindowsInstance) bool) (*wsuv1.WindowsInstance, error) {
	d.printf("   waiting: %s\n", what)
	deadline := time.Now().Add(demoDeadline)
	last := "not yet made"
	for {
		wi := &wsuv1.WindowsInstance{}
		err := d.client.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: d.instance}, wi)
		switch {
		case apierrors.IsNotFound(err):
			wi = nil
		case err != nil:
			return nil, err
		default:
			last = describeInstance(wi)
		}
		if ok(wi) {
			return wi, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: not within %s; the instance: %s; the controller's log ends:\n%s", what, demoDeadline, last, tail(d.logFile(), 30))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// snapshotDiff names what differs between two snapshots, sorted.
func snapshotDiff(before, after map[string]string) []string {
	var out []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			out = append(out, k+" gone")
		} else if w != v {
			out = append(out, k+" changed")
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			out = append(out, k+" added")
		}
	}
	slices.Sort(out)
	return out
}

func describeInstance(wi *wsuv1.WindowsInstance) string {
	var conds []string
	for _, c := range wi.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("phase %s, %s", wi.Status.Phase, strings.Join(conds, ", "))
}

// cleanUp stops what the demo started, then the bed.
func (d *controllerDemo) cleanUp() error {
	d.say("cleaning up")
	var errs []error
	for i := len(d.stopProcs) - 1; i >= 0; i-- {
		errs = append(errs, d.stopProcs[i]())
	}
	if err := d.env.Close(); err != nil {
		d.printf("   clean-up failed; left behind: %s %s\n", d.env.Dir, d.env.UserDir)
		return errors.Join(append(errs, err)...)
	}
	d.printf("   stopped the simulated host's services, sshd, kube-apiserver and etcd; removed %s and %s\n", d.env.Dir, d.env.UserDir)
	return errors.Join(errs...)
}

func (d *controllerDemo) logFile() string { return filepath.Join(d.env.Dir, "wsu-controller.log") }

// kubeCmd is kubectl as the bed's admin.
func (d *controllerDemo) kubeCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, d.kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.env.Cluster.Kubeconfig)
	return cmd
}

// kube runs kubectl, showing the command and its output.
func (d *controllerDemo) kube(ctx context.Context, args ...string) error {
	d.printf("   $ kubectl %s\n", strings.Join(args, " "))
	cmd := d.kubeCmd(ctx, args...)
	out, err := cmd.CombinedOutput()
	d.printf("%s", indent(out))
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// kubeOutput runs kubectl and returns its output without showing it.
func (d *controllerDemo) kubeOutput(ctx context.Context, args ...string) (string, error) {
	var stderr bytes.Buffer
	cmd := d.kubeCmd(ctx, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// wsuRun runs the wsu CLI, showing its output.
func (d *controllerDemo) wsuRun(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, d.wsu, args...).CombinedOutput()
	d.printf("%s", indent(out))
	if err != nil {
		return fmt.Errorf("wsu %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// writeKubeconfig writes the ServiceAccount's kubeconfig: the bed's API
// server and CA, the token.
func (d *controllerDemo) writeKubeconfig(path, token string) error {
	cfg := d.env.Cluster.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bed"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[demoServiceAccount] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["bed"] = &clientcmdapi.Context{Cluster: "bed", AuthInfo: demoServiceAccount, Namespace: demoNamespace}
	kc.CurrentContext = "bed"
	return clientcmd.WriteToFile(*kc, path)
}

// controllerVars is the bed's variable file without its kubeconfig (the
// admin's): the playbooks' cluster tasks then use the controller's, as in
// a pod.
func (d *controllerDemo) controllerVars() (string, error) {
	data, err := os.ReadFile(d.env.VarFile)
	if err != nil {
		return "", err
	}
	var keep []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "kubeconfig") {
			keep = append(keep, l)
		}
	}
	path := filepath.Join(d.env.Dir, "controller.wsuvars")
	return path, os.WriteFile(path, []byte(strings.Join(keep, "\n")), 0o644)
}

func indent(out []byte) string {
	s := strings.TrimRight(string(out), "\n")
	if s == "" {
		return ""
	}
	return "     " + strings.ReplaceAll(s, "\n", "\n     ") + "\n"
}

// tail is the last n lines of a file.
func tail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
