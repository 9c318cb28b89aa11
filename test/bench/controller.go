//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/transport/agentbin"
	"github.com/wsu-project/wsu/view"
)

// controllerResult is what the controller rows measured: the controller
// runs in this process (as `wsu controller` does in its pod), so its CPU is
// this process's, runs included.
type controllerResult struct {
	// join is a BYOH ConfigMap entry to its instance's Node Ready, on a
	// fresh host.
	join spent
	// sweep is one drift pass over every joined host (the CLI's and the
	// controller's): each planned once, nothing to change.
	sweep      spent
	sweepHosts int
}

// spent is wall and CPU time.
type spent struct{ wall, cpu time.Duration }

const benchNamespace = "wsu-system"

// measureController starts the controller against the set-up, joins fresh
// (when not nil) through a ConfigMap entry, adopts the hosts the CLI
// joined, then sweeps them all.
func measureController(ctx context.Context, c config, env *harness.Env, fresh *harness.Host, joined []*harness.Host) (*controllerResult, error) {
	cl, err := prepareCluster(ctx, env)
	if err != nil {
		return nil, err
	}
	var freshVars map[string]string
	if fresh != nil {
		if freshVars, err = env.InstanceHostVars(fresh); err != nil {
			return nil, err
		}
	}
	state, err := os.MkdirTemp("", "wsu-bench-controller-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(state)
	o := controller.Options{
		Namespace: benchNamespace,
		ConfigMap: controller.DefaultConfigMap,
		VarFiles:  []string{env.VarFile},
		StateDir:  state,
		// A ConfigMap entry carries an address and a user only: the
		// simulated host's connection and simulation arguments are the
		// controller's host variables here, as a site's SSH port would be.
		HostVars: freshVars,
		// The joined hosts' are by address (an instance may set none of
		// them: only port, user and timeouts).
		AddressHostVars: map[string]map[string]string{},
	}
	runner := run.InProcess{Agents: agentbin.New(agentbin.Options{Dir: filepath.Dir(env.Agent)})}
	if c.events != "" {
		// Every in-process run's events, in one file, to split the
		// controller's time as the CLI's joins are split.
		f, err := os.Create(filepath.Join(c.events, "controller.json"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		runner.Trace = view.NewJSON(f)
	}
	o.Runner = runner
	for _, h := range joined {
		if o.AddressHostVars[h.Name], err = env.InstanceHostVars(h); err != nil {
			return nil, err
		}
	}
	stop, err := startController(ctx, env.Cluster.Config, o)
	if err != nil {
		return nil, err
	}
	defer stop()

	res := &controllerResult{}
	// The hosts the CLI joined are adopted first: beside being swept
	// below, they show the controller running (its caches filled, its
	// controllers started) before the entry is timed, as in a cluster
	// where it runs all along.
	c.logf("controller: adopting the %d host(s) the CLI joined", len(joined))
	names, err := adoptJoined(ctx, cl, env, joined)
	if err != nil {
		return res, err
	}
	if fresh != nil {
		c.logf("controller: a ConfigMap entry to Node Ready")
		join, err := measure(func() error { return joinByEntry(ctx, cl, env, fresh) })
		if err != nil {
			return res, fmt.Errorf("ConfigMap entry to Node Ready: %w", err)
		}
		res.join = join
		names = append(names, controller.InstanceName(fresh.Name))
	}

	c.logf("controller: a drift sweep over %d host(s)", len(names))
	res.sweepHosts = len(names)
	swept, err := measure(func() error { return sweep(ctx, cl, names) })
	if err != nil {
		return res, fmt.Errorf("drift sweep: %w", err)
	}
	res.sweep = swept
	return res, nil
}

// adoptJoined makes the hosts the CLI joined WindowsInstances and waits
// until each is joined and Ready; it returns their names.
func adoptJoined(ctx context.Context, cl client.WithWatch, env *harness.Env, joined []*harness.Host) ([]string, error) {
	var names []string
	for _, h := range joined {
		// The admin's adoption of a Node the CLI joined (docs/install.md,
		// "Security model: which Nodes wsu touches"): mark it the
		// instance's, or the controller refuses to touch it.
		if err := adopt(ctx, cl, h.NodeName, kube.InstanceOwner(benchNamespace, h.Name)); err != nil {
			return nil, err
		}
		wi := &wsuv1.WindowsInstance{
			ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: benchNamespace},
			Spec:       wsuv1.WindowsInstanceSpec{Address: h.Name, Username: env.SSHUser},
		}
		if err := cl.Create(ctx, wi); err != nil {
			return nil, err
		}
		names = append(names, h.Name)
	}
	if err := waitInstances(ctx, cl, names, joinedReady); err != nil {
		return nil, fmt.Errorf("adopting the joined hosts: %w", err)
	}
	return names, nil
}

// adopt marks Node name as owner's, as `kubectl annotate node NAME
// wsu.dev/owner=OWNER --overwrite` does.
func adopt(ctx context.Context, cl client.Client, name, owner string) error {
	node := &corev1.Node{}
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return fmt.Errorf("adopting Node %s: %w", name, err)
	}
	orig := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[kube.OwnerAnnotation] = owner
	if err := cl.Patch(ctx, node, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("adopting Node %s: %w", name, err)
	}
	return nil
}

// joinByEntry lists fresh in the BYOH ConfigMap and waits until its
// instance is joined with a Ready Node.
func joinByEntry(ctx context.Context, cl client.WithWatch, env *harness.Env, fresh *harness.Host) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: controller.DefaultConfigMap, Namespace: benchNamespace},
		Data:       map[string]string{fresh.Name: "username=" + env.SSHUser},
	}
	if err := cl.Create(ctx, cm); err != nil {
		return err
	}
	return waitInstances(ctx, cl, []string{controller.InstanceName(fresh.Name)}, joinedReady)
}

