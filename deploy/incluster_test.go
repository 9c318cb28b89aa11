//go:build linux

package deploy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/build/image"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/harness"
	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/test/podrunner"
)

// The names the test's overlays give the shipped images, as an admin's
// `kustomize edit set image ghcr.io/wsu-project/wsu=…` would.
const (
	testImage        = "test.local/wsu:deploy-test"
	testPayloadImage = "test.local/wsu-payload:deploy-test"
)

// TestShipped (issue 13, tests 2 and 3) runs what deploy/ ships, from the
// image `make image` builds (the same code path, build/image, built here),
// on a real kube-apiserver with the real kube-controller-manager and
// kube-scheduler, its pods run by the pod runner (the kubelet stand-in):
//
//   - the controller Deployment of the kubernetes overlay, under its own
//     ServiceAccount and RBAC (its projected token, real authorization),
//     joins the simulated host the BYOH ConfigMap lists: the instance ends
//     Joined and NodeReady, the Node Ready;
//   - the example join Job (`wsu apply join -i k8s://wsu-system/windows-instances`)
//     joins another bed's simulated host, checking its host key against the
//     wsu-known-hosts ConfigMap: with another key there for the host's
//     address the Job fails on the mismatch and nothing is joined; with the
//     host's key, run again, it joins and the Node is Ready.
//
// In both, the payload reaches the pod as the manifests say: an init
// container from a payload image (`make payload-image`'s code path, from
// the harness's payload) copies it into an emptyDir, verifying it.
//
// What the test's own overlay adds on top of deploy/'s, as a site's
// overlay would: the image names, the simulated host's inventory variables
// (--host-var: its sshd's port, the simulated agent's path and arguments),
// the network the test bed plays (--var=network=ovn-hybrid),
// and, for the Deployment, its metrics and probe ports on 127.0.0.1:0 —
// the pod runner shares the host's network, where :8443 may be taken.
func TestShipped(t *testing.T) {
	require.NoError(t, podrunner.CheckPrivileges())
	imgs := buildShippedImage(t)
	t.Run("controller Deployment joins the BYOH host", func(t *testing.T) { testDeployment(t, imgs, kustomizeInstall) })
	t.Run("controller Deployment from the Helm chart joins the BYOH host", func(t *testing.T) { testDeployment(t, imgs, helmInstall) })
	t.Run("join Job joins the BYOH host", func(t *testing.T) { testJoinJob(t, imgs) })
}

// shippedImage is the wsu image, built as make image builds it.
type shippedImage struct {
	img     v1.Image
	archive string
	wsu     string // the image's static wsu, also the harness's
	meta    image.Meta
}

func buildShippedImage(t *testing.T) shippedImage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root, err := harness.ModuleRoot()
	require.NoError(t, err)
	dir := t.TempDir()
	s := shippedImage{
		archive: filepath.Join(dir, "wsu-image.tar"),
		wsu:     filepath.Join(dir, "context", image.CtxWSU),
		meta:    image.Meta{Version: "v0.0.0-deploy-test", Revision: "deploy-test", Created: time.Unix(0, 0).UTC()},
	}
	t.Log("building the wsu image (build/image, as make image)")
	require.NoError(t, image.Stage(ctx, filepath.Join(dir, "context"), image.StageOptions{Repo: root, Version: s.meta.Version}))
	s.img, err = image.Build(filepath.Join(dir, "context"), s.meta)
	require.NoError(t, err)
	_, err = image.WriteArchive(s.archive, s.img, []string{"localhost/wsu:latest"}, s.meta.Created)
	require.NoError(t, err)
	return s
}

// shippedBed is one simulated host and a cluster with the pod runner
// running the shipped images.
type shippedBed struct {
	env    *harness.Env
	runner *podrunner.Runner
	client crclient.WithWatch
	host   *harness.Host
	// address is the host's BYOH ConfigMap key: where its sshd listens.
	address string
}

