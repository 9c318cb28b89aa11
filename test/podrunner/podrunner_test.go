//go:build linux

package podrunner_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/test/podrunner"
)

const probeImage = "test.local/probe:1"

// probeImageFile builds testdata/probe statically and packs it into an
// image whose entrypoint it is.
func probeImageFile(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "probe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/probe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "building the probe: %s", out)
	img := filepath.Join(dir, "probe.tar")
	require.NoError(t, podrunner.WriteImage(img, probeImage, []podrunner.ImageFile{
		{Path: "/probe", Source: bin, Mode: 0o755},
		{Path: "/etc/motd", Data: []byte("from the image\n")},
	}, v1.Config{Entrypoint: []string{"/probe"}, Env: []string{"PATH=/", "FROM_IMAGE=yes"}}))
	return img
}

// bed is a cluster with kube-controller-manager and kube-scheduler, and a
// pod runner for the probe image.
type bed struct {
	c      *kubetest.Cluster
	runner *podrunner.Runner
	ns     string
}

func startBed(t *testing.T) *bed {
	t.Helper()
	require.NoError(t, podrunner.CheckPrivileges())
	img := probeImageFile(t)
	c := kubetest.Start(t, kubetest.WithControllerManager(), kubetest.WithScheduler())
	ctx := context.Background()
	r, err := podrunner.Start(ctx, podrunner.Options{Config: c.Config, Images: map[string]string{probeImage: img}, Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, r.Stop()) })
	ns := "podrunner"
	require.NoError(t, c.EnsureNamespace(ctx, ns))
	// The ServiceAccount controller (kube-controller-manager) creates the
	// default ServiceAccount; ServiceAccount admission needs it for pods.
	waitFor(t, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
	return &bed{c: c, runner: r, ns: ns}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func waitFor(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, cond)
	require.NoError(t, err, "waiting for %s", what)
}

func (b *bed) waitPod(t *testing.T, name string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := b.c.Client.CoreV1().Pods(b.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return done(p), nil
	})
	require.NoError(t, err, "pod %s: last status %+v", name, pod.Status)
	return pod
}

