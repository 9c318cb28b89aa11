//go:build linux

package podrunner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// maxTerminationMessage is the kubelet's bound on one container's message.
const maxTerminationMessage = 4096

// maxGrace bounds how long a deleted pod's containers get after SIGTERM.
const maxGrace = 30 * time.Second

// podRun runs one pod's containers and reports their states.
type podRun struct {
	r   *Runner
	pod *corev1.Pod // as first seen: its spec does not change

	// ctx ends when the pod's containers must stop (deletion).
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	grace    time.Duration
	deleting bool
	finished bool
	start    metav1.Time
	initSt   []corev1.ContainerStatus
	mainSt   []corev1.ContainerStatus
	phase    corev1.PodPhase
	reason   string
	message  string
}

func newPodRun(r *Runner, pod *corev1.Pod) *podRun {
	ctx, cancel := context.WithCancel(context.Background())
	p := &podRun{r: r, pod: pod.DeepCopy(), ctx: ctx, cancel: cancel, grace: maxGrace, phase: corev1.PodPending, start: metav1.Now()}
	for _, c := range pod.Spec.InitContainers {
		p.initSt = append(p.initSt, waiting(c, "PodInitializing"))
	}
	for _, c := range pod.Spec.Containers {
		p.mainSt = append(p.mainSt, waiting(c, "ContainerCreating"))
	}
	return p
}

func waiting(c corev1.Container, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func (p *podRun) name() string { return p.pod.Namespace + "/" + p.pod.Name }

// terminate starts a graceful deletion: SIGTERM now, SIGKILL after the
// grace period; a pod already finished is removed at once.
func (p *podRun) terminate(ctx context.Context, pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleting {
		return
	}
	p.deleting = true
	if pod.DeletionGracePeriodSeconds != nil {
		p.grace = min(maxGrace, time.Duration(*pod.DeletionGracePeriodSeconds)*time.Second)
	}
	if p.finished {
		p.r.goFinishDeletion(ctx, pod)
		return
	}
	p.r.logf("pod %s: deleted, stopping its containers", p.name())
	p.cancel()
}

// kill stops the containers of a pod the API server no longer has.
func (p *podRun) kill() {
	p.mu.Lock()
	p.deleting, p.grace = true, 0
	p.mu.Unlock()
	p.cancel()
}

// run runs the pod to its end (or its deletion) and reports it.
func (p *podRun) run(ctx context.Context) {
	dir := p.r.podDir(p.pod)
	p.r.logf("pod %s: starting (%d init, %d containers)", p.name(), len(p.pod.Spec.InitContainers), len(p.pod.Spec.Containers))
	p.report(ctx)
	err := p.runAll(ctx, dir)
	p.mu.Lock()
	switch {
	case err != nil:
		p.phase, p.reason, p.message = corev1.PodFailed, "PodRunnerError", err.Error()
	case p.phase != corev1.PodFailed:
		p.phase = corev1.PodSucceeded
		for _, st := range p.mainSt {
			if st.State.Terminated == nil || st.State.Terminated.ExitCode != 0 {
				p.phase = corev1.PodFailed
			}
		}
	}
	deleting := p.deleting
	p.finished = true
	p.mu.Unlock()
	if err != nil {
		p.r.logf("pod %s: %v", p.name(), err)
	}
	if deleting {
		p.r.finishDeletion(ctx, p.pod)
		return
	}
	p.r.logf("pod %s: %s", p.name(), p.phase)
	p.report(ctx)
	os.RemoveAll(filepath.Join(dir, "volumes"))
}

// runAll prepares the volumes, runs the init containers in order, then the
// containers at once.
func (p *podRun) runAll(ctx context.Context, dir string) error {
	vols, err := p.r.prepareVolumes(ctx, p.pod, filepath.Join(dir, "volumes"))
	if err != nil {
		return err
	}
	for i := range p.pod.Spec.InitContainers {
		if !p.runRestarting(i, true, vols) {
			p.mu.Lock()
			p.phase = corev1.PodFailed
			p.mu.Unlock()
			p.report(ctx)
			return nil
		}
	}
	p.mu.Lock()
	p.phase = corev1.PodRunning
	p.mu.Unlock()
	var wg sync.WaitGroup
	for i := range p.pod.Spec.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.runRestarting(i, false, vols)
		}()
	}
	wg.Wait()
	return nil
}

