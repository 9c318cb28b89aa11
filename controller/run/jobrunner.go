package run

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/setup"
)

// Run modes (Options.RunMode, --run-mode).
const (
	ModeInProcess = "in-process"
	ModeJob       = "job"
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
	// MaxRunning bounds the run Jobs not finished in the namespace: a run
	// beyond it waits (Pending) and is tried again after Retry. 0: no
	// bound. The controller sets it to --max-concurrent-runs.
	MaxRunning int
	// Retry is how soon a run waiting for room among the running Jobs is
	// tried again (default DefaultJobRetry).
	Retry time.Duration
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
	// DefaultJobRetry is how soon a run waiting for room among the
	// running Jobs (MaxRunning) is tried again.
	DefaultJobRetry = 5 * time.Second
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
	// JobCommand is what the run container runs: the image's
	// wsu-controller (its entrypoint is the wsu CLI).
	JobCommand = "/usr/local/bin/wsu-controller"
	// JobContainer is the name of the container that runs wsu.
	JobContainer = "run"
	// JobInstanceLabel names the WindowsInstance a Job runs for.
	JobInstanceLabel = "wsu.dev/instance"
	// JobModeLabel is the run's mode (plan or apply).
	JobModeLabel = "wsu.dev/mode"
	// JobRunLabel identifies the run (runIdentity): a hash of its
	// instance's UID and generation, its playbook and the Secret items it
	// mounts.
	JobRunLabel = "wsu.dev/run"
	// JobPlaybookLabel is the run's playbook (wsu:join.hcl is join.hcl).
	JobPlaybookLabel = "wsu.dev/playbook"
	// JobPlanLabel is the plan hash an apply is held to.
	JobPlanLabel = "wsu.dev/plan-hash"
	// JobPlanAnnotation is, on an apply's Job, the plan it carries out (a
	// jobResult): a pass that finds the Job records that plan without
	// planning again.
	JobPlanAnnotation = "wsu.dev/plan"
	// JobRecordedAnnotation marks a finished Job whose result the
	// controller read.
	JobRecordedAnnotation = "wsu.dev/recorded"
)

// JobRunner runs each playbook run as a Kubernetes Job from wsu's own
// image: `wsu-controller run-job` in the Job's pod reads the run request
// (an annotation of the Job's pod template, through a downwardAPI volume)
// and the Secrets it names (the instance's key Secret and varsFrom
// Secrets, mounted by reference: the runner writes no Secret, so the
// controller needs no right to), runs it through package setup as
// InProcess does, and writes the result to its termination message
// (jobResult, at most 4 KiB), which the runner reads back.
//
// It never waits for a Job. A run starts a Job controlled by the instance
// (labelled with the run's identity: instance, playbook, mode, plan hash
// and a hash of the request) and returns Pending; the controller watches
// the Jobs it owns, so the Job's completion reconciles the instance, whose
// pass asks for the same run again and gets the Job's result. The Jobs are
// the state: a restarted controller, or a new leader, finds the Jobs a
// previous one started and waits for them or reads their results instead
// of starting a second run on the host. A Job is never deleted by the
// controller: backoffLimit is 0 (retries are the controller's, with its
// per-instance backoff), and finished Jobs are deleted by the cluster's
// TTL-after-finished controller after TTL.
type JobRunner struct {
	Client  client.Client
	Options JobOptions
}

// NewJobRunner makes a Job runner with its own (uncached) client; scheme
// must hold the core types and wsu.dev/v1alpha1 (the manager's).
func NewJobRunner(cfg *rest.Config, scheme *runtime.Scheme, o JobOptions) (*JobRunner, error) {
	if err := checkJobOptions(o); err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	return &JobRunner{Client: c, Options: o}, nil
}

// Run implements Runner. It never waits for a Job: a run not finished yet
// is Pending, and the Job's completion (the controller owns and watches its
// Jobs) reconciles the instance again, whose next pass asks for the same
// run and gets its result.
func (j *JobRunner) Run(ctx context.Context, req Request) Outcome {
	out, err := j.run(ctx, req)
	if err != nil {
		return Outcome{Failed: true, Message: err.Error()}
	}
	return out
}

