//go:build linux

package podrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// file is one file of a volume: its path inside the volume, content and
// mode.
type file struct {
	path string
	data []byte
	mode os.FileMode
}

// prepareVolumes writes each of the pod's volumes into dir/NAME and
// returns the host directory of each.
func (r *Runner) prepareVolumes(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		d := filepath.Join(dir, v.Name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		files, err := r.volumeFiles(ctx, pod, v)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		if v.EmptyDir != nil {
			if err := os.Chmod(d, 0o777); err != nil {
				return nil, err
			}
		}
		for _, f := range files {
			if err := writeVolumeFile(d, f); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
		out[v.Name] = d
	}
	return out, nil
}

func writeVolumeFile(dir string, f file) error {
	clean := path.Clean("/" + f.path)
	if clean == "/" || strings.Contains(f.path, "..") {
		return fmt.Errorf("%q is not a file path in a volume", f.path)
	}
	p := filepath.Join(dir, clean)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, f.data, f.mode); err != nil {
		return err
	}
	return os.Chmod(p, f.mode)
}

// volumeFiles returns what a volume holds (nothing for an emptyDir).
func (r *Runner) volumeFiles(ctx context.Context, pod *corev1.Pod, v corev1.Volume) ([]file, error) {
	switch {
	case v.EmptyDir != nil:
		return nil, nil
	case v.ConfigMap != nil:
		return r.configMapFiles(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, mode(v.ConfigMap.DefaultMode))
	case v.Secret != nil:
		return r.secretFiles(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, mode(v.Secret.DefaultMode))
	case v.DownwardAPI != nil:
		return downwardFiles(pod, v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode))
	case v.Projected != nil:
		return r.projectedFiles(ctx, pod, v.Projected)
	}
	return nil, errors.New("only configMap, secret, emptyDir, downwardAPI and projected volumes are supported by the pod runner")
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m) & os.ModePerm
}

func (r *Runner) configMapFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool, def os.FileMode) ([]file, error) {
	cm, err := r.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles("ConfigMap "+name, data, items, def)
}

func (r *Runner) secretFiles(ctx context.Context, ns, name string, items []corev1.KeyToPath, optional *bool, def os.FileMode) ([]file, error) {
	s, err := r.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return keyFiles("Secret "+name, s.Data, items, def)
}

// keyFiles maps keys to files: every key under its own name, or the items.
func keyFiles(what string, data map[string][]byte, items []corev1.KeyToPath, def os.FileMode) ([]file, error) {
	if len(items) == 0 {
		var out []file
		for k, v := range data {
			out = append(out, file{path: k, data: v, mode: def})
		}
		return out, nil
	}
	var out []file
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		m := def
		if it.Mode != nil {
			m = mode(it.Mode)
		}
		out = append(out, file{path: it.Path, data: v, mode: m})
	}
	return out, nil
}

func downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, def os.FileMode) ([]file, error) {
	var out []file
	for _, it := range items {
		if it.FieldRef == nil {
			return nil, fmt.Errorf("downwardAPI %s: only fieldRef is supported", it.Path)
		}
		v, err := fieldValue(pod, it.FieldRef.FieldPath)
		if err != nil {
			return nil, err
		}
		m := def
		if it.Mode != nil {
			m = mode(it.Mode)
		}
		out = append(out, file{path: it.Path, data: []byte(v), mode: m})
	}
	return out, nil
}

func (r *Runner) projectedFiles(ctx context.Context, pod *corev1.Pod, p *corev1.ProjectedVolumeSource) ([]file, error) {
	def := mode(p.DefaultMode)
	var out []file
	for _, src := range p.Sources {
		var fs []file
		var err error
		switch {
		case src.ServiceAccountToken != nil:
			fs, err = r.tokenFile(ctx, pod, src.ServiceAccountToken, def)
		case src.ConfigMap != nil:
			fs, err = r.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional, def)
		case src.Secret != nil:
			fs, err = r.secretFiles(ctx, pod.Namespace, src.Secret.Name, src.Secret.Items, src.Secret.Optional, def)
		case src.DownwardAPI != nil:
			fs, err = downwardFiles(pod, src.DownwardAPI.Items, def)
		default:
			err = errors.New("only serviceAccountToken, configMap, secret and downwardAPI projections are supported")
		}
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// tokenFile asks the API server for a token of the pod's ServiceAccount,
// bound to the pod, as the kubelet does (never refreshed here).
func (r *Runner) tokenFile(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection, def os.FileMode) ([]file, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: src.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	tok, err := r.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of ServiceAccount %s: %w", sa, err)
	}
	return []file{{path: src.Path, data: []byte(tok.Status.Token), mode: def}}, nil
}

// mountVolumes bind-mounts the container's volume mounts into its root
// file system and returns the mount points, innermost last.
func mountVolumes(rootfs string, c *corev1.Container, vols map[string]string) ([]string, error) {
	var mounted []string
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return mounted, fmt.Errorf("volume mount %s: no volume %q", m.MountPath, m.Name)
		}
		if m.SubPath != "" {
			if strings.Contains(m.SubPath, "..") {
				return mounted, fmt.Errorf("volume mount %s: subPath %q", m.MountPath, m.SubPath)
			}
			src = filepath.Join(src, m.SubPath)
		}
		dst, err := resolveIn(rootfs, m.MountPath)
		if err != nil {
			return mounted, err
		}
		if err := mountPoint(src, dst); err != nil {
			return mounted, fmt.Errorf("volume mount %s: %w", m.MountPath, err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return mounted, fmt.Errorf("volume mount %s: bind: %w", m.MountPath, err)
		}
		mounted = append(mounted, dst)
		if m.ReadOnly {
			if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return mounted, fmt.Errorf("volume mount %s: read-only: %w", m.MountPath, err)
			}
		}
	}
	return mounted, nil
}

// mountPoint creates what src is bound onto: a directory, or an empty
// file for a file (a subPath of one key).
func mountPoint(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.MkdirAll(dst, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// unmountAll detaches mounts, innermost first.
func unmountAll(mounts []string) error {
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mounts[i], err))
		}
	}
	return errors.Join(errs...)
}

// bindSystem makes the host's /dev/null, zero, random and urandom (no
// mknod needed) and /proc visible in a root file system. /proc is the
// host's (no PID namespace): /proc/self is still the reading process, which
// os.Executable needs.
func bindSystem(rootfs string) ([]string, error) {
	var mounted []string
	for _, p := range []string{"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/proc"} {
		dst := filepath.Join(rootfs, p)
		if err := mountPoint(p, dst); err != nil {
			return mounted, err
		}
		if err := unix.Mount(p, dst, "", unix.MS_BIND, ""); err != nil {
			return mounted, fmt.Errorf("binding %s: %w", p, err)
		}
		mounted = append(mounted, dst)
	}
	return mounted, nil
}
