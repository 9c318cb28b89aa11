//go:build linux

package podrunner

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsu-project/wsu/test/downward"
)

// defaultPath is the PATH of a container whose image sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// envList is an ordered environment: later entries win, as in the kubelet.
type envList struct {
	names []string
	vals  map[string]string
}

func (e *envList) set(k, v string) {
	if e.vals == nil {
		e.vals = map[string]string{}
	}
	if _, ok := e.vals[k]; !ok {
		e.names = append(e.names, k)
	}
	e.vals[k] = v
}

func (e *envList) environ() []string {
	out := make([]string, 0, len(e.names))
	for _, k := range e.names {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}

// environment builds a container's environment: the image's, the service
// variables of the API server, then envFrom and env in order, with $(VAR)
// references to earlier variables expanded.
func (r *Runner) environment(ctx context.Context, pod *corev1.Pod, c *corev1.Container, cfg *v1.Config) (*envList, error) {
	e := &envList{}
	e.set("PATH", defaultPath)
	e.set("HOME", "/") // what container runtimes give a user without a home
	for _, kv := range cfg.Env {
		k, v, _ := strings.Cut(kv, "=")
		e.set(k, v)
	}
	e.set("HOSTNAME", pod.Name)
	e.set("KUBERNETES_SERVICE_HOST", r.apiHost)
	e.set("KUBERNETES_SERVICE_PORT", r.apiPort)
	e.set("KUBERNETES_SERVICE_PORT_HTTPS", r.apiPort)
	for _, from := range c.EnvFrom {
		data, err := r.envFrom(ctx, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			e.set(from.Prefix+k, v)
		}
	}
	for _, ev := range c.Env {
		v := expand(ev.Value, e.vals)
		if ev.ValueFrom != nil {
			var err error
			if v, err = r.valueFrom(ctx, pod, ev.ValueFrom); err != nil {
				return nil, fmt.Errorf("env %s: %w", ev.Name, err)
			}
		}
		e.set(ev.Name, v)
	}
	return e, nil
}

func (r *Runner) envFrom(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	out := map[string]string{}
	switch {
	case from.ConfigMapRef != nil:
		cm, err := r.client.CoreV1().ConfigMaps(ns).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
		if optionalMissing(err, from.ConfigMapRef.Optional) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := r.client.CoreV1().Secrets(ns).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
		if optionalMissing(err, from.SecretRef.Optional) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		for k, v := range s.Data {
			out[k] = string(v)
		}
	}
	return out, nil
}

func optionalMissing(err error, optional *bool) bool {
	return apierrors.IsNotFound(err) && optional != nil && *optional
}

func (r *Runner) valueFrom(ctx context.Context, pod *corev1.Pod, src *corev1.EnvVarSource) (string, error) {
	switch {
	case src.FieldRef != nil:
		return fieldValue(pod, src.FieldRef.FieldPath)
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := r.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if optionalMissing(err, ref.Optional) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		v, ok := cm.Data[ref.Key]
		if !ok && (ref.Optional == nil || !*ref.Optional) {
			return "", fmt.Errorf("the ConfigMap %s has no key %q", ref.Name, ref.Key)
		}
		return v, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := r.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if optionalMissing(err, ref.Optional) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		v, ok := s.Data[ref.Key]
		if !ok && (ref.Optional == nil || !*ref.Optional) {
			return "", fmt.Errorf("the Secret %s has no key %q", ref.Name, ref.Key)
		}
		return string(v), nil
	}
	return "", fmt.Errorf("only fieldRef, configMapKeyRef and secretKeyRef are supported")
}

// fieldValue is a downward API field of the pod (on the host's network:
// the loopback address).
func fieldValue(pod *corev1.Pod, field string) (string, error) {
	return downward.FieldValue(pod, field, loopback)
}

// expand replaces $(NAME) with NAME's value when it is defined, and $$ with
// $, as the kubelet expands env values, command and args.
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i:], ')'); end > 0 {
				name := s[i+2 : i+end]
				if v, ok := vals[name]; ok {
					b.WriteString(v)
					i += end
					continue
				}
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// argv is the command line: the Pod's command and args, else the image's
// entrypoint and cmd, as the kubelet combines them.
func argv(c *corev1.Container, cfg *v1.Config, vals map[string]string) []string {
	var out []string
	switch {
	case len(c.Command) > 0:
		out = append(append(out, c.Command...), c.Args...)
	case len(c.Args) > 0:
		out = append(append(out, cfg.Entrypoint...), c.Args...)
	default:
		out = append(append(out, cfg.Entrypoint...), cfg.Cmd...)
	}
	for i := range out {
		out[i] = expand(out[i], vals)
	}
	return out
}

// lookPath finds a command inside the root file system, by the container's
// PATH when it has no slash.
func lookPath(rootfs, name, pathVar string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(pathVar) {
		p := path.Join("/", dir, name)
		host, err := resolveIn(rootfs, p)
		if err != nil {
			continue
		}
		if fi, err := os.Stat(host); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in the image's PATH %s", name, pathVar)
}

// credential is the user and group a container runs as: its
// securityContext, the pod's, else the image's USER (numeric only), else
// root.
func credential(pod *corev1.Pod, c *corev1.Container, cfg *v1.Config) (uid, gid uint32, err error) {
	var u, g *int64
	if psc := pod.Spec.SecurityContext; psc != nil {
		u, g = psc.RunAsUser, psc.RunAsGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			u = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			g = sc.RunAsGroup
		}
	}
	if u == nil && cfg.User != "" {
		us, gs, _ := strings.Cut(cfg.User, ":")
		n, err := strconv.ParseInt(us, 10, 32)
		if err != nil {
			return 0, 0, fmt.Errorf("image user %q: only numeric users are supported by the pod runner", cfg.User)
		}
		u = &n
		if gs != "" && g == nil {
			m, err := strconv.ParseInt(gs, 10, 32)
			if err != nil {
				return 0, 0, fmt.Errorf("image user %q: only numeric groups are supported", cfg.User)
			}
			g = &m
		}
	}
	if u != nil {
		uid = uint32(*u)
	}
	if g != nil {
		gid = uint32(*g)
	}
	if nonRoot := runAsNonRoot(pod, c); nonRoot && uid == 0 {
		return 0, 0, fmt.Errorf("container %s has runAsNonRoot and would run as root", c.Name)
	}
	return uid, gid, nil
}

func runAsNonRoot(pod *corev1.Pod, c *corev1.Container) bool {
	if c.SecurityContext != nil && c.SecurityContext.RunAsNonRoot != nil {
		return *c.SecurityContext.RunAsNonRoot
	}
	return pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsNonRoot != nil && *pod.Spec.SecurityContext.RunAsNonRoot
}