func (j *JobRunner) run(ctx context.Context, req Request) (Outcome, error) {
	ns, name, ok := strings.Cut(req.Instance, "/")
	if !ok {
		return Outcome{}, fmt.Errorf("the Job runner needs the instance as NAMESPACE/NAME, not %q", req.Instance)
	}
	wi := &wsuv1.WindowsInstance{}
	if err := j.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, wi); err != nil {
		return Outcome{}, fmt.Errorf("reading the instance: %w", err)
	}
	sr, data, mounts, err := jobRequestOf(req)
	if err != nil {
		return Outcome{}, err
	}
	id, err := identify(wi, sr, req)
	if err != nil {
		return Outcome{}, err
	}
	jobs, err := j.instanceJobs(ctx, wi)
	if err != nil {
		return Outcome{}, err
	}
	if out, found, err := j.resume(ctx, jobs, id, req); found || err != nil {
		return out, err
	}
	if n, err := j.running(ctx, wi.Namespace); err != nil || (j.Options.MaxRunning > 0 && n >= j.Options.MaxRunning) {
		return Outcome{Pending: true, RetryAfter: j.retry()}, err
	}
	tmpl := j.podTemplate(wi, req.Mode, string(data), sr.SecretFiles.HostVars[kubeinv.KeyVar], mounts)
	job, err := j.createJob(ctx, wi, id, tmpl)
	if err != nil {
		return Outcome{}, err
	}
	log.FromContext(ctx).Info("run started as a Job", "job", job.Name, "mode", req.Mode, "playbook", req.Playbook)
	return Outcome{Pending: true}, nil
}

// PodRequest is req's run request as a Job's pod receives it
// (request.json, what `wsu-controller run-job` decodes with
// setup.DecodeRequest), or why req cannot run in a Job.
func PodRequest(req Request) ([]byte, error) {
	_, data, _, err := jobRequestOf(req)
	return data, err
}

// jobRequestOf is req as a Job's pod receives it (jobRequest), that
// request's JSON (the pod template's annotation) and the Secret volumes it
// names.
func jobRequestOf(req Request) (setup.Request, []byte, *secretMounts, error) {
	sr, mounts, err := jobRequest(req)
	if err != nil {
		return setup.Request{}, nil, nil, err
	}
	data, err := sr.Encode()
	if err != nil {
		return setup.Request{}, nil, nil, err
	}
	if len(data) > maxJobRequest {
		return setup.Request{}, nil, nil, fmt.Errorf("the run request is %d bytes, over the %d a Job's annotation can carry (a large site playbook or var file: run in process)", len(data), maxJobRequest)
	}
	return sr, data, mounts, nil
}

// resume finds the run among the instance's Jobs not recorded yet, which
// this controller or a previous leader started: its result once it
// finished (the Job is then marked recorded), Pending while it runs. A plan
// whose apply Job was already started is that apply's plan (kept on the
// Job), so a pass that resumes an apply does not plan again. Any other run
// of the instance still going is waited for (never two runs on one host at
// once); one finished that no pass asks for (its instance changed since,
// or a run with the key Secret's other key, the controller's tryOtherKey,
// whose result the pass after next reads) is left to the TTL.
func (j *JobRunner) resume(ctx context.Context, jobs []batchv1.Job, id runIdentity, req Request) (Outcome, bool, error) {
	for i := range jobs {
		job := &jobs[i]
		if !id.is(job) {
			continue
		}
		finished, why := jobFinished(job)
		if !finished {
			return Outcome{Pending: true}, true, nil
		}
		out, err := j.read(ctx, job, why, req)
		return out, true, err
	}
	if req.Mode == engine.ModePlan {
		for i := range jobs {
			if out, ok := id.planOf(&jobs[i]); ok {
				return out, true, nil
			}
		}
	}
	for i := range jobs {
		if finished, _ := jobFinished(&jobs[i]); !finished {
			log.FromContext(ctx).Info("waiting for the instance's other run to finish", "job", jobs[i].Name)
			return Outcome{Pending: true}, true, nil
		}
	}
	return Outcome{}, false, nil
}

