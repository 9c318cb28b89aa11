package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/inventory/kubeinv"
)

// Run modes (Options.RunMode, --run-mode).
const (
	RunModeInProcess = "in-process"
	RunModeJob       = "job"
)

// JobOptions configure the Job runner.
type JobOptions struct {
	// Image is the wsu image the Jobs run (its entrypoint is wsu).
	Image string
	// ServiceAccount the Jobs' pods run as: it needs what the playbooks'
	// cluster tasks need (deploy/rbac/wsu-cluster-role.yaml).
	ServiceAccount string
	// Template is the base of every Job's pod: volumes and init containers
	// that provide the payload, node selectors, resources, security
	// context. The runner adds its container, named "run", and its volumes.
	Template *corev1.PodTemplateSpec
	// TTL is how long a finished Job stays (ttlSecondsAfterFinished; the
	// TTL-after-finished controller deletes it, and the garbage collector
	// its pod and request Secret). Default DefaultJobTTL.
	TTL time.Duration
	// Poll is how often a running Job is looked at (default 2s).
	Poll time.Duration
}

// DefaultJobTTL keeps a finished Job long enough to read its log.
const DefaultJobTTL = 10 * time.Minute

// Paths inside a Job's pod.
const (
	jobRequestDir  = "/var/run/wsu/request"
	jobRequestFile = "request.json"
	jobKeyDir      = "/var/run/wsu/key"
	jobKeyFile     = "private-key"
	// JobContainer is the name of the container that runs wsu.
	JobContainer = "run"
	// JobInstanceLabel names the WindowsInstance a Job runs for.
	JobInstanceLabel = "wsu.dev/instance"
	// JobModeLabel is the run's mode (plan or apply).
	JobModeLabel = "wsu.dev/mode"
)

// JobRunner runs each playbook run as a Kubernetes Job from wsu's own
// image: `wsu controller run-job` in the Job's pod reads the run request
// (a Secret the runner writes, owned by the Job) and the instance's key
// Secret (mounted), runs it through package setup as InProcess does, and
// writes the result to its termination message (jobResult, at most 4 KiB),
// which the runner reads back. backoffLimit is 0: retries are the
// controller's, with its per-instance backoff. Finished Jobs are deleted by
// the cluster's TTL-after-finished controller after TTL.
type JobRunner struct {
	Client  client.Client
	Options JobOptions
}

// NewJobRunner makes a Job runner with its own (uncached) client.
func NewJobRunner(cfg *rest.Config, o JobOptions) (*JobRunner, error) {
	if o.Image == "" {
		return nil, errors.New("controller: the Job run mode needs the wsu image (--job-image)")
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	return &JobRunner{Client: c, Options: o}, nil
}

// Run implements Runner.
func (j *JobRunner) Run(ctx context.Context, req RunRequest) RunOutcome {
	out, err := j.run(ctx, req)
	if err != nil {
		return RunOutcome{Failed: true, Message: err.Error()}
	}
	return out
}

func (j *JobRunner) run(ctx context.Context, req RunRequest) (RunOutcome, error) {
	ns, name, ok := strings.Cut(req.Instance, "/")
	if !ok {
		return RunOutcome{}, fmt.Errorf("the Job runner needs the instance as NAMESPACE/NAME, not %q", req.Instance)
	}
	wi := &wsuv1.WindowsInstance{}
	if err := j.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, wi); err != nil {
		return RunOutcome{}, fmt.Errorf("reading the instance: %w", err)
	}
	jr, err := newJobRequest(req)
	if err != nil {
		return RunOutcome{}, err
	}
	data, err := json.Marshal(jr)
	if err != nil {
		return RunOutcome{}, err
	}
	sec, err := j.createRequest(ctx, wi, req.Mode, data)
	if err != nil {
		return RunOutcome{}, err
	}
	job, err := j.createJob(ctx, wi, req.Mode, sec.Name)
	if err != nil {
		_ = j.Client.Delete(context.WithoutCancel(ctx), sec)
		return RunOutcome{}, err
	}
	// From now on the request goes with the Job (the garbage collector
	// deletes an object once all its owners are gone, so the instance
	// must no longer be one); until here it went with the instance.
	sec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID}}
	if err := j.Client.Update(ctx, sec); err != nil {
		log.FromContext(ctx).Error(err, "owning the run request by its Job", "secret", sec.Name)
	}
	log.FromContext(ctx).Info("run started as a Job", "job", job.Name, "mode", req.Mode)
	res, err := j.wait(ctx, job)
	if err != nil {
		return RunOutcome{}, fmt.Errorf("the Job %s: %w", job.Name, err)
	}
	// A host key the Job trusted on first use is pinned from the
	// controller's own known_hosts file, as after an in-process run.
	if f := knownHostsFile(req.Inventory); f != "" && res.KnownHosts != "" {
		if err := os.WriteFile(f, []byte(res.KnownHosts), 0o600); err != nil {
			return RunOutcome{}, err
		}
	}
	return res.outcome(), nil
}