func startShippedBed(t *testing.T, imgs shippedImage) *shippedBed {
	t.Helper()
	ctx := context.Background()
	env, err := harness.Start(ctx, harness.Options{Hosts: 1, WSU: imgs.wsu, Logf: t.Logf,
		Cluster: []kubetest.Option{kubetest.WithControllerManager(), kubetest.WithScheduler()}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, env.Close()) })

	payloadImg, err := image.BuildPayload(imgs.img, env.PayloadDir, imgs.meta)
	require.NoError(t, err, "make payload-image's code path, from the harness's payload")
	payloadArchive := filepath.Join(t.TempDir(), "wsu-payload-image.tar")
	_, err = image.WriteArchive(payloadArchive, payloadImg, []string{"localhost/wsu-payload:latest"}, imgs.meta.Created)
	require.NoError(t, err)

	runner, err := podrunner.Start(ctx, podrunner.Options{Config: env.Cluster.Config, Logf: t.Logf,
		Images: map[string]string{testImage: imgs.archive, testPayloadImage: payloadArchive}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, runner.Stop()) })

	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c, err := crclient.NewWithWatch(env.Cluster.Config, crclient.Options{Scheme: scheme})
	require.NoError(t, err)
	b := &shippedBed{env: env, runner: runner, client: c, host: env.Hosts[0]}
	hv := b.hostVars(t)
	b.address = hv["ansible_host"]
	require.NotEmpty(t, b.address)
	return b
}

// hostVars are the inventory variables the simulated host needs beyond
// its BYOH entry, as the controller tests give them.
func (b *shippedBed) hostVars(t *testing.T) map[string]string {
	t.Helper()
	hv, err := b.env.InstanceHostVars(b.host)
	require.NoError(t, err)
	return hv
}

// hostVarArgs are the host's variables as --host-var options, except its
// address, which is the BYOH ConfigMap's key.
func (b *shippedBed) hostVarArgs(t *testing.T) []string {
	hv := b.hostVars(t)
	delete(hv, "ansible_host")
	keys := make([]string, 0, len(hv))
	for k := range hv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, "--host-var="+k+"="+hv[k])
	}
	// The test bed plays OVN-Kubernetes' hybrid overlay, not a CNI
	// DaemonSet: the site's overlay says so, as a site on such a cluster
	// would. kube-proxy keeps the kubelet's identity: the shipped RBAC
	// does not grant the opt-in rights its own identity needs
	// (deploy/rbac/kubeadm-kube-proxy.yaml), and this bed's kube-proxy
	// service stand-in does not talk to the API.
	return append(out, "--var=network="+harness.NetworkOVNHybrid, "--var=kube_proxy_identity=kubelet")
}

// patchOp is one JSON patch operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// overlayPatch is a kustomization's patch of one object.
type overlayPatch struct {
	kind, name string
	ops        []patchOp
}

// render writes a site's kustomization over deploy/'s overlays (the given
// directories, relative to deploy/): the test's image names and patches,
// and renders it as kubectl apply -k would.
func render(t *testing.T, overlays []string, patches ...overlayPatch) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	k := map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"images": []map[string]string{
			{"name": ImageRepository, "newName": strings.Split(testImage, ":")[0], "newTag": strings.Split(testImage, ":")[1]},
			{"name": PayloadImageRepository, "newName": strings.Split(testPayloadImage, ":")[0], "newTag": strings.Split(testPayloadImage, ":")[1]},
		},
	}
	var resources []string
	for _, o := range overlays {
		abs, err := filepath.Abs(o)
		require.NoError(t, err)
		rel, err := filepath.Rel(dir, abs)
		require.NoError(t, err)
		resources = append(resources, rel)
	}
	k["resources"] = resources
	var ps []map[string]any
	for _, p := range patches {
		ops, err := json.Marshal(p.ops)
		require.NoError(t, err)
		ps = append(ps, map[string]any{"target": map[string]string{"kind": p.kind, "name": p.name}, "patch": string(ops)})
	}
	k["patches"] = ps
	data, err := yaml.Marshal(k)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), data, 0o644))
	out, err := Render(dir, "a test overlay")
	require.NoError(t, err)
	return decodeObjects(t, out)
}

