package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"

	"github.com/wsu-project/wsu/test/standin/simhost"
)

// envHostProcessDir names the directory holding the stand-ins the kubelet
// stand-in starts for HostProcess containers (default: its own
// directory).
const envHostProcessDir = "WSU_KUBELET_HOSTPROCESS_DIR"

// standinFor maps a container image to the stand-in that plays it, by its
// repository (tag and digest dropped); "" when none does.
func standinFor(image string) string {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	switch {
	case strings.Contains(repo, "calico/node-windows"):
		return "calicowindows"
	case strings.Contains(repo, "kube-proxy"):
		return "kubeproxy"
	}
	return ""
}

// isHostProcess reports whether every container of the pod is a
// HostProcess container (the pod's setting, or each container's).
func isHostProcess(p *corev1.Pod) bool {
	podLevel := false
	if sc := p.Spec.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil {
		podLevel = *sc.WindowsOptions.HostProcess
	}
	for _, c := range p.Spec.Containers {
		v := podLevel
		if sc := c.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil {
			v = *sc.WindowsOptions.HostProcess
		}
		if !v {
			return false
		}
	}
	return len(p.Spec.Containers) > 0
}

// podRunner runs the HostProcess pods bound to the node as host processes
// of the simulated host. One worker syncs pods, so starting and stopping
// a pod never race; mu guards what process exits touch.
type podRunner struct {
	cs     kubernetes.Interface
	o      *options
	paths  *simhost.Paths
	binDir string
	api    *rest.Config // the node's: the API server URL and CA
	lister listerscorev1.PodLister
	queue  workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	running  map[string]*podProcs // by namespace/name
	restarts map[types.UID]int32
	noted    map[types.UID]bool // pods it said it cannot run
}

func newPodRunner(cs kubernetes.Interface, o *options, paths *simhost.Paths) (*podRunner, error) {
	api, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, err
	}
	dir := os.Getenv(envHostProcessDir)
	if dir == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		dir = filepath.Dir(exe)
	}
	return &podRunner{cs: cs, o: o, paths: paths, binDir: dir, api: api,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second)),
		running: map[string]*podProcs{}, restarts: map[types.UID]int32{}, noted: map[types.UID]bool{}}, nil
}

// run watches the pods bound to the node (field selector spec.nodeName,
// as the Node authorizer requires) until ctx ends, then stops every
// process it started.
func (r *podRunner) run(ctx context.Context) {
	factory := informers.NewSharedInformerFactoryWithOptions(r.cs, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", r.o.nodeName).String()
	}))
	pods := factory.Core().V1().Pods()
	r.lister = pods.Lister()
	key := func(obj any) {
		if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			r.queue.Add(k)
		}
	}
	_, _ = pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: key, UpdateFunc: func(_, obj any) { key(obj) }, DeleteFunc: key,
	})
	log.Printf("HostProcess pods: watching pods bound to %s; stand-ins from %s", r.o.nodeName, r.binDir)
	factory.Start(ctx.Done())
	go func() { <-ctx.Done(); r.queue.ShutDown() }()
	for {
		k, quit := r.queue.Get()
		if quit {
			break
		}
		if err := r.sync(ctx, k); err != nil && ctx.Err() == nil {
			log.Printf("pod %s: %v (retrying)", k, err)
			r.queue.AddRateLimited(k)
		} else {
			r.queue.Forget(k)
		}
		r.queue.Done(k)
	}
	factory.Shutdown()
	r.stopAll()
}

// sync brings one pod's processes in line with the pod.
func (r *podRunner) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := r.lister.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		r.stop(key, "the pod is gone")
		return nil
	}
	if err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil {
		r.stop(key, "the pod is being deleted")
		return r.finishDeletion(ctx, pod)
	}
	switch p := r.get(key); {
	case p != nil && p.uid == pod.UID && pod.Status.Phase == corev1.PodRunning:
		return nil
	case p != nil && p.uid == pod.UID:
		// Started, but reporting it failed: report it again.
		return r.setRunning(ctx, pod, p, r.restartCount(pod.UID))
	case p != nil:
		r.stop(key, "the pod was replaced")
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return nil
	}
	bins, why := r.binaries(pod)
	if why != "" {
		r.noteOnce(pod, why)
		return nil
	}
	return r.start(ctx, pod, bins)
}

// binaries maps each container to its stand-in, or says why the pod
// cannot run here.
func (r *podRunner) binaries(pod *corev1.Pod) ([]string, string) {
	if !isHostProcess(pod) {
		return nil, "not a HostProcess pod: the stand-in runs no containers, it stays Pending"
	}
	var bins []string
	for _, c := range pod.Spec.Containers {
		s := standinFor(c.Image)
		if s == "" {
			return nil, fmt.Sprintf("no stand-in plays image %s (container %s): it stays Pending", c.Image, c.Name)
		}
		bin := filepath.Join(r.binDir, s)
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Sprintf("stand-in %s for image %s: %v: it stays Pending", s, c.Image, err)
		}
		bins = append(bins, bin)
	}
	return bins, ""
}

func (r *podRunner) noteOnce(pod *corev1.Pod, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.noted[pod.UID] {
		r.noted[pod.UID] = true
		log.Printf("pod %s/%s: %s", pod.Namespace, pod.Name, why)
	}
}

func (r *podRunner) restartCount(uid types.UID) int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.restarts[uid]
}

func (r *podRunner) get(key string) *podProcs {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[key]
}

// finishDeletion removes a terminating pod once its processes are gone,
// as the kubelet does (grace period 0, only this pod's UID).
func (r *podRunner) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	zero := int64(0)
	err := r.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err == nil {
		log.Printf("pod %s/%s: processes stopped; removed it", pod.Namespace, pod.Name)
	}
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// stop ends a pod's processes, if it has any.
func (r *podRunner) stop(key, why string) {
	r.mu.Lock()
	p := r.running[key]
	delete(r.running, key)
	r.mu.Unlock()
	if p != nil {
		log.Printf("pod %s: %s: stopping its processes", key, why)
		p.stop()
	}
}

func (r *podRunner) stopAll() {
	r.mu.Lock()
	all := r.running
	r.running = map[string]*podProcs{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for k, p := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log.Printf("pod %s: the kubelet is stopping: stopping its processes", k)
			p.stop()
		}()
	}
	wg.Wait()
}

// exited is told by a pod's process watcher that one ended on its own:
// the pod's other processes stop, its status says so, and it is started
// again after a back-off (restartPolicy Always, as DaemonSet pods have).
func (r *podRunner) exited(ctx context.Context, key string, p *podProcs, container string, code int) {
	r.mu.Lock()
	if r.running[key] != p {
		r.mu.Unlock()
		return // stopped on purpose
	}
	delete(r.running, key)
	r.restarts[p.uid]++
	n := r.restarts[p.uid]
	r.mu.Unlock()
	p.stop()
	backoff := min(time.Duration(1<<min(n-1, 5))*time.Second, 30*time.Second)
	log.Printf("pod %s: container %s exited with code %d; restarting in %s", key, container, code, backoff)
	if err := r.setCrashed(ctx, key, p.uid, container, code, n); err != nil && ctx.Err() == nil {
		log.Printf("pod %s: status: %v", key, err)
	}
	r.queue.AddAfter(key, backoff)
}