func TestPodRunner(t *testing.T) {
	b := startBed(t)
	ctx := context.Background()
	cs := b.c.Client
	_, err := cs.CoreV1().ConfigMaps(b.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"},
		Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().Secrets(b.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"password": []byte("s3cret")}}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("init container, volumes, env, user, token; a failure with its message", func(t *testing.T) {
		user := "system:serviceaccount:" + b.ns + ":default"
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "probe"},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Volumes: []corev1.Volume{
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
					{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
					{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				},
				InitContainers: []corev1.Container{{
					Name: "copy", Image: probeImage,
					Args:         []string{"cp", "/config/greeting", "/shared/greeting", "print", "init done"},
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/config"}, {Name: "shared", MountPath: "/shared"}},
				}},
				Containers: []corev1.Container{{
					Name: "main", Image: probeImage,
					Args: []string{
						"expect-file", "/shared/greeting", "hello",
						"expect-file", "/secret/password", "s3cret",
						"expect-file", "/etc/motd", "from the image\n",
						"expect-env", "GREETING", "hello",
						"expect-env", "PASSWORD", "s3cret",
						"expect-env", "POD_NAME", "probe",
						"expect-env", "COMBINED", "hello-probe",
						"expect-env", "FROM_IMAGE", "yes",
						"expect-id", "1000", "1001",
						"whoami-api", user,
						"message", "boom: exit 3",
						"exit", "3",
					},
					Env: []corev1.EnvVar{
						{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "greeting"}}},
						{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "COMBINED", Value: "$(GREETING)-$(POD_NAME)"},
					},
					VolumeMounts: []corev1.VolumeMount{
						{Name: "shared", MountPath: "/shared"},
						{Name: "secret", MountPath: "/secret", ReadOnly: true},
					},
					SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1001)},
				}},
			},
		}
		_, err := cs.CoreV1().Pods(b.ns).Create(ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		got := b.waitPod(t, "probe", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })

		assert.Equal(t, b.runner.NodeName(), got.Spec.NodeName, "bound by kube-scheduler to the runner's node")
		require.Len(t, got.Status.InitContainerStatuses, 1)
		initSt := got.Status.InitContainerStatuses[0].State.Terminated
		require.NotNil(t, initSt)
		assert.Equal(t, int32(0), initSt.ExitCode)
		require.Len(t, got.Status.ContainerStatuses, 1)
		st := got.Status.ContainerStatuses[0].State.Terminated
		require.NotNil(t, st, "main container state: %+v", got.Status.ContainerStatuses[0].State)
		logs, _ := os.ReadFile(b.runner.LogPath(got, "main"))
		assert.Equal(t, int32(3), st.ExitCode, "main's log:\n%s", logs)
		assert.Equal(t, "boom: exit 3", st.Message)
		assert.Equal(t, "Error", st.Reason)
		assert.Contains(t, string(logs), "api user: "+user, "the in-cluster token authenticated as the pod's ServiceAccount")
		initLog, _ := os.ReadFile(b.runner.LogPath(got, "copy"))
		assert.Equal(t, "init done\n", string(initLog))
	})

	t.Run("a Job completes through the Job controller, and its TTL removes it", func(t *testing.T) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "done"},
			Spec: batchv1.JobSpec{
				BackoffLimit:            ptr.To[int32](0),
				TTLSecondsAfterFinished: ptr.To[int32](3),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: probeImage, Args: []string{"print", "job ran"}}},
				}},
			},
		}
		_, err := cs.BatchV1().Jobs(b.ns).Create(ctx, job, metav1.CreateOptions{})
		require.NoError(t, err)
		var completed bool
		waitFor(t, "the Job to complete and then go", func(ctx context.Context) (bool, error) {
			j, err := cs.BatchV1().Jobs(b.ns).Get(ctx, "done", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					completed = true
				}
			}
			return false, nil
		})
		assert.True(t, completed, "the Job was seen Complete before the TTL controller deleted it")
		waitFor(t, "the Job's pods to be collected", func(ctx context.Context) (bool, error) {
			pods, err := cs.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=done"})
			return err == nil && len(pods.Items) == 0, err
		})
	})

	t.Run("a deleted pod's container is stopped and the pod removed", func(t *testing.T) {
		_, err := cs.CoreV1().Pods(b.ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: probeImage, Args: []string{"print", "sleeping", "sleep"}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		p := b.waitPod(t, "sleeper", func(p *corev1.Pod) bool {
			return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
		})
		assert.Equal(t, corev1.PodRunning, p.Status.Phase)
		require.NoError(t, cs.CoreV1().Pods(b.ns).Delete(ctx, "sleeper", metav1.DeleteOptions{}))
		waitFor(t, "the pod to go", func(ctx context.Context) (bool, error) {
			_, err := cs.CoreV1().Pods(b.ns).Get(ctx, "sleeper", metav1.GetOptions{})
			return apierrors.IsNotFound(err), ignoreNotFound(err)
		})
	})
}

// TestResolveIn: paths in a root file system resolve as the container
// sees them; no link leads out of it.
func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755))
	require.NoError(t, os.Symlink("/usr/bin", filepath.Join(root, "bin")))
	require.NoError(t, os.Symlink("../../../../etc", filepath.Join(root, "usr/escape")))
	for in, want := range map[string]string{
		"/bin/probe":        "usr/bin/probe",
		"/usr/escape/x":     "etc/x",
		"/../../etc/passwd": "etc/passwd",
	} {
		got, err := podrunner.ResolveIn(root, in)
		require.NoError(t, err)
		assert.Equal(t, filepath.Join(root, want), got, in)
		assert.True(t, strings.HasPrefix(got, root), fmt.Sprintf("%s stays under the root", in))
	}
}
