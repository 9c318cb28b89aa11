//go:build linux

package podrunner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// loopback is the pods' and the node's address: host network only.
const loopback = "127.0.0.1"

// Options configure a Runner.
type Options struct {
	// NodeName is the Node it registers (default "podrunner").
	NodeName string
	// Config reaches the API server with rights to register a Node, read
	// pods, ConfigMaps and Secrets, request ServiceAccount tokens and write
	// pod status (the test cluster's admin).
	Config *rest.Config
	// Images maps an image reference, as a Pod names it, to an image
	// tarball (docker save / crane format) or OCI layout directory.
	Images map[string]string
	// Dir holds the pods' root file systems, volumes and logs (default: a
	// temporary directory, removed by Stop).
	Dir string
	// Logf receives what the runner does; nil: silent.
	Logf func(format string, args ...any)
}

// Runner is a running pod runner. Stop it with Stop.
type Runner struct {
	opts    Options
	client  kubernetes.Interface
	node    string
	dir     string
	ownDir  bool
	apiHost string
	apiPort string
	logf    func(string, ...any)

	runCtx context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	imagesMu sync.Mutex
	images   map[string]*image

	mu   sync.Mutex
	pods map[types.UID]*podRun
}

// Start registers the Node, Ready, and runs the pods bound to it until
// Stop.
func Start(ctx context.Context, opts Options) (*Runner, error) {
	if opts.NodeName == "" {
		opts.NodeName = "podrunner"
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Config == nil {
		return nil, errors.New("podrunner: Options.Config is needed")
	}
	u, err := url.Parse(opts.Config.Host)
	if err != nil {
		return nil, fmt.Errorf("podrunner: API server URL %q: %w", opts.Config.Host, err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("podrunner: API server URL %q: %w", opts.Config.Host, err)
	}
	cs, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("podrunner: %w", err)
	}
	r := &Runner{opts: opts, client: cs, node: opts.NodeName, dir: opts.Dir, apiHost: host, apiPort: port,
		pods: map[types.UID]*podRun{}, images: map[string]*image{}}
	r.logf = func(format string, args ...any) { opts.Logf("podrunner (kubelet stand-in): "+format, args...) }
	if r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "podrunner-"); err != nil {
			return nil, fmt.Errorf("podrunner: %w", err)
		}
		r.ownDir = true
	}
	if err := r.registerNode(ctx); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r.runCtx, r.cancel = runCtx, cancel
	if err := r.watch(runCtx); err != nil {
		cancel()
		return nil, err
	}
	return r, nil
}

// NodeName is the Node the runner registered.
func (r *Runner) NodeName() string { return r.node }

// LogPath is the log file of a pod's container (stdout and stderr), which
// exists once the container started.
func (r *Runner) LogPath(pod *corev1.Pod, container string) string {
	return filepath.Join(r.podDir(pod), container+".log")
}

