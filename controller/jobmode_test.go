//go:build linux

package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/yaml"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/test/podrunner"
)

// wsuImage is the reference the Job mode test gives its image of wsu.
const wsuImage = "test.local/wsu:job-mode"

// jobServiceAccount is what the Jobs run as, bound to the playbooks' rules
// (deploy/rbac/wsu-cluster-role.yaml): their cluster tasks go through real
// authorization with its in-cluster token.
const jobServiceAccount = "wsu-job"

// controllerServiceAccount is what the controller runs as (impersonated),
// bound to its generated RBAC (deploy/rbac/controller).
const controllerServiceAccount = "wsu-controller"

// TestJobMode (issue 13, test 4): with --run-mode=job, three instances
// become Jobs run by a real Job controller from wsu's image (pods bound by
// a real kube-scheduler, run by the pod runner stand-in), and three Ready
// Nodes; an unreachable host's failed Jobs are retried by the controller
// with backoff (backoffLimit 0: the Job controller never retries);
// finished Jobs and their pods are cleaned up by the TTL controller and
// the garbage collector. The controller runs as its ServiceAccount with its
// generated RBAC, which grants no Secret write, and writes none.
func TestJobMode(t *testing.T) {
	require.NoError(t, podrunner.CheckPrivileges())
	ctx, cancel := context.WithCancel(context.Background())
	env, err := harness.Start(ctx, harness.Options{Hosts: 3, Logf: t.Logf,
		Cluster: []kubetest.Option{kubetest.WithControllerManager(), kubetest.WithScheduler()}})
	require.NoError(t, err)
	t.Cleanup(func() { env.Close() })
	cs := env.Cluster.Client
	crd, err := filepath.Abs("../deploy/crd/wsu.dev_windowsinstances.yaml")
	require.NoError(t, err)
	require.NoError(t, env.Cluster.InstallCRDFiles(crd))
	require.NoError(t, env.Cluster.EnsureNamespace(ctx, ns))
	key, err := os.ReadFile(env.KeyFile)
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: key},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	bindRBAC(t, env.Cluster, jobServiceAccount, "../deploy/rbac/wsu-cluster-role.yaml")
	// The controller runs as its own ServiceAccount with its generated
	// RBAC (real authorization): Job mode needs no Secret written. The
	// cluster CA's watch (clustersettings.go): every overlay binds
	// wsu-cluster-info to the controller, in Job mode too.
	asController := asControllerSA(t, env.Cluster, grantClusterInfo, grantJobMode)

	img := wsuImageFile(t, env)
	runner, err := podrunner.Start(ctx, podrunner.Options{Config: env.Cluster.Config, Images: map[string]string{wsuImage: img}, Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, runner.Stop()) })
	jobs := recordJobs(t, env)

	// The Jobs' playbooks act on the cluster they run in (in-cluster
	// config): the var file names no kubeconfig. The bed plays OVN-Kubernetes' hybrid
	// overlay (network ovn-hybrid), and kube-proxy keeps the kubelet's
	// identity: wsu-cluster-role.yaml lacks the opt-in rights of its own one
	// (deploy/rbac/kubeadm-kube-proxy.yaml).
	varFile := filepath.Join(t.TempDir(), "job.wsuvars")
	require.NoError(t, os.WriteFile(varFile, []byte(fmt.Sprintf("cluster_flavour = \"kubeadm\"\nnetwork = \"ovn-hybrid\"\nkube_proxy_identity = \"kubelet\"\npayload_dir = %q\ncsr_timeout = 120\nready_timeout = 120\n", env.PayloadDir)), 0o644))
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	opts := controller.Options{
		Namespace: ns, VarFiles: []string{varFile}, StateDir: t.TempDir(), AddressHostVars: simHostVars(t, env),
		RunMode: run.ModeJob,
		Job: run.JobOptions{Image: wsuImage, ServiceAccount: jobServiceAccount, TTL: 5 * time.Second,
			Template: payloadTemplate(env)},
		NodeReadyCheck: time.Second, Backoff: 2 * time.Second, DriftInterval: time.Hour,
	}
	mo, err := controller.ManagerConfig(opts, controller.ManagerOptions{MetricsAddr: "0", ProbeAddr: "0"})
	require.NoError(t, err)
	skip := true
	mo.Controller = config.Controller{SkipNameValidation: &skip}
	mgr, err := ctrl.NewManager(asController, mo)
	require.NoError(t, err)
	require.NoError(t, controller.Setup(mgr, opts))
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(2 * time.Minute):
			t.Error("the controller did not stop within 2 minutes of its context ending")
		}
	})
	c, err := client.NewWithWatch(env.Cluster.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	b := &bed{env: env, client: c}

	for _, h := range env.Hosts {
		require.NoError(t, c.Create(ctx, b.instance(t, h, wsuv1.ApprovalAuto)))
	}
	gone := b.instance(t, env.Hosts[0], wsuv1.ApprovalAuto)
	gone.Name, gone.Spec.Address = "win-gone", "127.0.0.1"
	gone.Spec.HostVars["ansible_port"] = fmt.Sprint(closedPort(t))
	require.NoError(t, c.Create(ctx, gone))

	for _, h := range env.Hosts {
		eventually(t, 5*time.Minute, h.Name+" joined through Jobs, its Node Ready", func() (bool, string) {
			wi := b.get(t, h.Name)
			return wi != nil && wi.Status.Phase == wsuv1.PhaseJoined &&
				meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady), describe(wi) + "\n" + jobs.describe()
		})
		n, err := cs.CoreV1().Nodes().Get(ctx, h.NodeName, metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, nodeReady(n), "Node %s is Ready", h.NodeName)
		wi := b.get(t, h.Name)
		assert.NotEmpty(t, wi.Status.Identity.HostKey, "the host key a Job trusted on first use is pinned")
		assert.NotNil(t, wi.Status.LastApply)
		assert.Equal(t, "Succeeded", wi.Status.LastApply.Result)
	}

	t.Run("the kubelets' certificates came from kube-controller-manager's signer", func(t *testing.T) {
		for _, e := range env.Cluster.PartEvents() {
			assert.NotEqual(t, kubetest.PartCSRSigner, e.Part, "the CSR-signer stand-in signed %s", e.Object)
		}
		csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		signed := 0
		for _, csr := range csrs.Items {
			if len(csr.Status.Certificate) > 0 {
				signed++
			}
		}
		assert.GreaterOrEqual(t, signed, len(env.Hosts), "at least a client certificate per node")
	})

	t.Run("each run was a Job of its instance", func(t *testing.T) {
		for _, h := range env.Hosts {
			modes := map[string]int{}
			for _, j := range jobs.of(h.Name) {
				modes[j.Labels[run.JobModeLabel]]++
				require.Len(t, j.OwnerReferences, 1)
				owner := j.OwnerReferences[0]
				assert.Equal(t, "WindowsInstance", owner.Kind)
				assert.Equal(t, h.Name, owner.Name)
				assert.True(t, *owner.Controller)
				assert.Equal(t, int32(0), *j.Spec.BackoffLimit, "retries are the controller's")
				assert.Equal(t, int32(5), *j.Spec.TTLSecondsAfterFinished)
				assert.Equal(t, wsuImage, j.Spec.Template.Spec.Containers[0].Image)
				assert.Equal(t, jobServiceAccount, j.Spec.Template.Spec.ServiceAccountName)
				assert.Equal(t, int64(run.DefaultJobActiveDeadline/time.Second), *j.Spec.ActiveDeadlineSeconds)
				for _, c := range append(append([]corev1.Container{}, j.Spec.Template.Spec.InitContainers...), j.Spec.Template.Spec.Containers...) {
					assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, "%s: restricted by the controller", c.Name)
					assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, c.Name)
				}
			}
			assert.GreaterOrEqual(t, modes["plan"], 1, "%s: a plan Job", h.Name)
			assert.GreaterOrEqual(t, modes["apply"], 1, "%s: an apply Job", h.Name)
		}
	})

	t.Run("no apply saw its payload change under it", func(t *testing.T) {
		for _, h := range env.Hosts {
			for _, e := range b.events(t, h.Name, controller.ReasonApplyFailed) {
				assert.NotContains(t, e.Message, "changed while it was being copied", "%s: %s", h.Name, jobs.describe())
			}
		}
	})

	t.Run("a failed Job is retried by the controller with backoff", func(t *testing.T) {
		eventually(t, 3*time.Minute, "the unreachable instance failed twice", func() (bool, string) {
			wi := b.get(t, "win-gone")
			return wi != nil && wi.Status.Failures >= 2, describe(wi)
		})
		wi := b.get(t, "win-gone")
		reach := meta.FindStatusCondition(wi.Status.Conditions, wsuv1.ConditionReachable)
		require.NotNil(t, reach)
		assert.Equal(t, metav1.ConditionFalse, reach.Status)
		assert.Equal(t, controller.ReasonUnreachable, reach.Reason)
		assert.NotNil(t, wi.Status.NextRetry)
		failed := 0
		for _, j := range jobs.of("win-gone") {
			if finishedAs(j, batchv1.JobFailed) {
				failed++
			}
		}
		assert.GreaterOrEqual(t, failed, 2, "each attempt was a new Job that failed: %s", jobs.describe())
	})

	t.Run("finished Jobs and their pods are cleaned up", func(t *testing.T) {
		for _, h := range env.Hosts {
			eventually(t, 2*time.Minute, h.Name+"'s Jobs and pods gone", func() (bool, string) {
				sel := run.JobInstanceLabel + "=" + h.Name
				js, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
				require.NoError(t, err)
				ps, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
				require.NoError(t, err)
				return len(js.Items)+len(ps.Items) == 0, fmt.Sprintf("%d Jobs, %d pods", len(js.Items), len(ps.Items))
			})
		}
	})

	t.Run("no Secret was written", func(t *testing.T) {
		ss, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var names []string
		for _, s := range ss.Items {
			names = append(names, s.Name)
		}
		assert.Equal(t, []string{kubeinv.KeySecret}, names, "the Jobs mount the key Secret by reference; their requests are annotations")
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func finishedAs(j *batchv1.Job, t batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// jobLog remembers every Job seen in the namespace, in its latest state,
// also after the TTL controller deleted it.
type jobLog struct {
	mu   sync.Mutex
	jobs map[string]*batchv1.Job
}

func recordJobs(t *testing.T, env *harness.Env) *jobLog {
	l := &jobLog{jobs: map[string]*batchv1.Job{}}
	f := informers.NewSharedInformerFactoryWithOptions(env.Cluster.Client, 0, informers.WithNamespace(ns))
	inf := f.Batch().V1().Jobs().Informer()
	keep := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			l.mu.Lock()
			l.jobs[j.Name] = j.DeepCopy()
			l.mu.Unlock()
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: keep, UpdateFunc: func(_, obj any) { keep(obj) }})
	require.NoError(t, err)
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced))
	return l
}

