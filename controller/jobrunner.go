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
	// cluster tasks need (deploy/rbac/wsu-cluster-role.yaml). Default
	// DefaultJobServiceAccount, which the job-mode manifests create; the
	// namespace's "default" is refused (every pod without one runs as it).
	ServiceAccount string
	// Template is the base of every Job's pod: volumes and init containers
	// that provide the payload, node selectors, resources. The runner adds
	// its container, named "run", and its volumes, and sets the security
	// context itself (restrict), whatever the template says.
	Template *corev1.PodTemplateSpec
	// ActiveDeadline bounds a Job's run (activeDeadlineSeconds: the Job
	// controller kills its pod and fails it after). Default
	// DefaultJobActiveDeadline.
	ActiveDeadline time.Duration
	// TTL is how long a finished Job stays (ttlSecondsAfterFinished; the
	// TTL-after-finished controller deletes it, and the garbage collector
	// its pod). Default DefaultJobTTL.
	TTL time.Duration
	// Poll is how often a running Job is looked at (default 2s).
	Poll time.Duration
}

// Defaults of JobOptions.
const (
	// DefaultJobTTL keeps a finished Job long enough to read its log.
	DefaultJobTTL = 10 * time.Minute
	// DefaultJobActiveDeadline is longer than any stock playbook's waits
	// add up to (a join's CSR, Node and pod waits, a drain's), so only a
	// run that hangs meets it.
	DefaultJobActiveDeadline = 2 * time.Hour
	// DefaultJobServiceAccount is the Jobs' own ServiceAccount
	// (deploy/components/job-mode).
	DefaultJobServiceAccount = "wsu-run"
)

// checkJobOptions refuses Job options that would run Jobs with more than
// they need.
func checkJobOptions(o JobOptions) error {
	if o.Image == "" {
		return errors.New("controller: the Job run mode needs the wsu image (--job-image)")
	}
	if o.ServiceAccount == "default" {
		return errors.New(`controller: --job-service-account "default": the Jobs run as a ServiceAccount of their own (every pod that names none runs as "default")`)
	}
	if o.ActiveDeadline < 0 {
		return fmt.Errorf("controller: --job-active-deadline %s: want a positive duration", o.ActiveDeadline)
	}
	return nil
}

// Paths inside a Job's pod, and the annotation the request is in.
const (
	jobRequestDir  = "/var/run/wsu/request"
	jobRequestFile = "request.json"
	// jobSecretsDir holds the Secret volumes (secretMounts).
	jobSecretsDir = "/var/run/wsu/secrets"
	jobKeyFile    = "private-key"
	jobNewKeyFile = "new-private-key"
	// JobRequestAnnotation holds the run request on the Job's pod
	// template; a downwardAPI volume makes it request.json.
	JobRequestAnnotation = "wsu.dev/request"
	// maxJobRequest bounds the request: the API server allows 256 KiB of
	// annotations on an object.
	maxJobRequest = 200 << 10
	// JobContainer is the name of the container that runs wsu.
	JobContainer = "run"
	// JobInstanceLabel names the WindowsInstance a Job runs for.
	JobInstanceLabel = "wsu.dev/instance"
	// JobModeLabel is the run's mode (plan or apply).
	JobModeLabel = "wsu.dev/mode"
)