func (r *Runner) podDir(pod *corev1.Pod) string {
	return filepath.Join(r.dir, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// reportCtx is the context API calls run in: it ends with Stop.
func (r *Runner) reportCtx() context.Context { return r.runCtx }

// image is an image file, opened and unpacked once: each container's root
// file system is linked from the unpacked copy (linkTree), which is much
// faster than unpacking the layers again.
type image struct {
	img    v1.Image
	config *v1.ConfigFile
	root   string
}

// image opens and unpacks an image once per reference.
func (r *Runner) image(ref, path string) (*image, error) {
	r.imagesMu.Lock()
	defer r.imagesMu.Unlock()
	if im, ok := r.images[ref]; ok {
		return im, nil
	}
	img, err := loadImage(path)
	if err != nil {
		return nil, fmt.Errorf("image %s (%s): %w", ref, path, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	root, err := os.MkdirTemp(r.dir, "image-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(root, 0o755); err != nil { // the containers' "/"
		return nil, err
	}
	start := time.Now()
	if err := unpack(img, root); err != nil {
		os.RemoveAll(root)
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	r.logf("image %s unpacked in %s", ref, time.Since(start).Round(10*time.Millisecond))
	im := &image{img: img, config: cf, root: root}
	r.images[ref] = im
	return im, nil
}

// Stop kills every container, removes their mounts and, if the runner made
// it, its directory. The Node object stays (as a stopped kubelet's does).
func (r *Runner) Stop() error {
	r.mu.Lock()
	for _, run := range r.pods {
		run.kill()
	}
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	if r.ownDir {
		return os.RemoveAll(r.dir)
	}
	return nil
}

// registerNode creates (or takes over) the Node and reports it Ready with
// room for many pods.
func (r *Runner) registerNode(ctx context.Context) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: r.node, Labels: map[string]string{
		corev1.LabelOSStable:   runtime.GOOS,
		corev1.LabelArchStable: runtime.GOARCH,
		corev1.LabelHostname:   r.node,
	}}}
	_, err := r.client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("podrunner: registering node %s: %w", r.node, err)
	}
	n, err = r.client.CoreV1().Nodes().Get(ctx, r.node, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("podrunner: %w", err)
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("16"),
		corev1.ResourceMemory:           resource.MustParse("64Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
	}
	now := metav1.Now()
	n.Status = corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "podrunner (a kubelet stand-in) is running pods", LastHeartbeatTime: now, LastTransitionTime: now}},
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: loopback}, {Type: corev1.NodeHostName, Address: r.node}},
		NodeInfo: corev1.NodeSystemInfo{OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
			KubeletVersion: "v0.0.0-podrunner", ContainerRuntimeVersion: "podrunner://0"},
	}
	n, err = r.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("podrunner: node %s status: %w", r.node, err)
	}
	// The API server's TaintNodesByCondition admission taints a new Node
	// not-ready; the node lifecycle controller, which would lift it once
	// the Node is Ready, does not run in the test bed.
	kept := n.Spec.Taints[:0]
	for _, t := range n.Spec.Taints {
		if t.Key != corev1.TaintNodeNotReady && t.Key != corev1.TaintNodeUnreachable {
			kept = append(kept, t)
		}
	}
	n.Spec.Taints = kept
	if _, err := r.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("podrunner: node %s taints: %w", r.node, err)
	}
	r.logf("node %s registered, Ready, not-ready taint lifted (as the node lifecycle controller)", r.node)
	return nil
}

// watch follows the pods bound to the node.
func (r *Runner) watch(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(r.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", r.node).String()
	}))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.seen(ctx, obj) },
		UpdateFunc: func(_, obj any) { r.seen(ctx, obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				r.gone(pod.UID)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("podrunner: %w", err)
	}
	factory.Start(ctx.Done())
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		<-ctx.Done()
		factory.Shutdown()
	}()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		return errors.New("podrunner: the pod informer did not sync")
	}
	return nil
}

// seen starts a new pod, or tells a known one it is being deleted. A
// pod's run stays known after it ends, so a late event never starts it
// again.
func (r *Runner) seen(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if run, ok := r.pods[pod.UID]; ok {
		if pod.DeletionTimestamp != nil {
			run.terminate(ctx, pod)
		}
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		if pod.DeletionTimestamp != nil {
			r.goFinishDeletion(ctx, pod)
		}
		return // finished before this runner started
	}
	run := newPodRun(r, pod)
	r.pods[pod.UID] = run
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		run.run(ctx)
	}()
}

// gone stops a pod deleted from the API server.
func (r *Runner) gone(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if run, ok := r.pods[uid]; ok {
		run.kill()
	}
}

func (r *Runner) goFinishDeletion(ctx context.Context, pod *corev1.Pod) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.finishDeletion(ctx, pod)
	}()
}

// finishDeletion removes a terminating pod whose containers have all
// stopped, as the kubelet does.
func (r *Runner) finishDeletion(ctx context.Context, pod *corev1.Pod) {
	zero := int64(0)
	err := r.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.logf("pod %s/%s: finishing deletion: %v", pod.Namespace, pod.Name, err)
		return
	}
	os.RemoveAll(r.podDir(pod))
}

// CheckPrivileges says, with the fix, why this process cannot run pods: the
// runner chroots into root file systems and bind-mounts volumes, which
// needs root. Tests call it and fail on its error rather than skip.
func CheckPrivileges() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the pod runner needs root (chroot, bind mounts): run the tests as root, e.g. sudo make test")
	}
	return nil
}
