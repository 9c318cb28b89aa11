//go:build linux

package controller_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/test/kubetest"
)

// TestJobModeAdoptsRuns (issue 27, item 5): in Job mode a pass starts a
// run's Job and returns; the Job's completion reconciles its instance,
// which reads the result. The Jobs are the state: a controller stopped
// mid-run leaves its Job running (nothing deletes it), and the next
// controller neither plans again nor starts a second run beside one a
// previous controller started: it waits for that Job and records its
// result. The test plays the Job controller and the kubelet (a pod the Job
// controls, with the run's result as its termination message), so each
// step happens when the test says; the controller runs as its
// ServiceAccount with its generated Role and Job mode's.
func TestJobModeAdoptsRuns(t *testing.T) {
	t.Parallel()
	cluster := kubetest.Start(t)
	ctx := context.Background()
	require.NoError(t, cluster.InstallCRDFiles(crdFile(t)))
	require.NoError(t, cluster.EnsureNamespace(ctx, ns))
	cs := cluster.Client
	_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kubeinv.KeySecret},
		Data:       map[string][]byte{kubeinv.KeySecretKey: privateKeyPEM(t)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	asController := asControllerSA(t, cluster, grantClusterInfo, grantJobMode)
	c := hostVarsClient(t, cluster)
	wi := hvInstance("win-a", nil)
	require.NoError(t, c.Create(ctx, wi))
	state := t.TempDir()
	start := func() (stop func()) {
		return startJobController(t, asController, controller.Options{Namespace: ns, StateDir: state, RunMode: run.ModeJob,
			Job: run.JobOptions{Image: "test.local/wsu:never-run", ServiceAccount: jobServiceAccount}})
	}
	jobs := func() []batchv1.Job {
		list, err := cs.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: run.JobInstanceLabel + "=win-a"})
		require.NoError(t, err)
		// Oldest first. Creation times have a second's resolution: within
		// one second, a run's plan comes before its apply.
		sort.SliceStable(list.Items, func(a, b int) bool {
			ja, jb := &list.Items[a], &list.Items[b]
			if !ja.CreationTimestamp.Equal(&jb.CreationTimestamp) {
				return ja.CreationTimestamp.Before(&jb.CreationTimestamp)
			}
			return ja.Labels[run.JobModeLabel] == "plan" && jb.Labels[run.JobModeLabel] != "plan"
		})
		return list.Items
	}
	waitJobs := func(n int, what string) []batchv1.Job {
		eventually(t, time.Minute, what, func() (bool, string) {
			return len(jobs()) >= n, describeJobs(jobs())
		})
		got := jobs()
		require.Equal(t, n, len(got), describeJobs(got))
		return got
	}

	stopA := start()
	plan := waitJobs(1, "the first controller started a plan Job")[0]
	assert.Equal(t, "plan", plan.Labels[run.JobModeLabel])
	assert.Equal(t, "join.hcl", plan.Labels[run.JobPlaybookLabel])
	assert.NotEmpty(t, plan.Labels[run.JobRunLabel])
	owner := metav1.GetControllerOf(&plan)
	require.NotNil(t, owner, "the instance controls its Job")
	assert.Equal(t, "WindowsInstance", owner.Kind)
	assert.Equal(t, "win-a", owner.Name)

	stopA()
	_, err = cs.BatchV1().Jobs(ns).Get(ctx, plan.Name, metav1.GetOptions{})
	require.NoError(t, err, "a controller that stops leaves its run's Job running")

	// The plan finishes while no controller runs.
	finishJob(t, cs, &plan, `{"hash":"h1","run":1,"changed":1,"tasks":["play.join.task.kubelet"]}`)

	stopB := start()
	jobsNow := waitJobs(2, "the next controller read the plan's result and started the apply")
	assert.Equal(t, plan.Name, jobsNow[0].Name, "no second plan: the previous controller's was adopted")
	apply := jobsNow[1]
	assert.Equal(t, "apply", apply.Labels[run.JobModeLabel])
	assert.Equal(t, "h1", apply.Labels[run.JobPlanLabel], "the apply is held to the plan's hash")
	assert.Equal(t, plan.Labels[run.JobRunLabel], apply.Labels[run.JobRunLabel], "the same run")
	assert.Contains(t, apply.Annotations[run.JobPlanAnnotation], `"hash":"h1"`)
	eventually(t, time.Minute, "the plan's result recorded", func() (bool, string) {
		cur, err := cs.BatchV1().Jobs(ns).Get(ctx, plan.Name, metav1.GetOptions{})
		require.NoError(t, err)
		return cur.Annotations[run.JobRecordedAnnotation] == "true", fmt.Sprint(cur.Annotations)
	})
	planned := getInstance(t, c, "win-a")
	require.NotNil(t, planned.Status.LastPlan)
	assert.Equal(t, "h1", planned.Status.LastPlan.Hash)

	stopB()
	planEvents := func() int {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=win-a,reason=" + controller.ReasonPlanned})
		require.NoError(t, err)
		return len(evs.Items)
	}
	before := planEvents()
	stopC := start()
	t.Cleanup(stopC)
	// The third controller finds the apply running: it records the plan
	// the apply carries out (an event of its own) without planning again,
	// and waits. The apply's completion is what reconciles the instance.
	eventually(t, time.Minute, "the third controller resumed the run", func() (bool, string) {
		return planEvents() > before, describeJobs(jobs())
	})
	require.Equal(t, 2, len(jobs()), "no run beside the running apply: %s", describeJobs(jobs()))
	finishJob(t, cs, &apply, `{"changed":1}`)
	eventually(t, time.Minute, "the apply's result recorded", func() (bool, string) {
		got := getInstance(t, c, "win-a")
		return got.Status.LastApply != nil && got.Status.Phase == wsuv1.PhaseJoined, describe(got)
	})
	got := getInstance(t, c, "win-a")
	assert.Equal(t, "Succeeded", got.Status.LastApply.Result)
	final := jobs()
	assert.Equal(t, 2, len(final), "one plan and one apply across three controllers: %s", describeJobs(final))
	for _, j := range final {
		assert.Equal(t, "true", j.Annotations[run.JobRecordedAnnotation], "%s recorded once", j.Name)
	}
}