// JobRunner runs each playbook run as a Kubernetes Job from wsu's own
// image: `wsu controller run-job` in the Job's pod reads the run request
// (an annotation of the Job's pod template, through a downwardAPI volume)
// and the Secrets it names (the instance's key Secret and varsFrom
// Secrets, mounted by reference: the runner writes no Secret, so the
// controller needs no right to), runs it through package setup as InProcess does, and
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
	if err := checkJobOptions(o); err != nil {
		return nil, err
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
	jr, mounts, err := newJobRequest(req)
	if err != nil {
		return RunOutcome{}, err
	}
	data, err := json.Marshal(jr)
	if err != nil {
		return RunOutcome{}, err
	}
	if len(data) > maxJobRequest {
		return RunOutcome{}, fmt.Errorf("the run request is %d bytes, over the %d a Job's annotation can carry (a large site playbook or var file: run in process)", len(data), maxJobRequest)
	}
	if req.Secrets.Key.Secret == "" {
		return RunOutcome{}, errors.New("the run names no key Secret to mount")
	}
	keyFile := mounts.file(req.Secrets.Key, jobKeyFile)
	job, err := j.createJob(ctx, wi, req.Mode, j.podTemplate(wi, req.Mode, string(data), keyFile, mounts))
	if err != nil {
		return RunOutcome{}, err
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

// createJob creates the run's Job.
func (j *JobRunner) createJob(ctx context.Context, wi *wsuv1.WindowsInstance, mode engine.Mode, tmpl corev1.PodTemplateSpec) (*batchv1.Job, error) {
	ttl, deadline := j.Options.TTL, j.Options.ActiveDeadline
	if ttl <= 0 {
		ttl = DefaultJobTTL
	}
	if deadline <= 0 {
		deadline = DefaultJobActiveDeadline
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: jobNamePrefix(wi.Name), Namespace: wi.Namespace, Labels: runLabels(wi, mode),
			OwnerReferences: []metav1.OwnerReference{instanceOwnerRef(wi, true)},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			ActiveDeadlineSeconds:   ptr.To(int64(deadline / time.Second)),
			TTLSecondsAfterFinished: ptr.To(int32(ttl / time.Second)),
			Template:                tmpl,
		},
	}
	if err := j.Client.Create(ctx, job); err != nil {
		return nil, fmt.Errorf("creating the run's Job: %w", err)
	}
	return job, nil
}

// podTemplate is the base template with the run container, the request
// (an annotation, mounted through the downward API) and the Secret
// volumes.
func (j *JobRunner) podTemplate(wi *wsuv1.WindowsInstance, mode engine.Mode, request, keyFile string, mounts *secretMounts) corev1.PodTemplateSpec {
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
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[JobRequestAnnotation] = request
	spec := &t.Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.ServiceAccountName = j.Options.ServiceAccount
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = DefaultJobServiceAccount
	}
	spec.DeprecatedServiceAccount = ""
	if spec.NodeSelector == nil {
		spec.NodeSelector = map[string]string{corev1.LabelOSStable: "linux"}
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "wsu-request", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
		Items: []corev1.DownwardAPIVolumeFile{{Path: jobRequestFile, FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: "metadata.annotations['" + JobRequestAnnotation + "']"}}}}}})
	spec.Volumes = append(spec.Volumes, mounts.volumes...)
	var vmounts []corev1.VolumeMount
	if len(spec.Containers) > 0 {
		vmounts = spec.Containers[0].VolumeMounts // the template's mounts (the payload)
	}
	vmounts = append(vmounts, corev1.VolumeMount{Name: "wsu-request", MountPath: jobRequestDir, ReadOnly: true})
	c := corev1.Container{
		Name:  JobContainer,
		Image: j.Options.Image,
		Args: []string{"controller", "run-job",
			"--request", jobRequestDir + "/" + jobRequestFile,
			"--key-file", keyFile},
		VolumeMounts:             append(vmounts, mounts.mountsFor()...),
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}
	if len(spec.Containers) > 0 {
		base := spec.Containers[0]
		c.Env, c.EnvFrom, c.Resources, c.SecurityContext = base.Env, base.EnvFrom, base.Resources, base.SecurityContext
	}
	spec.Containers = []corev1.Container{c}
	restrict(spec)
	return t
}

// restrict gives a Job's pod the restricted Pod Security Standard's
// settings, over whatever the template set: a run holds an SSH key and a
// ServiceAccount token, and needs no privilege, host namespace or
// capability. Only what the standard leaves open is kept from the template
// (the user and group IDs, a read-only root filesystem).
func restrict(spec *corev1.PodSpec) {
	spec.HostNetwork, spec.HostPID, spec.HostIPC = false, false, false
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	psc := spec.SecurityContext
	psc.RunAsNonRoot = ptr.To(true)
	psc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	psc.AppArmorProfile = nil
	psc.SELinuxOptions = nil
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			restrictContainer(&list[i])
		}
	}
}

func restrictContainer(c *corev1.Container) {
	if c.SecurityContext == nil {
		c.SecurityContext = &corev1.SecurityContext{}
	}
	sc := c.SecurityContext
	sc.Privileged = ptr.To(false)
	sc.AllowPrivilegeEscalation = ptr.To(false)
	sc.RunAsNonRoot = ptr.To(true)
	sc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	sc.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	sc.ProcMount = nil
	sc.AppArmorProfile = nil
	sc.SELinuxOptions = nil
	sc.WindowsOptions = nil
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
// pod: a pod the Job controls (its controller reference has the Job's UID),
// never one that merely carries the Job's name label, which anyone who may
// create pods in the namespace could forge.
func (j *JobRunner) result(ctx context.Context, job *batchv1.Job, why string) (jobResult, error) {
	pods := &corev1.PodList{}
	if err := j.Client.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return jobResult{}, err
	}
	for _, p := range pods.Items {
		if !metav1.IsControlledBy(&p, job) {
			continue
		}
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
