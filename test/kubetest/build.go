package kubetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// CacheEnv overrides the directory the binaries are cached in
// (default: the user cache directory's wsu/kube, e.g. ~/.cache/wsu/kube).
const CacheEnv = "WSU_KUBETEST_CACHE"

// The control-plane binaries kubetest can build, by wrapper name.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	// Kubectl is the client, not a control-plane part: what the tests and
	// the controller demo run where an admin runs kubectl.
	Kubectl = "kubectl"
)

// wrapper is one of the nested modules that build a control-plane binary.
type wrapper struct {
	name string // binary and directory name
	// module whose version is the binary's; its go.mod version is stamped
	// in with ldflags.
	module string
	stamp  func(version string) []string
}

// wrappers lists every binary; each is built and cached on its own, so
// adding one never rebuilds the others.
var wrappers = []wrapper{
	{name: Etcd, module: "go.etcd.io/etcd/server/v3"},
	{name: KubeAPIServer, module: "k8s.io/kubernetes", stamp: kubeVersionFlags},
	{name: KubeControllerManager, module: "k8s.io/kubernetes", stamp: kubeVersionFlags},
	{name: KubeScheduler, module: "k8s.io/kubernetes", stamp: kubeVersionFlags},
	{name: Kubectl, module: "k8s.io/kubectl", stamp: stagingVersionFlags},
}

// legacyPair is what the first layout cached together under one key.
var legacyPair = []string{Etcd, KubeAPIServer}

func wrapperNamed(name string) (wrapper, error) {
	for _, w := range wrappers {
		if w.name == name {
			return w, nil
		}
	}
	return wrapper{}, fmt.Errorf("kubetest: no wrapper module builds %q", name)
}

// kubeVersionFlags sets what `kube-apiserver --version` and the /version
// endpoint report; unstamped, they say v0.0.0 and clients warn about skew.
func kubeVersionFlags(v string) []string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(semver.MajorMinor(v), "v"), ".")
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+v,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean")
	}
	return flags
}

// stagingVersionFlags stamps a binary built from a staging module
// (k8s.io/kubectl v0.X.Y) with the Kubernetes release it belongs to
// (v1.X.Y), as `kubectl version` reports it.
func stagingVersionFlags(v string) []string {
	return kubeVersionFlags("v1" + strings.TrimPrefix(v, "v0"))
}

// sourceDir is this package's directory, which holds the wrapper modules.
// They cannot be embedded: go:embed skips nested modules.
func sourceDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kubetest: cannot locate its source directory")
	}
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, KubeAPIServer, "go.mod")); err != nil {
		return "", fmt.Errorf("kubetest: wrapper modules not found beside %s (built with -trimpath?): %w", file, err)
	}
	return dir, nil
}

// goTool is the go command that builds the wrappers. go test puts its own
// GOROOT/bin first in PATH, so this is the toolchain running the tests.
func goTool() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("kubetest: the go command is needed to build the control plane, and is not in PATH")
	}
	return p, nil
}

// binaryKey hashes everything one binary depends on: its wrapper's go.mod,
// go.sum and main.go, and the Go version.
func binaryKey(src, name, goVersion string) (string, error) {
	return hashWrappers(src, goVersion, []string{name})
}

// legacyKey is the key of the first layout, which cached etcd and
// kube-apiserver together in ROOT/KEY/: binaries found there are reused.
func legacyKey(src, goVersion string) (string, error) {
	return hashWrappers(src, goVersion, legacyPair)
}

