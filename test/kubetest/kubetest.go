// Package kubetest runs a real kube-apiserver and etcd for tests, through
// controller-runtime's envtest. Both binaries are built from the Go module
// proxy by the wrapper modules beside this file (nothing can be downloaded
// where the tests run) and cached; see docs/kubernetes.md.
//
// By default it is an API server and nothing else; WithControllerManager
// and WithScheduler add a real kube-controller-manager (Job, ReplicaSet,
// Deployment, garbage collector, namespace, ServiceAccount and CSR signing
// controllers) and a real kube-scheduler, built and cached the same way,
// for the tests that run workloads (with test/podrunner, the kubelet and
// runtime stand-in). WithKubeadmControllers adds the controllers a kubeadm
// cluster runs that a node join and HostProcess DaemonSets meet (CSR
// approver, bootstrap signer, token cleaner, node IPAM, DaemonSet), and
// InstallWindowsNetwork applies the Calico and kube-proxy HostProcess
// DaemonSets that the kubelet stand-in (test/standin/kubelet) runs as
// stand-ins on a simulated Windows host. There is never a real kubelet or
// network plugin. The work
// of the missing parts that wsu depends on is played explicitly by the
// helpers here, so a test shows which part it stands in for: SignCSR (the
// CSR signer, where kube-controller-manager does not run), CreateNode, SetNodeReady,
// SetNodeAddresses, SetPodRunning and FinishPodDeletion (the kubelet),
// UpdatePDBStatus (the disruption controller), AnnotateNode (the
// OVN-Kubernetes master). RunParts plays
// the CSR signer and the OVN-Kubernetes master continuously, for end-to-end
// joins with a real kubelet stand-in (test/standin/kubelet), and
// InitKubeadm publishes what kubeadm init leaves for joining nodes
// (cluster-info, bootstrap RBAC, the kubelet-config, kubeadm-config and
// kube-proxy uploads, the kube-dns Service).
//
// The API server is set up as a kubeadm cluster's is where a join depends
// on it: the signer's CA is its client CA (so bootstrapped kubelet
// certificates authenticate), bootstrap tokens authenticate, and the Node
// authorizer and NodeRestriction admission confine node identities.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// Cluster is a running control plane.
type Cluster struct {
	// Config is the admin's (group system:masters).
	Config *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// Kubeconfig is the path of an admin kubeconfig file, for code under
	// test that takes one.
	Kubeconfig string

	env        *controlPlane
	opts       options
	components []*component
	dir        string
	signer     *signer
	logf       func(string, ...any)
	stopOnce   sync.Once
	stopErr    error

	partsMu      sync.Mutex
	partsRunning bool
	partEvents   []PartEvent
}

// Start returns a fresh cluster, stopped when the test ends. The first use
// on a machine builds the binaries (see Binaries).
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c, err := New(context.Background(), t.Logf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("kubetest: stop: %v", err)
		}
	})
	return c
}

// New starts a cluster that the caller stops; for a cluster shared by the
// tests of a package (start it lazily, stop it in TestMain). logf receives
// build progress and what the helpers play.
func New(ctx context.Context, logf func(string, ...any), opts ...Option) (*Cluster, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bins, err := Binaries(ctx, logf, o.binaries()...)
	if err != nil {
		return nil, err
	}
	sig, err := newSigner()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	c := &Cluster{
		env:    newControlPlane(bins[Etcd], bins[KubeAPIServer], sig, o.controllerManager),
		opts:   o,
		dir:    dir,
		signer: sig,
		logf:   logf,
	}
	start := time.Now()
	cfg, err := c.env.start()
	if err != nil {
		_ = c.env.stop()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("kubetest: starting etcd and kube-apiserver (%s, %s): %w", bins[Etcd], bins[KubeAPIServer], err)
	}
	logf("kubetest: control plane up in %s at %s", time.Since(start).Round(10*time.Millisecond), cfg.Host)
	c.Config = cfg
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		c.Stop()
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	c.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, c.env.kubeconfig(), 0o600); err != nil {
		c.Stop()
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	if err := c.waitKubernetesService(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.startComponents(ctx, bins, o); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// waitKubernetesService waits for the Service default/kubernetes, which
// the API server's own controller creates shortly after it serves: every
// cluster has it, and code under test reads the cluster's addresses from
// it (the CSR checks), so the bed is up only once it exists.
func (c *Cluster) waitKubernetesService(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Services(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("kubetest: the Service default/kubernetes never appeared: %w", err)
	}
	return nil
}

// Stop stops the API server, then etcd (the other order hangs the API
// server), and removes the cluster's files. It is safe to call twice.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		start := time.Now()
		c.stopErr = errors.Join(c.stopComponents(), c.env.stop())
		c.logf("kubetest: control plane stopped in %s", time.Since(start).Round(10*time.Millisecond))
		os.RemoveAll(c.dir)
	})
	return c.stopErr
}

// User returns the path of a kubeconfig authenticating as name in groups,
// for checking what a role lets its holder do. The user has no rights until
// something binds a role to it.
func (c *Cluster) User(name string, groups ...string) (string, error) {
	kc, err := c.env.addUser(name, groups)
	if err != nil {
		return "", fmt.Errorf("kubetest: adding user %s: %w", name, err)
	}
	f, err := os.CreateTemp(c.dir, name+"-*.kubeconfig")
	if err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(kc); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	return f.Name(), f.Close()
}