func instanceOwnerRef(wi *wsuv1.WindowsInstance, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: wsuv1.GroupVersion.String(), Kind: "WindowsInstance", Name: wi.Name, UID: wi.UID, Controller: ptr.To(controller)}
}

func runLabels(wi *wsuv1.WindowsInstance, mode engine.Mode) map[string]string {
	return map[string]string{JobInstanceLabel: wi.Name, JobModeLabel: string(mode)}
}

// jobNamePrefix is wsu-INSTANCE- cut so the generated name (5 more
// characters) is a valid label value: the Job controller labels its pods
// with the Job's name.
func jobNamePrefix(instance string) string {
	p := "wsu-" + instance
	if len(p) > 50 {
		p = strings.TrimRight(p[:50], "-.")
	}
	return p + "-"
}

// createRequest writes the run request Secret, owned by the instance.
func (j *JobRunner) createRequest(ctx context.Context, wi *wsuv1.WindowsInstance, mode engine.Mode, data []byte) (*corev1.Secret, error) {
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: jobNamePrefix(wi.Name), Namespace: wi.Namespace, Labels: runLabels(wi, mode),
			OwnerReferences: []metav1.OwnerReference{instanceOwnerRef(wi, false)},
		},
		Data: map[string][]byte{jobRequestFile: data},
	}
	if err := j.Client.Create(ctx, sec); err != nil {
		return nil, fmt.Errorf("writing the run request: %w", err)
	}
	return sec, nil
}

// createJob creates the run's Job, named as its request Secret.
func (j *JobRunner) createJob(ctx context.Context, wi *wsuv1.WindowsInstance, mode engine.Mode, name string) (*batchv1.Job, error) {
	ttl := j.Options.TTL
	if ttl <= 0 {
		ttl = DefaultJobTTL
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: wi.Namespace, Labels: runLabels(wi, mode),
			OwnerReferences: []metav1.OwnerReference{instanceOwnerRef(wi, true)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			TTLSecondsAfterFinished: ptr.To(int32(ttl / time.Second)),
			Template:                j.podTemplate(wi, mode, name),
		},
	}
	if err := j.Client.Create(ctx, job); err != nil {
		return nil, fmt.Errorf("creating the run's Job: %w", err)
	}
	return job, nil
}

