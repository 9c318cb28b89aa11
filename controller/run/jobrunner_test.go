package run

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/approval"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/setup"
)

// TestJobPodRestricted (issue 26, finding 7): whatever the template says,
// a run's pod gets the restricted Pod Security Standard's settings from the
// controller, a ServiceAccount of its own (never "default"), and its Job a
// deadline.
func TestJobPodRestricted(t *testing.T) {
	hostile := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		HostNetwork: true, HostPID: true,
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(false),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}},
		InitContainers: []corev1.Container{{Name: "payload", SecurityContext: &corev1.SecurityContext{
			Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(true),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}}},
		Containers: []corev1.Container{{Name: "base", SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsUser: ptr.To[int64](1000)}}},
	}}
	wi := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Name: "win", Namespace: "ns", UID: "u"}}
	j := &JobRunner{Options: JobOptions{Image: "wsu", Template: hostile}}
	tmpl := j.podTemplate(wi, engine.ModePlan, "{}", "/key", &secretMounts{})
	spec := tmpl.Spec
	assert.Equal(t, DefaultJobServiceAccount, spec.ServiceAccountName, "its own ServiceAccount by default")
	assert.False(t, spec.HostNetwork || spec.HostPID || spec.HostIPC, "no host namespace")
	require.NotNil(t, spec.SecurityContext)
	assert.True(t, *spec.SecurityContext.RunAsNonRoot)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, spec.SecurityContext.SeccompProfile.Type)
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	require.Len(t, all, 2)
	for _, c := range all {
		sc := c.SecurityContext
		require.NotNil(t, sc, c.Name)
		assert.False(t, *sc.Privileged, c.Name)
		assert.False(t, *sc.AllowPrivilegeEscalation, c.Name)
		assert.True(t, *sc.RunAsNonRoot, c.Name)
		assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop, c.Name)
		assert.Empty(t, sc.Capabilities.Add, c.Name)
		assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, sc.SeccompProfile.Type, c.Name)
	}
	run := spec.Containers[0]
	assert.Equal(t, JobContainer, run.Name)
	assert.True(t, *run.SecurityContext.ReadOnlyRootFilesystem, "what the standard leaves open is kept")
	assert.Equal(t, int64(1000), *run.SecurityContext.RunAsUser)

	assert.Error(t, checkJobOptions(JobOptions{Image: "wsu", ServiceAccount: "default"}), "the namespace's default ServiceAccount is refused")
	assert.NoError(t, checkJobOptions(JobOptions{Image: "wsu", ServiceAccount: "site-runner"}))

	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	j = &JobRunner{Client: c, Options: JobOptions{Image: "wsu", ActiveDeadline: 90 * time.Second}}
	job, err := j.createJob(context.Background(), wi, runIdentity{mode: engine.ModePlan}, tmpl)
	require.NoError(t, err)
	assert.Equal(t, int64(90), *job.Spec.ActiveDeadlineSeconds)
	j.Options.ActiveDeadline = 0
	job, err = j.createJob(context.Background(), wi, runIdentity{mode: engine.ModePlan}, tmpl)
	require.NoError(t, err)
	assert.Equal(t, int64(DefaultJobActiveDeadline/time.Second), *job.Spec.ActiveDeadlineSeconds, "a deadline by default")
}

// TestJobResultFromOwnedPod (issue 26, finding 7): a run's result is read
// only from a pod its Job controls; a pod that merely carries the Job's
// name label (anyone who may create pods in the namespace can make one) is
// ignored.
func TestJobResultFromOwnedPod(t *testing.T) {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "wsu-win-abcde", Namespace: "ns", UID: "job-uid"}}
	job.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	pod := func(name string, owner *metav1.OwnerReference, msg string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: JobContainer,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}}}}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	owned := metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))
	sameName := *owned
	sameName.UID = "another-job-of-that-name"
	forged := pod("a-forged", nil, `{"hash":"forged","changed":99}`)
	stale := pod("b-stale", &sameName, `{"hash":"stale"}`)
	real := pod("c-real", owned, `{"hash":"real","changed":1}`)

	c := fake.NewClientBuilder().WithObjects(forged, stale, real).WithStatusSubresource().Build()
	j := &JobRunner{Client: c}
	res, err := j.result(context.Background(), job, "")
	require.NoError(t, err)
	assert.Equal(t, "real", res.Hash)

	c = fake.NewClientBuilder().WithObjects(forged, stale).Build()
	j = &JobRunner{Client: c}
	_, err = j.result(context.Background(), job, "")
	assert.ErrorContains(t, err, "without a result", "no pod of the Job: no result, whatever others say")
}