// InstallCRDs creates CRDs and waits until they are served.
func (c *Cluster) InstallCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) error {
	if err := installCRDs(c.Config, crds, nil); err != nil {
		return fmt.Errorf("kubetest: installing CRDs: %w", err)
	}
	return nil
}

// InstallCRDFiles creates the CRDs in YAML or JSON files (or directories of
// them; a file may hold several documents) and waits until they are served.
func (c *Cluster) InstallCRDFiles(paths ...string) error {
	if err := installCRDs(c.Config, nil, paths); err != nil {
		return fmt.Errorf("kubetest: installing CRDs from %v: %w", paths, err)
	}
	return nil
}

// CreateNode registers a Node as a kubelet does on first start. Like a new
// node, it is NotReady until SetNodeReady.
func (c *Cluster) CreateNode(ctx context.Context, name string, labels map[string]string) (*corev1.Node, error) {
	c.logf("kubetest: as the kubelet: registering node %s", name)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	n, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubetest: registering node %s: %w", name, err)
	}
	return n, c.setNodeCondition(ctx, name, corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready")
}

// SetNodeReady reports the node Ready, as its kubelet does once the runtime
// and network are up.
func (c *Cluster) SetNodeReady(ctx context.Context, name string) error {
	c.logf("kubetest: as the kubelet: node %s is Ready", name)
	return c.setNodeCondition(ctx, name, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
}

func (c *Cluster) setNodeCondition(ctx context.Context, name string, status corev1.ConditionStatus, reason, msg string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason, Message: msg,
			LastHeartbeatTime: now, LastTransitionTime: now}
		found := false
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i], found = cond, true
			}
		}
		if !found {
			n.Status.Conditions = append(n.Status.Conditions, cond)
		}
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubetest: setting node %s %s=%s: %w", name, corev1.NodeReady, status, err)
	}
	return nil
}

// AnnotateNode sets a node annotation, as the OVN-Kubernetes master does
// for k8s.ovn.org/hybrid-overlay-node-subnet once it has allocated one.
func (c *Cluster) AnnotateNode(ctx context.Context, name, key, value string) error {
	c.logf("kubetest: as the OVN-Kubernetes master: annotating node %s %s=%s", name, key, value)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)
	_, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("kubetest: annotating node %s: %w", name, err)
	}
	return nil
}

// SetPodRunning marks a pod Running, as the kubelet of the node it is bound
// to would after starting its containers.
func (c *Cluster) SetPodRunning(ctx context.Context, namespace, name string) error {
	c.logf("kubetest: as the kubelet: pod %s/%s is Running", namespace, name)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		_, err = c.Client.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("kubetest: setting pod %s/%s Running: %w", namespace, name, err)
	}
	return nil
}

// EnsureNamespace creates a namespace unless it exists. Deleting one never
// completes here (no namespace controller), so tests use fresh names.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubetest: creating namespace %s: %w", name, err)
	}
	return nil
}

// FinishPodDeletion removes a terminating pod for good, as its kubelet does
// once the containers have stopped. Without a kubelet, a bound pod deleted
// with a grace period stays Terminating forever.
func (c *Cluster) FinishPodDeletion(ctx context.Context, namespace, name string) error {
	c.logf("kubetest: as the kubelet: containers of pod %s/%s stopped, removing it", namespace, name)
	zero := int64(0)
	err := c.Client.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubetest: removing pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// UpdatePDBStatus computes a PodDisruptionBudget's status from the pods it
// selects, as kube-controller-manager's disruption controller does; without
// it the Eviction API refuses every eviction the budget covers ("still
// being processed"). It counts Ready pods that are not being deleted and
// supports integer minAvailable and maxUnavailable.
func (c *Cluster) UpdatePDBStatus(ctx context.Context, namespace, name string) error {
	pdbs := c.Client.PolicyV1().PodDisruptionBudgets(namespace)
	pdb, err := pdbs.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return fmt.Errorf("kubetest: PDB %s/%s: %w", namespace, name, err)
	}
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	var healthy int32
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				healthy++
			}
		}
	}
	expected := int32(len(pods.Items))
	var desired int32
	switch {
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.Type == intstr.Int:
		desired = pdb.Spec.MinAvailable.IntVal
	case pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.Type == intstr.Int:
		desired = max(0, expected-pdb.Spec.MaxUnavailable.IntVal)
	default:
		return fmt.Errorf("kubetest: PDB %s/%s: only integer minAvailable or maxUnavailable is supported", namespace, name)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: pdb.Generation,
		CurrentHealthy:     healthy,
		DesiredHealthy:     desired,
		ExpectedPods:       expected,
		DisruptionsAllowed: max(0, healthy-desired),
	}
	c.logf("kubetest: as the disruption controller: PDB %s/%s allows %d disruptions (%d healthy, %d needed)",
		namespace, name, pdb.Status.DisruptionsAllowed, healthy, desired)
	if _, err := pdbs.UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubetest: PDB %s/%s status: %w", namespace, name, err)
	}
	return nil
}