func (l *jobLog) of(instance string) []*batchv1.Job {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*batchv1.Job
	for _, j := range l.jobs {
		if j.Labels[run.JobInstanceLabel] == instance {
			out = append(out, j)
		}
	}
	return out
}

func (l *jobLog) describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var lines []string
	for name, j := range l.jobs {
		state := "running"
		switch {
		case finishedAs(j, batchv1.JobComplete):
			state = "complete"
		case finishedAs(j, batchv1.JobFailed):
			state = "failed"
		}
		lines = append(lines, fmt.Sprintf("%s (%s) %s", name, j.Labels[run.JobModeLabel], state))
	}
	sort.Strings(lines)
	return "Jobs: " + strings.Join(lines, ", ")
}

// imagePayload is where the test's image holds the payload.
const imagePayload = "/payload"

// payloadTemplate is the Jobs' pod template (--job-template): the payload
// copied, verified, from the image into an emptyDir at the path the var
// file names by an init container, as deploy/ brings it into the
// controller's pod. Each pod has its own copy, as with a real runtime: the
// pod runner's containers share the image's files as hard links, and a
// pod starting (linking them) changes their ctime under another pod's
// copy of them, which wsu rightly refuses as a source that changed while
// it was copied (the apply Jobs' occasional retries).
func payloadTemplate(env *harness.Env) *corev1.PodTemplateSpec {
	mount := []corev1.VolumeMount{{Name: "payload", MountPath: env.PayloadDir}}
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "payload", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		InitContainers: []corev1.Container{{Name: "payload", Image: wsuImage,
			Args: []string{"payload", "copy", imagePayload, env.PayloadDir}, VolumeMounts: mount}},
		Containers: []corev1.Container{{Name: "base", VolumeMounts: []corev1.VolumeMount{{Name: "payload", MountPath: env.PayloadDir, ReadOnly: true}}}},
	}}
}

