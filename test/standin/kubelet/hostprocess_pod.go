package main

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/wsu-project/wsu/test/downward"
)

// The HostProcess container environment: the sandbox mount point and
// where in it the ServiceAccount volume is.
const (
	envSandbox    = "CONTAINER_SANDBOX_MOUNT_POINT"
	saTokenDir    = `var\run\secrets\kubernetes.io\serviceaccount`
	tokenLifetime = 24 * time.Hour
	stopGrace     = 10 * time.Second
)

// podProcs is a running pod: one host process per container.
type podProcs struct {
	uid   types.UID
	procs []*proc
}

type proc struct {
	container string
	cmd       *exec.Cmd
	done      chan struct{}
	code      int // set before done closes
}

// stop sends SIGTERM to every process, and SIGKILL to those still there
// after stopGrace; it returns when all have exited.
func (p *podProcs) stop() {
	for _, pr := range p.procs {
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	}
	deadline := time.NewTimer(stopGrace)
	defer deadline.Stop()
	for _, pr := range p.procs {
		select {
		case <-pr.done:
		case <-deadline.C:
			_ = pr.cmd.Process.Kill()
			<-pr.done
		}
	}
}

// start prepares the pod's sandbox (ServiceAccount token, ConfigMap
// volumes), starts one stand-in per container and reports the pod Running.
func (r *podRunner) start(ctx context.Context, pod *corev1.Pod, bins []string) error {
	key := pod.Namespace + "/" + pod.Name
	sandbox := `C:\C\` + string(pod.UID)
	local, err := r.paths.Local(sandbox)
	if err != nil {
		return err
	}
	if err := r.writeServiceAccount(ctx, pod, filepath.Join(local, filepath.FromSlash(strings.ReplaceAll(saTokenDir, `\`, "/")))); err != nil {
		return err
	}
	if err := r.writeConfigMapVolumes(ctx, pod, local); err != nil {
		return err
	}
	restarts := r.restartCount(pod.UID)
	p := &podProcs{uid: pod.UID}
	for i, c := range pod.Spec.Containers {
		env, err := r.containerEnv(ctx, pod, &c, sandbox)
		if err != nil {
			p.stop()
			return fmt.Errorf("container %s: %w", c.Name, err)
		}
		pr, err := r.startProcess(pod, c.Name, bins[i], env, local, restarts)
		if err != nil {
			p.stop()
			return fmt.Errorf("container %s: %w", c.Name, err)
		}
		p.procs = append(p.procs, pr)
	}
	r.mu.Lock()
	r.running[key] = p
	r.mu.Unlock()
	for _, pr := range p.procs {
		go func() {
			<-pr.done
			r.exited(ctx, key, p, pr.container, pr.code)
		}()
	}
	log.Printf("pod %s: started %d HostProcess container(s) in sandbox %s", key, len(p.procs), sandbox)
	return r.setRunning(ctx, pod, p, restarts)
}

// startProcess runs one stand-in with the container's environment, its
// output in the kubelet's pod log layout
// (C:\var\log\pods\<ns>_<pod>_<uid>\<container>\<restarts>.log).
func (r *podRunner) startProcess(pod *corev1.Pod, container, bin string, env []string, dir string, restarts int32) (*proc, error) {
	logDir, err := r.paths.Local(fmt.Sprintf(`C:\var\log\pods\%s_%s_%s\%s`, pod.Namespace, pod.Name, pod.UID, container))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(logDir, strconv.Itoa(int(restarts))+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env, cmd.Dir = env, dir
	cmd.Stdout, cmd.Stderr = f, f
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	pr := &proc{container: container, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		pr.code = cmd.ProcessState.ExitCode()
		close(pr.done)
	}()
	log.Printf("pod %s/%s: container %s: started %s (pid %d)", pod.Namespace, pod.Name, container, filepath.Base(bin), cmd.Process.Pid)
	return pr, nil
}

// writeServiceAccount writes what the kube-api-access volume holds: a
// token bound to the pod (TokenRequest, which the Node authorizer allows
// a node for its own pods), the cluster CA (the one the node trusts the
// API server with) and the namespace.
func (r *podRunner) writeServiceAccount(ctx context.Context, pod *corev1.Pod, dir string) error {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	secs := int64(tokenLifetime / time.Second)
	tr, err := r.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs, BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token for ServiceAccount %s/%s: %w", pod.Namespace, sa, err)
	}
	ca := r.api.CAData
	if len(ca) == 0 && r.api.CAFile != "" {
		if ca, err = os.ReadFile(r.api.CAFile); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": ca, "namespace": []byte(pod.Namespace)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writeConfigMapVolumes writes each ConfigMap volume's keys under the
// sandbox at its mount paths (the Node authorizer lets a node read the
// ConfigMaps its pods use).
func (r *podRunner) writeConfigMapVolumes(ctx context.Context, pod *corev1.Pod, local string) error {
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm, err := r.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			if v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
				continue
			}
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
		for _, c := range pod.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name != v.Name {
					continue
				}
				dir := filepath.Join(local, filepath.FromSlash(strings.ReplaceAll(m.MountPath, `\`, "/")))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				for k, data := range cm.Data {
					if err := os.WriteFile(filepath.Join(dir, k), []byte(data), 0o644); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// containerEnv is the process environment: the kubelet's own (with
// WSU_SIM_ROOT), KUBERNETES_SERVICE_HOST/PORT naming the API server's
// real address (a real kubelet gives the kubernetes Service's VIP, which
// nothing routes here), the sandbox mount point, then the container's env
// (value, fieldRef, configMapKeyRef), which overrides the rest.
func (r *podRunner) containerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sandbox string) ([]string, error) {
	u, err := url.Parse(r.api.Host)
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), "KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+u.Port(), envSandbox+"="+sandbox)
	cms := map[string]*corev1.ConfigMap{}
	for _, e := range c.Env {
		v, ok, err := r.envValue(ctx, pod, e, cms)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if ok {
			env = append(env, e.Name+"="+v)
		}
	}
	return env, nil
}

// envValue resolves one variable; ok is false for a missing optional key.
func (r *podRunner) envValue(ctx context.Context, pod *corev1.Pod, e corev1.EnvVar, cms map[string]*corev1.ConfigMap) (string, bool, error) {
	switch {
	case e.ValueFrom == nil:
		return e.Value, true, nil
	case e.ValueFrom.FieldRef != nil:
		v, err := r.fieldValue(pod, e.ValueFrom.FieldRef.FieldPath)
		return v, err == nil, err
	case e.ValueFrom.ConfigMapKeyRef != nil:
		ref := e.ValueFrom.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, ok := cms[ref.Name]
		if !ok {
			var err error
			if cm, err = r.cs.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{}); err != nil {
				if optional {
					return "", false, nil
				}
				return "", false, err
			}
			cms[ref.Name] = cm
		}
		v, ok := cm.Data[ref.Key]
		if !ok && !optional {
			return "", false, fmt.Errorf("ConfigMap %s has no key %s", ref.Name, ref.Key)
		}
		return v, ok, nil
	}
	return "", false, fmt.Errorf("the stand-in resolves only value, fieldRef and configMapKeyRef")
}

// fieldValue is a downward API field of the pod: HostProcess pods are on
// the host network, so their IP is the node's.
func (r *podRunner) fieldValue(pod *corev1.Pod, path string) (string, error) {
	return downward.FieldValue(pod, path, r.o.nodeIP.String())
}

// setRunning reports the pod Running and Ready, its containers started.
func (r *podRunner) setRunning(ctx context.Context, pod *corev1.Pod, p *podProcs, restarts int32) error {
	now := metav1.Now()
	return r.updateStatus(ctx, pod.Namespace, pod.Name, pod.UID, func(s *corev1.PodStatus, spec *corev1.PodSpec) {
		s.Phase = corev1.PodRunning
		ip := r.o.nodeIP.String()
		s.HostIP, s.PodIP = ip, ip
		s.HostIPs, s.PodIPs = []corev1.HostIP{{IP: ip}}, []corev1.PodIP{{IP: ip}}
		if s.StartTime == nil {
			s.StartTime = &now
		}
		setConditions(s, corev1.ConditionTrue, "", now)
		s.ContainerStatuses = nil
		for i, c := range spec.Containers {
			started, ready := true, true
			s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: ready, Started: &started, RestartCount: restarts,
				ContainerID: fmt.Sprintf("standin://%d", p.procs[i].cmd.Process.Pid),
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			})
		}
	})
}

// setCrashed reports a container that exited: the pod not Ready, the
// container waiting in back-off with its last exit code.
func (r *podRunner) setCrashed(ctx context.Context, key string, uid types.UID, container string, code int, restarts int32) error {
	ns, name, _ := strings.Cut(key, "/")
	now := metav1.Now()
	return r.updateStatus(ctx, ns, name, uid, func(s *corev1.PodStatus, _ *corev1.PodSpec) {
		setConditions(s, corev1.ConditionFalse, "ContainersNotReady", now)
		for i := range s.ContainerStatuses {
			cs := &s.ContainerStatuses[i]
			started := false
			cs.Ready, cs.Started, cs.RestartCount = false, &started, restarts
			if cs.Name == container {
				cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: int32(code), Reason: "Error", FinishedAt: now}}
				cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
					Message: fmt.Sprintf("exited with code %d (stand-in process)", code)}}
			}
		}
	})
}

func setConditions(s *corev1.PodStatus, ready corev1.ConditionStatus, reason string, now metav1.Time) {
	want := map[corev1.PodConditionType]corev1.ConditionStatus{
		corev1.PodScheduled: corev1.ConditionTrue, corev1.PodInitialized: corev1.ConditionTrue,
		corev1.ContainersReady: ready, corev1.PodReady: ready,
	}
	for t, st := range want {
		found := false
		for i := range s.Conditions {
			c := &s.Conditions[i]
			if c.Type != t {
				continue
			}
			found = true
			if c.Status != st {
				c.Status, c.Reason, c.LastTransitionTime = st, reason, now
			}
		}
		if !found {
			s.Conditions = append(s.Conditions, corev1.PodCondition{Type: t, Status: st, Reason: reason, LastTransitionTime: now})
		}
	}
}

// updateStatus edits the pod's status as the node (NodeRestriction lets
// it update its own pods), on the pod of that UID only.
func (r *podRunner) updateStatus(ctx context.Context, ns, name string, uid types.UID, edit func(*corev1.PodStatus, *corev1.PodSpec)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := r.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || pod.UID != uid {
			return err
		}
		edit(&pod.Status, &pod.Spec)
		_, err = r.cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}