// podTemplate is the base template with the run container and its volumes.
func (j *JobRunner) podTemplate(wi *wsuv1.WindowsInstance, mode engine.Mode, request string) corev1.PodTemplateSpec {
	t := corev1.PodTemplateSpec{}
	if j.Options.Template != nil {
		j.Options.Template.DeepCopyInto(&t)
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	for k, v := range runLabels(wi, mode) {
		t.Labels[k] = v
	}
	spec := &t.Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	if j.Options.ServiceAccount != "" {
		spec.ServiceAccountName = j.Options.ServiceAccount
	}
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
	}
	keyRef := wsuv1.SecretKeyRef{Name: kubeinv.KeySecret, Key: kubeinv.KeySecretKey}
	if wi.Spec.KeySecretRef != nil {
		keyRef = *wi.Spec.KeySecretRef
	}
	spec.Volumes = append(spec.Volumes,
		corev1.Volume{Name: "wsu-request", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: request}}},
		corev1.Volume{Name: "wsu-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: keyRef.Name, Items: []corev1.KeyToPath{{Key: keyRef.Key, Path: jobKeyFile}}}}},
	)
	var mounts []corev1.VolumeMount
	if len(spec.Containers) > 0 {
		mounts = spec.Containers[0].VolumeMounts // the template's mounts (the payload)
	}
	c := corev1.Container{
		Name:  JobContainer,
		Image: j.Options.Image,
		Args: []string{"controller", "run-job",
			"--request", jobRequestDir + "/" + jobRequestFile,
			"--key-file", jobKeyDir + "/" + jobKeyFile},
		VolumeMounts: append(mounts,
			corev1.VolumeMount{Name: "wsu-request", MountPath: jobRequestDir, ReadOnly: true},
			corev1.VolumeMount{Name: "wsu-key", MountPath: jobKeyDir, ReadOnly: true}),
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	if len(spec.Containers) > 0 {
		base := spec.Containers[0]
		c.Env, c.EnvFrom, c.Resources, c.SecurityContext = base.Env, base.EnvFrom, base.Resources, base.SecurityContext
	}
	spec.Containers = []corev1.Container{c}
	return t
}

// wait waits for the Job to finish and reads its result. A cancelled wait
// (the controller stops) deletes the Job, so its run stops too.
func (j *JobRunner) wait(ctx context.Context, job *batchv1.Job) (jobResult, error) {
	poll := j.Options.Poll
	if poll <= 0 {
		poll = 2 * time.Second
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	key := client.ObjectKeyFromObject(job)
	for {
		select {
		case <-ctx.Done():
			bg := metav1.DeletePropagationBackground
			_ = j.Client.Delete(context.WithoutCancel(ctx), job, &client.DeleteOptions{PropagationPolicy: &bg})
			return jobResult{}, fmt.Errorf("cancelled: %w", ctx.Err())
		case <-tick.C:
		}
		cur := &batchv1.Job{}
		if err := j.Client.Get(ctx, key, cur); err != nil {
			if apierrors.IsNotFound(err) {
				return jobResult{}, errors.New("the Job was deleted before it finished")
			}
			continue // a passing API error: look again
		}
		if finished, why := jobFinished(cur); finished {
			return j.result(ctx, cur, why)
		}
	}
}

// jobFinished reports whether a Job is Complete or Failed, and the
// failure's reason.
func jobFinished(job *batchv1.Job) (bool, string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, ""
		case batchv1.JobFailed:
			return true, strings.TrimSpace(c.Reason + ": " + c.Message)
		}
	}
	return false, ""
}

// result reads the run's result from the termination message of the Job's
// pod.
func (j *JobRunner) result(ctx context.Context, job *batchv1.Job, why string) (jobResult, error) {
	pods := &corev1.PodList{}
	if err := j.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return jobResult{}, err
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if st.Name != JobContainer || st.State.Terminated == nil || st.State.Terminated.Message == "" {
				continue
			}
			var res jobResult
			if err := json.Unmarshal([]byte(st.State.Terminated.Message), &res); err != nil {
				return jobResult{}, fmt.Errorf("pod %s: its termination message is not a run result: %w", p.Name, err)
			}
			return res, nil
		}
	}
	if why == "" {
		why = "no pod reported a result"
	}
	return jobResult{}, fmt.Errorf("finished without a result (%s)", why)
}