// install applies the objects server-side as the admin: the namespace
// first, then what must be there before wsu's pods start (the BYOH
// ConfigMap, the key Secret, more objects), then the rest.
func (b *shippedBed) install(t *testing.T, objs []*unstructured.Unstructured, before ...crclient.Object) {
	t.Helper()
	ctx := context.Background()
	a := newApplier(t, b.env.Cluster.Config)
	var first, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Namespace" || o.GetKind() == "CustomResourceDefinition" {
			first = append(first, o)
		} else {
			rest = append(rest, o)
		}
	}
	a.applyAll(ctx, t, first)
	key, err := os.ReadFile(b.env.KeyFile)
	require.NoError(t, err)
	before = append(before,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret, Namespace: KubernetesNamespace},
			Data: map[string][]byte{kubeinv.KeySecretKey: key}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "windows-instances", Namespace: KubernetesNamespace},
			Data: map[string]string{b.address: "username=" + b.env.SSHUser}})
	for _, o := range before {
		require.NoError(t, b.client.Create(ctx, o))
	}
	a.applyAll(ctx, t, rest)
}

// kustomizeInstall is the kubernetes overlay under a site's
// kustomization: the test's images, the controller's ports on
// 127.0.0.1:0 and the host's variables.
func kustomizeInstall(t *testing.T, b *shippedBed) []*unstructured.Unstructured {
	args := "/spec/template/spec/containers/0/args"
	ops := []patchOp{
		{Op: "test", Path: args + "/2", Value: "--metrics-bind-address=:8443"},
		{Op: "replace", Path: args + "/2", Value: "--metrics-bind-address=127.0.0.1:0"},
		{Op: "test", Path: args + "/3", Value: "--health-probe-bind-address=:8081"},
		{Op: "replace", Path: args + "/3", Value: "--health-probe-bind-address=127.0.0.1:0"},
	}
	for _, a := range b.hostVarArgs(t) {
		ops = append(ops, patchOp{Op: "add", Path: args + "/-", Value: a})
	}
	return render(t, []string{"overlays/kubernetes"}, overlayPatch{"Deployment", "wsu-controller", ops})
}

// helmInstall is the Helm chart rendered by the real helm with a site's
// values file saying the same as kustomizeInstall's kustomization.
func helmInstall(t *testing.T, b *shippedBed) []*unstructured.Unstructured {
	image := func(ref string) map[string]string {
		repo, tag, _ := strings.Cut(ref, ":")
		registry, repo, _ := strings.Cut(repo, "/")
		return map[string]string{"registry": registry, "repository": repo, "tag": tag}
	}
	values := map[string]any{
		"namespace":    map[string]any{"create": true},
		"image":        image(testImage),
		"payloadImage": image(testPayloadImage),
		"controller": map[string]any{
			"metricsBindAddress":     "127.0.0.1:0",
			"healthProbeBindAddress": "127.0.0.1:0",
			"extraArgs":              b.hostVarArgs(t),
		},
	}
	data, err := yaml.Marshal(values)
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	return decodeObjects(t, runHelm(t, "template", "wsu", ChartDir, "--namespace", KubernetesNamespace, "--values", file))
}

func testDeployment(t *testing.T, imgs shippedImage, objects func(*testing.T, *shippedBed) []*unstructured.Unstructured) {
	b := startShippedBed(t, imgs)
	ctx := context.Background()
	objs := objects(t, b)
	b.install(t, objs)

	name := strings.ToLower(b.address) // the instance the ConfigMap entry becomes
	b.waitFor(t, 8*time.Minute, "the BYOH host joined by the controller's pod, its Node Ready", func() (bool, string) {
		wi := &wsuv1.WindowsInstance{}
		if err := b.client.Get(ctx, crclient.ObjectKey{Namespace: KubernetesNamespace, Name: name}, wi); err != nil {
			return false, err.Error()
		}
		st, _ := json.Marshal(wi.Status)
		return wi.Status.Phase == wsuv1.PhaseJoined && meta.IsStatusConditionTrue(wi.Status.Conditions, wsuv1.ConditionNodeReady) &&
			b.nodeReady(t), string(st)
	})
	wi := &wsuv1.WindowsInstance{}
	require.NoError(t, b.client.Get(ctx, crclient.ObjectKey{Namespace: KubernetesNamespace, Name: name}, wi))
	assert.Equal(t, wsuv1.SourceConfigMap, wi.Labels[wsuv1.SourceLabel])
	assert.NotEmpty(t, wi.Status.Identity.HostKey, "the host key trusted on first use is pinned")
	require.NotNil(t, wi.Status.LastApply)
	assert.Equal(t, "Succeeded", wi.Status.LastApply.Result)
	assert.Equal(t, b.host.NodeName, wi.Status.NodeName)

	pods := b.pods(t, "app.kubernetes.io/component=controller")
	require.Len(t, pods, 1)
	pod := pods[0]
	assert.Equal(t, "wsu-controller", pod.Spec.ServiceAccountName, "the controller runs as its own ServiceAccount")
	assert.Equal(t, b.runner.NodeName(), pod.Spec.NodeName, "bound to the Linux node by kube-scheduler")
	assert.Equal(t, testImage, pod.Spec.Containers[0].Image)
	assertInitCompleted(t, pod)

	lease := &unstructured.Unstructured{}
	lease.SetAPIVersion("coordination.k8s.io/v1")
	lease.SetKind("Lease")
	require.NoError(t, b.client.Get(ctx, crclient.ObjectKey{Namespace: KubernetesNamespace, Name: "wsu-controller.wsu.dev"}, lease),
		"leader election took its Lease")
	// controller-runtime's identity is the host name and a UUID: under the
	// pod runner the machine's, not the pod's (no UTS namespace).
	holder, _, _ := unstructured.NestedString(lease.Object, "spec", "holderIdentity")
	assert.NotEmpty(t, holder, "the Lease is held")
}