// read reads a finished Job's result and marks the Job recorded.
func (j *JobRunner) read(ctx context.Context, job *batchv1.Job, why string, req Request) (Outcome, error) {
	res, rerr := j.result(ctx, job, why)
	if err := j.markRecorded(ctx, job); err != nil {
		return Outcome{}, err
	}
	if rerr != nil {
		return Outcome{}, fmt.Errorf("the Job %s: %w", job.Name, rerr)
	}
	// A host key the Job trusted on first use is pinned from the
	// controller's own known_hosts file, as after an in-process run.
	if f := knownHostsFile(req.Inventory); f != "" && res.KnownHosts != "" {
		if err := os.WriteFile(f, []byte(res.KnownHosts), 0o600); err != nil {
			return Outcome{}, err
		}
	}
	log.FromContext(ctx).Info("run finished as a Job", "job", job.Name, "mode", req.Mode, "failed", res.Failed)
	out := res.outcome()
	out.Took = jobTook(job)
	return out, nil
}

// jobTook is how long a finished Job ran: its start to its completion, or
// to its Failed condition; 0 when its status does not say.
func jobTook(job *batchv1.Job) time.Duration {
	if job.Status.StartTime == nil {
		return 0
	}
	end := job.Status.CompletionTime
	for _, c := range job.Status.Conditions {
		if end == nil && c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			end = &c.LastTransitionTime
		}
	}
	if end == nil {
		return 0
	}
	return end.Sub(job.Status.StartTime.Time)
}

// instanceJobs are the Jobs wi controls whose result is not recorded yet,
// read from the API server (not a cache, which may not hold a Job just
// created: a second run must never start beside it).
func (j *JobRunner) instanceJobs(ctx context.Context, wi *wsuv1.WindowsInstance) ([]batchv1.Job, error) {
	list := &batchv1.JobList{}
	if err := j.Client.List(ctx, list, client.InNamespace(wi.Namespace), client.MatchingLabels{JobInstanceLabel: wi.Name}); err != nil {
		return nil, fmt.Errorf("listing the instance's Jobs: %w", err)
	}
	var out []batchv1.Job
	for _, job := range list.Items {
		if metav1.IsControlledBy(&job, wi) && job.Annotations[JobRecordedAnnotation] == "" && job.DeletionTimestamp.IsZero() {
			out = append(out, job)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].CreationTimestamp.Before(&out[b].CreationTimestamp) })
	return out, nil
}

// running counts the namespace's run Jobs not finished yet.
func (j *JobRunner) running(ctx context.Context, ns string) (int, error) {
	if j.Options.MaxRunning <= 0 {
		return 0, nil
	}
	list := &batchv1.JobList{}
	if err := j.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: JobSelector()}); err != nil {
		return 0, fmt.Errorf("listing the running Jobs: %w", err)
	}
	n := 0
	for i := range list.Items {
		if finished, _ := jobFinished(&list.Items[i]); !finished {
			n++
		}
	}
	return n, nil
}

// UnfinishedApplies are the namespace's apply Jobs not finished yet.
func (j *JobRunner) UnfinishedApplies(ctx context.Context, ns string) ([]batchv1.Job, error) {
	list := &batchv1.JobList{}
	if err := j.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{JobModeLabel: string(engine.ModeApply)}); err != nil {
		return nil, fmt.Errorf("listing the apply Jobs: %w", err)
	}
	var out []batchv1.Job
	for _, job := range list.Items {
		if finished, _ := jobFinished(&job); !finished && job.Labels[JobRunLabel] != "" {
			out = append(out, job)
		}
	}
	return out, nil
}

func (j *JobRunner) retry() time.Duration {
	if j.Options.Retry > 0 {
		return j.Options.Retry
	}
	return DefaultJobRetry
}

// markRecorded marks a finished Job whose result was read (or dropped), so
// no later pass reads it again; the TTL-after-finished controller deletes
// it later.
func (j *JobRunner) markRecorded(ctx context.Context, job *batchv1.Job) error {
	patch := client.MergeFrom(job.DeepCopy())
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[JobRecordedAnnotation] = "true"
	if err := j.Client.Patch(ctx, job, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("marking the Job %s recorded: %w", job.Name, err)
	}
	return nil
}