func describeJobs(jobs []batchv1.Job) string {
	var out []string
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("%s (%s, plan %q, recorded %q)", j.Name, j.Labels[run.JobModeLabel],
			j.Labels[run.JobPlanLabel], j.Annotations[run.JobRecordedAnnotation]))
	}
	return "Jobs: " + strings.Join(out, ", ")
}

// startJobController runs a Job-mode controller as cfg until the returned
// stop is called (once; later calls do nothing) or the test ends.
func startJobController(t *testing.T, cfg *rest.Config, opts controller.Options) (stop func()) {
	t.Helper()
	opts.NodeReadyCheck, opts.Backoff, opts.DriftInterval = time.Second, time.Hour, time.Hour
	mo, err := controller.ManagerConfig(opts, controller.ManagerOptions{MetricsAddr: "0", ProbeAddr: "0"})
	require.NoError(t, err)
	skip := true
	mo.Controller = config.Controller{SkipNameValidation: &skip}
	mgr, err := ctrl.NewManager(cfg, mo)
	require.NoError(t, err)
	require.NoError(t, controller.Setup(mgr, opts))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(2 * time.Minute):
			t.Error("the controller did not stop within 2 minutes of its context ending")
		}
	}
	t.Cleanup(stop)
	return stop
}

// finishJob plays the Job controller and the kubelet for a run's Job: a
// pod the Job controls whose run container terminated with result as its
// termination message, and the Job Complete.
func finishJob(t *testing.T, cs kubernetes.Interface, job *batchv1.Job, result string) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-run", Namespace: ns,
			Labels:          map[string]string{batchv1.JobNameLabel: job.Name, run.JobInstanceLabel: job.Labels[run.JobInstanceLabel]},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: run.JobContainer, Image: "test.local/wsu:never-run"}}},
	}
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: run.JobContainer, Image: "test.local/wsu:never-run",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: result, StartedAt: now, FinishedAt: now}}}}
	_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	cur, err := cs.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
	require.NoError(t, err)
	cur.Status.StartTime, cur.Status.CompletionTime = &now, &now
	cur.Status.Succeeded = 1
	cur.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
	}
	_, err = cs.BatchV1().Jobs(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
}
