package kubetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// CacheEnv overrides the directory the binaries are cached in
// (default: the user cache directory's wsu/kube, e.g. ~/.cache/wsu/kube).
const CacheEnv = "WSU_KUBETEST_CACHE"

// wrapper is one of the nested modules that build a control-plane binary.
type wrapper struct {
	name string // binary and directory name
	// module whose version is the binary's; its go.mod version is stamped
	// in with ldflags.
	module string
	stamp  func(version string) []string
}

var wrappers = []wrapper{
	{name: "etcd", module: "go.etcd.io/etcd/server/v3"},
	{name: "kube-apiserver", module: "k8s.io/kubernetes", stamp: kubeVersionFlags},
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

// sourceDir is this package's directory, which holds the wrapper modules.
// They cannot be embedded: go:embed skips nested modules.
func sourceDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("kubetest: cannot locate its source directory")
	}
	dir := filepath.Dir(file)
	if _, err := os.Stat(filepath.Join(dir, "kube-apiserver", "go.mod")); err != nil {
		return "", fmt.Errorf("kubetest: wrapper modules not found beside %s (built with -trimpath?): %w", file, err)
	}
	return dir, nil
}

// goTool is the go command that builds the wrappers. go test puts its own
// GOROOT/bin first in PATH, so this is the toolchain running the tests.
func goTool() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("kubetest: the go command is needed to build etcd and kube-apiserver, and is not in PATH")
	}
	return p, nil
}

// cacheKey hashes everything the binaries depend on: each wrapper's go.mod,
// go.sum and main.go, and the Go version.
func cacheKey(src, goVersion string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "go %s\n", goVersion)
	for _, w := range wrappers {
		for _, f := range []string{"go.mod", "go.sum", "main.go"} {
			b, err := os.ReadFile(filepath.Join(src, w.name, f))
			if err != nil {
				return "", fmt.Errorf("kubetest: %w", err)
			}
			fmt.Fprintf(h, "%s/%s %d\n", w.name, f, len(b))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// cacheRoot is where built binaries live, one directory per cache key.
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

// complete reports whether dir holds every binary.
func complete(dir string) bool {
	for _, w := range wrappers {
		if fi, err := os.Stat(filepath.Join(dir, w.name)); err != nil || !fi.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// Assets returns the directory holding etcd and kube-apiserver, building
// them first if this combination of wrapper modules and Go version has not
// been built yet (about 5 minutes on two cores; afterwards instant). logf
// reports progress. A lock keeps test packages run in parallel from building
// at the same time; the loser waits and uses the winner's binaries.
func Assets(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	src, err := sourceDir()
	if err != nil {
		return "", err
	}
	goCmd, err := goTool()
	if err != nil {
		return "", err
	}
	out, err := exec.CommandContext(ctx, goCmd, "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("kubetest: go env GOVERSION: %w", err)
	}
	key, err := cacheKey(src, strings.TrimSpace(string(out)))
	if err != nil {
		return "", err
	}
	root, err := cacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, key)
	if complete(dir) {
		return dir, nil
	}

	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(root, key+".lock"), func() {
		logf("kubetest: another process is building the control plane into %s; waiting", dir)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(dir) {
		return dir, nil
	}

	// Build beside the final directory and rename it into place, so a
	// cancelled build never leaves a directory that looks complete.
	tmp, err := os.MkdirTemp(root, key+".tmp-")
	if err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	logf("kubetest: building etcd and kube-apiserver into %s (first use: several minutes)", dir)
	for _, w := range wrappers {
		if err := build(ctx, goCmd, filepath.Join(src, w.name), w, filepath.Join(tmp, w.name), logf); err != nil {
			return "", err
		}
	}
	if err := os.RemoveAll(dir); err != nil { // an incomplete leftover
		return "", fmt.Errorf("kubetest: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	logf("kubetest: control plane built in %s", time.Since(start).Round(time.Second))
	return dir, nil
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
