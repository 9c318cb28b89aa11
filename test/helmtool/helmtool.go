// Package helmtool provides the real helm the chart's tests run (helm lint,
// helm template; deploy/helm/wsu): built from the Go module proxy at a
// pinned version, once, and cached by version under the user cache
// directory (~/.cache/wsu/tools/helm-VERSION/helm), as test/kubetest caches
// the control plane. A machine that cannot build it gets an error saying
// how to; tests fail on it, never skip.
package helmtool

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Version is the helm the tests run.
const Version = "v3.22.0"

// Module is where it is built from (go install Module@Version).
const Module = "helm.sh/helm/v3/cmd/helm"

// CacheEnv overrides the tools cache directory (default: the user cache
// directory's wsu/tools).
const CacheEnv = "WSU_TOOLS_CACHE"

// Path is where helm Version is cached.
func Path() (string, error) {
	root := os.Getenv(CacheEnv)
	if root == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("helmtool: no cache directory (set %s): %w", CacheEnv, err)
		}
		root = filepath.Join(d, "wsu", "tools")
	}
	return filepath.Join(root, "helm-"+Version, "helm"), nil
}

// Ensure returns the cached helm, building it first when it is absent.
func Ensure(ctx context.Context) (string, error) {
	bin, err := Path()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	dir := filepath.Dir(bin)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".helm-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "install", Module+"@"+Version)
	// Outside any module, so the project's go.mod plays no part.
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("helmtool: building helm %s from the Go module proxy: %w\n%s\n"+
			"fix: make helm (or GOBIN=%s go install %s@%s) on a machine that reaches the Go module proxy",
			Version, err, out, dir, Module, Version)
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's is 0700
		return "", err
	}
	// Another build may have finished first: either binary is the same.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(bin); serr != nil {
			return "", fmt.Errorf("helmtool: %w", err)
		}
	}
	return bin, nil
}

// Binary is Ensure for a test: it fails the test with the fix when helm
// cannot be had.
func Binary(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if _, err := os.Stat(mustPath(t)); err != nil {
		t.Logf("building helm %s from the Go module proxy (once; cached)", Version)
	}
	bin, err := Ensure(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func mustPath(t testing.TB) string {
	p, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