// prepareCluster installs what the controller needs in the set-up's
// cluster: the CRD, its namespace, and the SSH key Secret.
func prepareCluster(ctx context.Context, env *harness.Env) (client.WithWatch, error) {
	root, err := harness.ModuleRoot()
	if err != nil {
		return nil, err
	}
	if err := env.Cluster.InstallCRDFiles(filepath.Join(root, "deploy", "crd", "wsu.dev_windowsinstances.yaml")); err != nil {
		return nil, err
	}
	if err := env.Cluster.EnsureNamespace(ctx, benchNamespace); err != nil {
		return nil, err
	}
	key, err := os.ReadFile(env.KeyFile)
	if err != nil {
		return nil, err
	}
	scheme, err := approval.NewScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.NewWithWatch(env.Cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret, Namespace: benchNamespace},
		Data:       map[string][]byte{kubeinv.KeySecretKey: key},
	}
	return cl, cl.Create(ctx, sec)
}

// startController starts the controller's manager as `wsu controller` does
// (no metrics or probe listeners); stop ends it and waits.
func startController(ctx context.Context, cfg *rest.Config, o controller.Options) (stop func(), err error) {
	mo, err := controller.ManagerConfig(o, controller.ManagerOptions{MetricsAddr: "0", ProbeAddr: "0"})
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, mo)
	if err != nil {
		return nil, err
	}
	if err := controller.Setup(mgr, o); err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	stop = func() {
		cancel()
		<-done
	}
	// Measured from a running controller, as in a cluster where it runs
	// all along: its caches filled and its controllers started, not from
	// the manager's start.
	select {
	case <-mgr.Elected():
	case err := <-done:
		cancel()
		return nil, fmt.Errorf("the controller stopped at its start: %v", err)
	}
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		stop()
		return nil, errors.New("the controller's caches never synced")
	}
	return stop, nil
}

// sweep wakes every instance for a plan now, as its drift pass would (the
// controller keeps each instance's next pass in memory, so the bench
// cannot age it from outside): it clears status.lastPlan.clusterSettings,
// which plans at once, and waits until each was planned again and found in
// sync (the plan records the settings' version again). The instances were
// idle (joined, in sync) before.
func sweep(ctx context.Context, cl client.WithWatch, names []string) error {
	for _, name := range names {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			wi := &wsuv1.WindowsInstance{}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: benchNamespace, Name: name}, wi); err != nil {
				return err
			}
			if wi.Status.LastPlan == nil {
				return fmt.Errorf("%s has no plan", name)
			}
			orig := wi.DeepCopy()
			wi.Status.LastPlan.ClusterSettings = ""
			return cl.Status().Patch(ctx, wi, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		})
		if err != nil {
			return err
		}
	}
	return waitInstances(ctx, cl, names, func(wi *wsuv1.WindowsInstance) bool {
		return joinedReady(wi) && wi.Status.LastPlan.ClusterSettings != "" && wi.Status.ObservedGeneration == wi.Generation
	})
}

// joinedReady: joined, in sync, its Node Ready.
func joinedReady(wi *wsuv1.WindowsInstance) bool {
	c := wi.Status.Conditions
	return wi.Status.Phase == wsuv1.PhaseJoined && wi.Status.LastPlan != nil && meta.IsStatusConditionTrue(c, wsuv1.ConditionJoined) &&
		meta.IsStatusConditionFalse(c, wsuv1.ConditionDrifted) && meta.IsStatusConditionTrue(c, wsuv1.ConditionNodeReady)
}

// waitInstances watches the namespace's instances until every named one
// satisfies ok (a watch, not polling: its cost stays out of the CPU
// measured), failing on a Degraded instance or after five minutes.
func waitInstances(ctx context.Context, cl client.WithWatch, names []string, ok func(*wsuv1.WindowsInstance) bool) error {
	return waitInstancesFor(ctx, cl, names, ok, 5*time.Minute)
}

// waitInstancesFor is waitInstances failing after timeout.
func waitInstancesFor(ctx context.Context, cl client.WithWatch, names []string, ok func(*wsuv1.WindowsInstance) bool, timeout time.Duration) error {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := cl.Watch(ctx, &wsuv1.WindowsInstanceList{}, client.InNamespace(benchNamespace))
	if err != nil {
		return err
	}
	defer w.Stop()
	pending := map[string]string{}
	for _, n := range names {
		pending[n] = "not created"
	}
	for ev := range w.ResultChan() {
		wi, isInstance := ev.Object.(*wsuv1.WindowsInstance)
		if !isInstance || !slices.Contains(names, wi.Name) {
			continue
		}
		if c := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("%s: %s: %s", wi.Name, c.Reason, c.Message)
		}
		if ok(wi) {
			delete(pending, wi.Name)
		} else {
			pending[wi.Name] = "phase " + wi.Status.Phase
		}
		if len(pending) == 0 {
			return nil
		}
	}
	return fmt.Errorf("waiting for %v: %w", pending, context.Cause(ctx))
}

// measure times f: wall, and this process's CPU (user and system).
func measure(f func() error) (spent, error) {
	cpu0 := selfCPU()
	start := time.Now()
	err := f()
	return spent{wall: time.Since(start), cpu: selfCPU() - cpu0}, err
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