// runRestarting runs a container until it need not run again under the
// pod's restart policy; it reports whether it last exited 0.
func (p *podRun) runRestarting(i int, init bool, vols map[string]string) bool {
	delay := time.Second
	for restarts := int32(0); ; restarts++ {
		code := p.runOnce(i, init, restarts, vols)
		if p.ctx.Err() != nil {
			return false
		}
		policy := p.pod.Spec.RestartPolicy
		switch {
		case policy == corev1.RestartPolicyNever,
			code == 0 && (init || policy == corev1.RestartPolicyOnFailure):
			return code == 0
		}
		select {
		case <-p.ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// runOnce runs a container once and records its end; it returns the exit
// code (-1: it could not start).
func (p *podRun) runOnce(i int, init bool, restarts int32, vols map[string]string) int {
	c := &p.pod.Spec.Containers[i]
	if init {
		c = &p.pod.Spec.InitContainers[i]
	}
	id := fmt.Sprintf("podrunner://%s-%s-%d", p.pod.UID, c.Name, restarts)
	started := metav1.Now()
	code, msg, err := p.exec(c, restarts, vols, func() {
		p.setState(i, init, restarts, id, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}})
	})
	if err != nil {
		p.r.logf("pod %s: container %s: %v", p.name(), c.Name, err)
		reason := "CreateContainerError"
		var pull errImagePull
		if errors.As(err, &pull) {
			reason = "ErrImagePull"
		}
		p.setState(i, init, restarts, "", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}})
		return -1
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	p.r.logf("pod %s: container %s exited %d", p.name(), c.Name, code)
	p.setState(i, init, restarts, id, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, Message: msg, StartedAt: started, FinishedAt: metav1.Now(), ContainerID: id}})
	return code
}

func (p *podRun) setState(i int, init bool, restarts int32, id string, st corev1.ContainerState) {
	p.mu.Lock()
	list := p.mainSt
	if init {
		list = p.initSt
	}
	s := &list[i]
	if s.State.Terminated != nil && st.Terminated == nil {
		s.LastTerminationState = s.State
	}
	s.State, s.RestartCount, s.ContainerID = st, restarts, id
	s.Ready = st.Running != nil || (init && st.Terminated != nil && st.Terminated.ExitCode == 0)
	started := st.Running != nil
	s.Started = &started
	p.mu.Unlock()
	p.report(p.r.reportCtx())
}

type errImagePull struct{ error }

// exec prepares a container's root file system and runs its process to
// its end; running is called once it started.
func (p *podRun) exec(c *corev1.Container, restarts int32, vols map[string]string, running func()) (code int, msg string, err error) {
	imgPath, ok := p.r.opts.Images[c.Image]
	if !ok {
		return 0, "", errImagePull{fmt.Errorf("image %q is not one the pod runner was given", c.Image)}
	}
	img, err := p.r.image(c.Image, imgPath)
	if err != nil {
		return 0, "", errImagePull{err}
	}
	cf := img.config
	dir := p.r.podDir(p.pod)
	rootfs := filepath.Join(dir, fmt.Sprintf("%s-%d", c.Name, restarts))
	var mounts []string
	defer func() {
		// Never remove a root file system something is still mounted in:
		// the removal would reach into the volume or the host's /dev.
		cerr := unmountAll(mounts)
		if cerr == nil {
			cerr = os.RemoveAll(rootfs)
		}
		if cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := linkTree(img.root, rootfs); err != nil {
		return 0, "", err
	}
	uid, gid, err := credential(p.pod, c, &cf.Config)
	if err != nil {
		return 0, "", err
	}
	msgPath, err := prepareRoot(rootfs, c, uid, gid)
	if err != nil {
		return 0, "", err
	}
	sys, err := bindSystem(rootfs)
	mounts = append(mounts, sys...)
	if err != nil {
		return 0, "", err
	}
	vm, err := mountVolumes(rootfs, c, vols)
	mounts = append(mounts, vm...)
	if err != nil {
		return 0, "", err
	}
	cmd, logFile, err := p.command(c, &cf.Config, rootfs, uid, gid)
	if err != nil {
		return 0, "", err
	}
	defer logFile.Close()
	if err := cmd.Start(); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, "", fmt.Errorf("starting %s: %w (if the file is there: a dynamically linked program whose loader the image lacks)", cmd.Path, err)
		}
		return 0, "", fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	running()
	code = p.wait(cmd)
	return code, terminationMessage(c, msgPath, logFile.Name(), code), nil
}

// prepareRoot makes the directories a process expects (/tmp, /dev) and
// the termination message file, writable by the container's user; it
// returns the message file's host path.
func prepareRoot(rootfs string, c *corev1.Container, uid, gid uint32) (string, error) {
	tmp, err := resolveIn(rootfs, "/tmp")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(tmp, 0o777); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		return "", err
	}
	msgFile := c.TerminationMessagePath
	if msgFile == "" {
		msgFile = corev1.TerminationMessagePathDefault
	}
	host, err := resolveIn(rootfs, msgFile)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(host, nil, 0o666); err != nil {
		return "", err
	}
	return host, os.Chown(host, int(uid), int(gid))
}