// runIdentity says which run a Job is: its instance (UID) at its spec's
// generation, its playbook and the Secret items it mounts (the key it logs
// in with: the controller's tryOtherKey tries the other one as a run of its
// own), hashed; its mode; the plan hash an apply is held to. Not the whole
// request: between the pass that starts a run and the one that reads it,
// the request changes with what the run itself recorded (a host key trusted
// on first use is pinned), and a new controller's known_hosts file is not
// its predecessor's. What a spec changed since would have asked for is
// guarded by the plan hash: an apply whose fresh plan is not the one it was
// held to applies nothing.
type runIdentity struct {
	run      string
	mode     engine.Mode
	playbook string
	hash     string
	plan     *Outcome
}

func identify(wi *wsuv1.WindowsInstance, sr setup.Request, req Request) (runIdentity, error) {
	data, err := json.Marshal(struct {
		UID        string  `json:"uid"`
		Generation int64   `json:"generation"`
		Playbook   string  `json:"playbook"`
		Secrets    Secrets `json:"secrets"`
	}{string(wi.UID), wi.Generation, req.Playbook, req.Secrets})
	if err != nil {
		return runIdentity{}, err
	}
	sum := sha256.Sum256(data)
	return runIdentity{run: hex.EncodeToString(sum[:])[:32], mode: sr.Mode, playbook: sr.Playbook, hash: sr.ExpectHash, plan: req.Planned}, nil
}

func (id runIdentity) labels(instance string) map[string]string {
	l := map[string]string{JobInstanceLabel: instance, JobModeLabel: string(id.mode), JobRunLabel: id.run, JobPlaybookLabel: LabelValue(id.playbook)}
	if id.hash != "" {
		l[JobPlanLabel] = id.hash
	}
	return l
}

// is says whether job is this run.
func (id runIdentity) is(job *batchv1.Job) bool {
	l := job.Labels
	return l[JobRunLabel] == id.run && l[JobModeLabel] == string(id.mode) && l[JobPlanLabel] == id.hash
}

// planOf is the plan an apply Job of this run carries out, when job is
// one.
func (id runIdentity) planOf(job *batchv1.Job) (Outcome, bool) {
	if job.Labels[JobRunLabel] != id.run || job.Labels[JobModeLabel] != string(engine.ModeApply) {
		return Outcome{}, false
	}
	var res jobResult
	if err := json.Unmarshal([]byte(job.Annotations[JobPlanAnnotation]), &res); err != nil || res.Hash == "" || res.Hash != job.Labels[JobPlanLabel] {
		return Outcome{}, false
	}
	return res.outcome(), true
}

// JobSelector selects the Jobs of runs (those with JobRunLabel).
func JobSelector() labels.Selector {
	req, err := labels.NewRequirement(JobRunLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key
	}
	return labels.NewSelector().Add(*req)
}

// LabelValue makes s a label value: the characters a label allows, at
// most 63, starting and ending with one that is alphanumeric.
func LabelValue(s string) string {
	s = strings.TrimPrefix(s, "wsu:")
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	s = string(b)
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-_.")
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

// createJob creates the run's Job, controlled by its instance (so its
// changes reconcile the instance, and it goes with the instance) and
// labelled with the run's identity.
func (j *JobRunner) createJob(ctx context.Context, wi *wsuv1.WindowsInstance, id runIdentity, tmpl corev1.PodTemplateSpec) (*batchv1.Job, error) {
	ttl, deadline := j.Options.TTL, j.Options.ActiveDeadline
	if ttl <= 0 {
		ttl = DefaultJobTTL
	}
	if deadline <= 0 {
		deadline = DefaultJobActiveDeadline
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{GenerateName: jobNamePrefix(wi.Name), Namespace: wi.Namespace, Labels: id.labels(wi.Name)},
		Spec: batchv1.JobSpec{
			BackoffLimit:            ptr.To[int32](0),
			ActiveDeadlineSeconds:   ptr.To(int64(deadline / time.Second)),
			TTLSecondsAfterFinished: ptr.To(int32(ttl / time.Second)),
			Template:                tmpl,
		},
	}
	if id.mode == engine.ModeApply && id.plan != nil {
		data, err := encodeResult(resultOf(*id.plan, ""))
		if err != nil {
			return nil, err
		}
		job.Annotations = map[string]string{JobPlanAnnotation: string(data)}
	}
	if err := controllerutil.SetControllerReference(wi, job, j.Client.Scheme()); err != nil {
		return nil, err
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
		Name:    JobContainer,
		Image:   j.Options.Image,
		Command: []string{JobCommand},
		Args: []string{"run-job",
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