func testJoinJob(t *testing.T, imgs shippedImage) {
	b := startShippedBed(t, imgs)
	ctx := context.Background()
	var ops []patchOp
	for _, a := range b.hostVarArgs(t) {
		ops = append(ops, patchOp{Op: "add", Path: "/spec/template/spec/containers/0/args/-", Value: a})
	}
	// The Job alone: the controller must not join the same hosts
	// (docs/install.md), so the site scales it to none.
	noController := overlayPatch{"Deployment", "wsu-controller", []patchOp{{Op: "replace", Path: "/spec/replicas", Value: 0}}}
	objs := render(t, []string{"overlays/kubernetes", "overlays/kubernetes/join-job"},
		overlayPatch{"Job", "wsu-join", ops}, noController)

	// First with another key for the host's address in wsu-known-hosts:
	// the host is refused, nothing is joined.
	knownHosts := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wsu-known-hosts", Namespace: KubernetesNamespace},
		Data: map[string]string{"known_hosts": b.otherKnownHosts(t)}}
	b.install(t, objs, knownHosts)
	j := b.waitJob(t)
	require.True(t, finished(j, batchv1.JobFailed), "a host presenting another key than known_hosts holds is refused")
	pod := b.onlyPod(t, "app.kubernetes.io/component=join")
	log, err := os.ReadFile(b.runner.LogPath(pod, "wsu"))
	require.NoError(t, err)
	assert.Contains(t, string(log), "host key mismatch", "refused for its host key")
	_, err = b.env.Cluster.Client.CoreV1().Nodes().Get(ctx, b.host.NodeName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Node registered")

	// The admin puts the host's key (ssh-keyscan -p PORT ADDRESS) in the
	// ConfigMap and runs the Job again.
	knownHosts.Data = map[string]string{"known_hosts": strings.Join(b.env.SSHD.KnownHostsLines(), "\n") + "\n"}
	require.NoError(t, b.client.Update(ctx, knownHosts))
	b.rerunJob(t, objs)
	j = b.waitJob(t)
	require.True(t, finished(j, batchv1.JobComplete), "the join Job failed:\n%s", b.podLogs(t))
	b.waitFor(t, 3*time.Minute, "the Node Ready", func() (bool, string) { return b.nodeReady(t), "" })

	pod = b.onlyPod(t, "app.kubernetes.io/component=join")
	assert.Equal(t, "wsu-join", pod.Spec.ServiceAccountName, "the Job runs as its own ServiceAccount")
	assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	assertInitCompleted(t, pod)
	log, err = os.ReadFile(b.runner.LogPath(pod, "wsu"))
	require.NoError(t, err)
	assert.Contains(t, string(log), b.address, "the log is the run's output")
	assert.NotContains(t, string(log), "PRIVATE KEY")
	assert.Empty(t, b.pods(t, "app.kubernetes.io/component=controller"), "no controller pod ran beside the Job")
}