// wsuImageFile packs the harness's wsu, its agent beside it, and the
// payload (under imagePayload) into an image whose entrypoint is wsu, run
// as a non-root user, as the shipped image does.
//
// Seam: when `make image` (the image branch) is on main, this test and the
// Deployment and Job-example tests of issue 13 can load bin/'s image
// tarball instead, with the payload from its payload image.
func wsuImageFile(t *testing.T, env *harness.Env) string {
	t.Helper()
	// Static, as the shipped image's: the image has no C library.
	root, err := harness.ModuleRoot()
	require.NoError(t, err)
	// wsu, and wsu-controller, which the run Jobs start (run.JobCommand).
	bin := t.TempDir()
	var files []podrunner.ImageFile
	for _, name := range []string{"wsu", "wsu-controller"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, name), "./cmd/"+name)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "building a static %s: %s", name, out)
		files = append(files, podrunner.ImageFile{Path: "/usr/local/bin/" + name, Source: filepath.Join(bin, name), Mode: 0o755})
	}
	files = append(files, []podrunner.ImageFile{
		{Path: "/usr/local/bin/" + filepath.Base(env.Agent), Source: env.Agent, Mode: 0o755},
	}...)
	err = filepath.WalkDir(env.PayloadDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(env.PayloadDir, p)
		if err != nil {
			return err
		}
		files = append(files, podrunner.ImageFile{Path: path.Join(imagePayload, filepath.ToSlash(rel)), Source: p, Mode: int64(fi.Mode().Perm())})
		return nil
	})
	require.NoError(t, err)
	img := filepath.Join(t.TempDir(), "wsu.tar")
	require.NoError(t, podrunner.WriteImage(img, wsuImage, files, v1.Config{
		Entrypoint: []string{"/usr/local/bin/wsu"},
		Env:        []string{"PATH=/usr/local/bin"},
		User:       "65532:65532",
	}))
	return img
}