// command builds the container's process: chrooted, as its user, in its
// own process group, its output appended to its log file.
func (p *podRun) command(c *corev1.Container, cfg *v1.Config, rootfs string, uid, gid uint32) (*exec.Cmd, *os.File, error) {
	env, err := p.r.environment(p.r.reportCtx(), p.pod, c, cfg)
	if err != nil {
		return nil, nil, err
	}
	args := argv(c, cfg, env.vals)
	if len(args) == 0 {
		return nil, nil, errors.New("no command: the pod and the image give none")
	}
	bin, err := lookPath(rootfs, args[0], env.vals["PATH"])
	if err != nil {
		return nil, nil, err
	}
	wd := c.WorkingDir
	if wd == "" {
		wd = cfg.WorkingDir
	}
	if wd == "" {
		wd = "/"
	}
	if host, err := resolveIn(rootfs, wd); err == nil {
		if err := os.MkdirAll(host, 0o755); err != nil {
			return nil, nil, err
		}
	}
	logFile, err := os.OpenFile(p.r.LogPath(p.pod, c.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Path: bin, Args: args, Env: env.environ(), Dir: wd,
		Stdout: logFile, Stderr: logFile,
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     rootfs,
			Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}},
			Setpgid:    true,
			Pdeathsig:  syscall.SIGKILL,
		},
	}
	return cmd, logFile, nil
}

// wait waits for the process; a deleted pod's gets SIGTERM, then SIGKILL
// after the grace period (the whole process group). It returns the exit
// code, 128+signal for a killed process.
func (p *podRun) wait(cmd *exec.Cmd) int {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-p.ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			p.mu.Lock()
			grace := p.grace
			p.mu.Unlock()
			select {
			case <-done:
			case <-time.After(grace):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		}
	}()
	_ = cmd.Wait()
	close(done)
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// terminationMessage reads what the container wrote to its termination
// message file, or, for FallbackToLogsOnError and a failure with none, the
// end of its log; at most maxTerminationMessage bytes.
func terminationMessage(c *corev1.Container, msgPath, logPath string, code int) string {
	msg := readTail(msgPath, false)
	if msg == "" && code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		msg = readTail(logPath, true)
	}
	return msg
}

// readTail reads at most maxTerminationMessage bytes: the start of a
// message file, the end of a log.
func readTail(path string, end bool) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if end {
		if fi, err := f.Stat(); err == nil && fi.Size() > maxTerminationMessage {
			if _, err := f.Seek(fi.Size()-maxTerminationMessage, io.SeekStart); err != nil {
				return ""
			}
		}
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxTerminationMessage))
	return string(b)
}

// report writes the pod's status as it is now.
func (p *podRun) report(ctx context.Context) {
	p.mu.Lock()
	st := p.status()
	deleting := p.deleting
	p.mu.Unlock()
	if deleting {
		return // it is going away; its last status does not matter
	}
	pods := p.r.client.CoreV1().Pods(p.pod.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, p.pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.pod.UID {
			return nil
		}
		st.Conditions = mergeConditions(cur.Status.Conditions, st.Conditions)
		cur.Status = st
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		p.r.logf("pod %s: writing status: %v", p.name(), err)
	}
}

// status is the pod's status from the runner's state; p.mu is held.
func (p *podRun) status() corev1.PodStatus {
	initDone, allReady := true, p.phase == corev1.PodRunning
	for _, s := range p.initSt {
		if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
			initDone = false
		}
	}
	for _, s := range p.mainSt {
		if !s.Ready {
			allReady = false
		}
	}
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: t, Status: s}
	}
	return corev1.PodStatus{
		Phase:                 p.phase,
		Reason:                p.reason,
		Message:               p.message,
		HostIP:                loopback,
		HostIPs:               []corev1.HostIP{{IP: loopback}},
		PodIP:                 loopback,
		PodIPs:                []corev1.PodIP{{IP: loopback}},
		StartTime:             &p.start,
		InitContainerStatuses: clone(p.initSt),
		ContainerStatuses:     clone(p.mainSt),
		Conditions: []corev1.PodCondition{
			cond(corev1.PodReadyToStartContainers, true),
			cond(corev1.PodInitialized, initDone),
			cond(corev1.ContainersReady, allReady),
			cond(corev1.PodReady, allReady),
		},
	}
}

func clone(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// mergeConditions keeps conditions others own (PodScheduled,
// DisruptionTarget) and sets the runner's, keeping transition times of
// unchanged ones.
func mergeConditions(cur, mine []corev1.PodCondition) []corev1.PodCondition {
	now := metav1.Now()
	out := make([]corev1.PodCondition, 0, len(cur)+len(mine))
	for _, c := range cur {
		if !hasCondition(mine, c.Type) {
			out = append(out, c)
		}
	}
	for _, m := range mine {
		m.LastTransitionTime = now
		for _, c := range cur {
			if c.Type == m.Type && c.Status == m.Status {
				m.LastTransitionTime = c.LastTransitionTime
			}
		}
		out = append(out, m)
	}
	return out
}

func hasCondition(list []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range list {
		if c.Type == t {
			return true
		}
	}
	return false
}