// TestJobRunnerOneRunPerHost: a run never waits for its Job (Pending), and
// asking again finds the same Job rather than starting another; a run of
// a request changed since waits for the instance's Job still going (never
// two runs on one host); at most MaxRunning run Jobs are unfinished at
// once, a run beyond them waiting with a retry; a finished Job's result is
// read once (with the Job's own run time), and the Job marked recorded.
func TestJobRunnerOneRunPerHost(t *testing.T) {
	scheme, err := approval.NewScheme()
	require.NoError(t, err)
	a := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a"}}
	b := &wsuv1.WindowsInstance{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", UID: "uid-b"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(a, b).WithStatusSubresource(&batchv1.Job{}).Build()
	j := &JobRunner{Client: c, Options: JobOptions{Image: "wsu", MaxRunning: 1}}
	ctx := context.Background()
	request := func(instance string, playbook ...string) Request {
		inv, diags := inventory.ParseWindowsInstances("windowsinstance/ns/"+instance, map[string]string{instance: "username=Administrator"})
		require.False(t, diags.HasErrors())
		pb := "wsu:join.hcl"
		if len(playbook) > 0 {
			pb = playbook[0]
		}
		return Request{Instance: "ns/" + instance, Request: setup.Request{Mode: engine.ModePlan, Inputs: planfile.Inputs{Playbook: pb}, Inventory: inv},
			Secrets: Secrets{Key: SecretItem{Secret: "key", Key: "private-key.pem"}}}
	}
	jobs := func() []batchv1.Job {
		list := &batchv1.JobList{}
		require.NoError(t, c.List(ctx, list))
		return list.Items
	}

	out := j.Run(ctx, request("a"))
	require.True(t, out.Pending, out.Message)
	require.Len(t, jobs(), 1)
	first := jobs()[0]
	assert.True(t, metav1.IsControlledBy(&first, a))
	assert.True(t, j.Run(ctx, request("a")).Pending)
	assert.Len(t, jobs(), 1, "asked again: the same Job")
	assert.True(t, j.Run(ctx, request("a", "wsu:remove.hcl")).Pending)
	assert.Len(t, jobs(), 1, "another run of the instance waits for the one still going")
	out = j.Run(ctx, request("b"))
	assert.True(t, out.Pending)
	assert.Equal(t, DefaultJobRetry, out.RetryAfter, "beyond MaxRunning: tried again later")
	assert.Len(t, jobs(), 1)

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{batchv1.JobNameLabel: first.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(&first, batchv1.SchemeGroupVersion.WithKind("Job"))}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: JobContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: `{"hash":"h1","changed":2}`}}}}}}
	require.NoError(t, c.Create(ctx, pod))
	started := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ended := metav1.NewTime(started.Add(42 * time.Second))
	first.Status.StartTime, first.Status.CompletionTime = &started, &ended
	first.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	require.NoError(t, c.Status().Update(ctx, &first))

	out = j.Run(ctx, request("a"))
	require.False(t, out.Pending)
	assert.Equal(t, "h1", out.Hash)
	assert.Equal(t, 2, out.Changed)
	assert.Equal(t, 42*time.Second, out.Took, "the run's time is the Job's, not the reading pass's")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(&first), &first))
	assert.Equal(t, "true", first.Annotations[JobRecordedAnnotation])
	assert.True(t, j.Run(ctx, request("a")).Pending, "read once: asked again, a new run")
	assert.Len(t, jobs(), 2)
}