// controllerGrant is an RBAC grant of the controller's beyond its generated
// Role, as an install binds it.
type controllerGrant int

const (
	// grantClusterInfo: the wsu-cluster-info Role (the cluster CA's watch,
	// clustersettings.go), which every overlay binds.
	grantClusterInfo controllerGrant = iota
	// grantBYOH: the OpenShift overlay's Roles in WMCO's namespace
	// (deploy/overlays/openshift/byoh.yaml).
	grantBYOH
	// grantJobMode: Job mode's Role (deploy/components/job-mode), bound
	// only with it.
	grantJobMode
)

// asControllerSA binds the controller's ServiceAccount to its generated
// Role (deploy/rbac/controller/role.yaml) and the grants given, and is the
// bed's config impersonating it: the controller as it runs in a cluster,
// with real authorization.
func asControllerSA(t *testing.T, cluster *kubetest.Cluster, grants ...controllerGrant) *rest.Config {
	t.Helper()
	bindRBAC(t, cluster, controllerServiceAccount, "../deploy/rbac/controller/role.yaml")
	for _, g := range grants {
		switch g {
		case grantClusterInfo:
			bindRBAC(t, cluster, controllerServiceAccount, "../deploy/rbac/wsu-cluster-role.yaml", "wsu-cluster-info")
		case grantBYOH:
			bindRBAC(t, cluster, controllerServiceAccount, "../deploy/overlays/openshift/byoh.yaml")
		case grantJobMode:
			bindRBAC(t, cluster, controllerServiceAccount, "../deploy/components/job-mode/rbac.yaml")
		default:
			t.Fatalf("no such grant %d", g)
		}
	}
	return controllerIdentity(t, cluster)
}

// controllerIdentity is the bed's config impersonating the controller's
// ServiceAccount.
func controllerIdentity(t *testing.T, cluster *kubetest.Cluster) *rest.Config {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + controllerServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	return cfg
}

// bindRBAC creates the ServiceAccount sa and binds it to the rules of the
// RBAC file (its Roles in the namespaces this cluster has): the Jobs' to
// deploy/rbac/wsu-cluster-role.yaml, the playbooks' rules; the
// controller's to deploy/rbac/controller/role.yaml, its own.
func bindRBAC(t *testing.T, cluster *kubetest.Cluster, sa, file string, only ...string) {
	t.Helper()
	ctx := context.Background()
	cs := cluster.Client
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var kind struct{ Kind string }
		require.NoError(t, yaml.Unmarshal(doc, &kind))
		switch kind.Kind {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			require.NoError(t, yaml.UnmarshalStrict(doc, &cr))
			if len(only) > 0 && !slices.Contains(only, cr.Name) {
				continue
			}
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, &cr, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err)
			}
			_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: cr.Name + "-" + sa}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		case "Role":
			var r rbacv1.Role
			require.NoError(t, yaml.UnmarshalStrict(doc, &r))
			if len(only) > 0 && !slices.Contains(only, r.Name) {
				continue
			}
			if r.Namespace == "" {
				r.Namespace = ns // a kustomize component's: the install namespace
			}
			if _, err := cs.CoreV1().Namespaces().Get(ctx, r.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				continue // an OpenShift namespace
			}
			_, err := cs.RbacV1().Roles(r.Namespace).Create(ctx, &r, metav1.CreateOptions{})
			if !apierrors.IsAlreadyExists(err) { // bound to another ServiceAccount before
				require.NoError(t, err)
			}
			_, err = cs.RbacV1().RoleBindings(r.Namespace).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: r.Name + "-" + sa}, Subjects: subject,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	require.NoError(t, cluster.AwaitRBAC(ctx), "the authorizer has seen the bindings")
}