func hashWrappers(src, goVersion string, names []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "go %s\n", goVersion)
	for _, name := range names {
		for _, f := range []string{"go.mod", "go.sum", "main.go"} {
			b, err := os.ReadFile(filepath.Join(src, name, f))
			if err != nil {
				return "", fmt.Errorf("kubetest: %w", err)
			}
			fmt.Fprintf(h, "%s/%s %d\n", name, f, len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cacheRoot is where built binaries live: ROOT/NAME-KEY/NAME, one
// directory per binary and key.
func cacheRoot() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kubetest: no cache directory (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(d, "wsu", "kube"), nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// builder builds and caches binaries for one source directory, toolchain
// and cache root.
type builder struct {
	src, goCmd, goVersion, root string
	logf                        func(string, ...any)
}

func newBuilder(ctx context.Context, logf func(string, ...any)) (*builder, error) {
	src, err := sourceDir()
	if err != nil {
		return nil, err
	}
	goCmd, err := goTool()
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, goCmd, "env", "GOVERSION").Output()
	if err != nil {
		return nil, fmt.Errorf("kubetest: go env GOVERSION: %w", err)
	}
	root, err := cacheRoot()
	if err != nil {
		return nil, err
	}
	return &builder{src: src, goCmd: goCmd, goVersion: strings.TrimSpace(string(out)), root: root, logf: logf}, nil
}

// Binaries returns the paths of the named binaries (Etcd, KubeAPIServer,
// KubeControllerManager, KubeScheduler), building each one first if this
// version of its wrapper module and Go has not been built yet (minutes
// each on two cores; afterwards instant). logf reports progress. A lock
// per binary keeps test packages run in parallel from building the same
// one at once; the loser waits and uses the winner's binary.
func Binaries(ctx context.Context, logf func(format string, args ...any), names ...string) (map[string]string, error) {
	b, err := newBuilder(ctx, logf)
	if err != nil {
		return nil, err
	}
	paths := make(map[string]string, len(names))
	for _, name := range names {
		w, err := wrapperNamed(name)
		if err != nil {
			return nil, err
		}
		if paths[name], err = b.binary(ctx, w); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// AllBinaries lists every binary kubetest can build, for make kubetest.
func AllBinaries() []string {
	names := make([]string, len(wrappers))
	for i, w := range wrappers {
		names[i] = w.name
	}
	return names
}

// binary returns w's cached binary, building (or adopting) it first.
func (b *builder) binary(ctx context.Context, w wrapper) (string, error) {
	key, err := binaryKey(b.src, w.name, b.goVersion)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(b.root, w.name+"-"+key)
	out := filepath.Join(dir, w.name)
	if isFile(out) {
		return out, nil
	}
	if err := os.MkdirAll(b.root, 0o755); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	unlock, err := lockFile(ctx, dir+".lock", func() {
		b.logf("kubetest: another process is building %s into %s; waiting", w.name, dir)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if isFile(out) {
		return out, nil
	}
	// Build (or copy) beside the final directory and rename it into
	// place, so a cancelled build never leaves a directory that looks
	// complete.
	tmp, err := os.MkdirTemp(b.root, w.name+"-"+key+".tmp-")
	if err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	defer os.RemoveAll(tmp)
	if !b.adoptLegacy(w.name, filepath.Join(tmp, w.name)) {
		b.logf("kubetest: building %s into %s (first use: minutes)", w.name, dir)
		if err := build(ctx, b.goCmd, filepath.Join(b.src, w.name), w, filepath.Join(tmp, w.name), b.logf); err != nil {
			return "", err
		}
	}
	if err := os.RemoveAll(dir); err != nil { // an incomplete leftover
		return "", fmt.Errorf("kubetest: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	return out, nil
}

// adoptLegacy links (or copies) name from the first layout's directory
// when that holds a build of the same wrapper sources and Go version, so
// moving to per-binary keys rebuilds nothing. It reports whether it did.
func (b *builder) adoptLegacy(name, out string) bool {
	if !slices.Contains(legacyPair, name) {
		return false
	}
	key, err := legacyKey(b.src, b.goVersion)
	if err != nil {
		return false
	}
	old := filepath.Join(b.root, key, name)
	if !isFile(old) {
		return false
	}
	if err := os.Link(old, out); err != nil {
		if err := copyFile(old, out); err != nil {
			return false
		}
	}
	b.logf("kubetest: %s reused from %s", name, old)
	return true
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// build compiles one wrapper module into out.
func build(ctx context.Context, goCmd, modDir string, w wrapper, out string, logf func(string, ...any)) error {
	gomod := filepath.Join(modDir, "go.mod")
	data, err := os.ReadFile(gomod)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	mf, err := modfile.ParseLax(gomod, data, nil)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	var version string
	for _, r := range mf.Require {
		if r.Mod.Path == w.module {
			version = r.Mod.Version
		}
	}
	if version == "" {
		return fmt.Errorf("kubetest: %s does not require %s", gomod, w.module)
	}
	ldflags := []string{"-s", "-w"} // no symbol tables: a third smaller
	if w.stamp != nil {
		ldflags = append(ldflags, w.stamp(version)...)
	}
	start := time.Now()
	// -mod=readonly: go.sum is the pin; the build must never rewrite it.
	cmd := exec.CommandContext(ctx, goCmd, "build", "-mod=readonly", "-buildvcs=false", "-trimpath",
		"-ldflags", strings.Join(ldflags, " "), "-o", out, ".")
	cmd.Dir = modDir
	// Static, native binaries whatever the caller's environment says; the
	// nested module must not be pulled into a workspace.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0",
		"GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	dieWithParent(cmd)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubetest: building %s %s failed: %w\n%s", w.name, version, err, tailLines(buf.String(), 40))
	}
	logf("kubetest: built %s %s in %s", w.name, version, time.Since(start).Round(time.Second))
	return nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