// otherKnownHosts is a known_hosts file naming the host's sshd address
// with a key it does not have.
func (b *shippedBed) otherKnownHosts(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	k, err := gossh.NewPublicKey(pub)
	require.NoError(t, err)
	addr := net.JoinHostPort(b.env.SSHD.Host, strconv.Itoa(b.env.SSHD.Port))
	return knownhosts.Line([]string{knownhosts.Normalize(addr)}, k) + "\n"
}

// waitJob waits for the join Job to finish, either way.
func (b *shippedBed) waitJob(t *testing.T) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{}
	b.waitFor(t, 8*time.Minute, "the join Job finished", func() (bool, string) {
		if err := b.client.Get(context.Background(), crclient.ObjectKey{Namespace: KubernetesNamespace, Name: "wsu-join"}, j); err != nil {
			return false, err.Error()
		}
		st, _ := json.Marshal(j.Status)
		return finished(j, batchv1.JobComplete) || finished(j, batchv1.JobFailed), string(st)
	})
	return j
}

// rerunJob deletes the finished Job with its pod, as `kubectl delete job`
// does, and applies it again.
func (b *shippedBed) rerunJob(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	fg := metav1.DeletePropagationForeground
	require.NoError(t, b.env.Cluster.Client.BatchV1().Jobs(KubernetesNamespace).Delete(ctx, "wsu-join", metav1.DeleteOptions{PropagationPolicy: &fg}))
	b.waitFor(t, 3*time.Minute, "the Job and its pod gone", func() (bool, string) {
		_, err := b.env.Cluster.Client.BatchV1().Jobs(KubernetesNamespace).Get(ctx, "wsu-join", metav1.GetOptions{})
		pods := b.pods(t, "app.kubernetes.io/component=join")
		return apierrors.IsNotFound(err) && len(pods) == 0, fmt.Sprintf("Job: %v, %d pods", err, len(pods))
	})
	var job []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Job" {
			job = append(job, o)
		}
	}
	require.Len(t, job, 1)
	newApplier(t, b.env.Cluster.Config).applyAll(ctx, t, job)
}

func (b *shippedBed) onlyPod(t *testing.T, selector string) *corev1.Pod {
	t.Helper()
	pods := b.pods(t, selector)
	require.Len(t, pods, 1, selector)
	return pods[0]
}

func assertInitCompleted(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	require.Len(t, pod.Status.InitContainerStatuses, 1)
	init := pod.Status.InitContainerStatuses[0]
	assert.Equal(t, "payload", init.Name)
	require.NotNil(t, init.State.Terminated, "the payload init container ran to its end")
	assert.Equal(t, int32(0), init.State.Terminated.ExitCode, "the payload copied and verified")
}

func finished(j *batchv1.Job, ct batchv1.JobConditionType) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == ct && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func nodeCondition(n *corev1.Node, ct corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == ct {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

func (b *shippedBed) nodeReady(t *testing.T) bool {
	n, err := b.env.Cluster.Client.CoreV1().Nodes().Get(context.Background(), b.host.NodeName, metav1.GetOptions{})
	return err == nil && nodeCondition(n, corev1.NodeReady) == corev1.ConditionTrue
}

func (b *shippedBed) pods(t *testing.T, selector string) []*corev1.Pod {
	t.Helper()
	list, err := b.env.Cluster.Client.CoreV1().Pods(KubernetesNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	var out []*corev1.Pod
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

// podLogs are the ends of every wsu pod's container logs, for a failure.
func (b *shippedBed) podLogs(t *testing.T) string {
	var s strings.Builder
	for _, p := range b.pods(t, "app.kubernetes.io/name=wsu") {
		fmt.Fprintf(&s, "pod %s: %s\n", p.Name, p.Status.Phase)
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			data, _ := os.ReadFile(b.runner.LogPath(p, c.Name))
			if len(data) > 6000 {
				data = data[len(data)-6000:]
			}
			fmt.Fprintf(&s, "--- %s/%s:\n%s\n", p.Name, c.Name, data)
		}
	}
	return s.String()
}

// waitFor polls cond until it holds, failing with what was last seen and
// the pods' logs.
func (b *shippedBed) waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		ok, seen := cond()
		if ok {
			return
		}
		last = seen
		time.Sleep(time.Second)
	}
	t.Fatalf("%s: not within %s; last seen: %s\n%s", what, within, last, b.podLogs(t))
}
