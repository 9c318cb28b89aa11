// Package standin builds the TEST STAND-IN binaries under test/standin:
// programs that play, on Linux and against a real kube-apiserver, the
// Windows node components (kubelet, kube-log-runner, ...) a join starts, so
// end-to-end tests run whole playbooks on a simulated host
// (agent/platform/sim). None of them is a product binary. See README.md.
package standin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Module is the import path the stand-ins live under: name builds
// Module + "/" + name.
const Module = "github.com/wsu-project/wsu/test/standin"

// Build builds the stand-ins named (each the package test/standin/<name>)
// for goos ("" means linux, the sim's) and the host's architecture into
// outDir, and returns each name's binary path (with .exe for windows). One
// go build compiles them all; the build cache makes repeated calls cheap.
func Build(ctx context.Context, outDir, goos string, names ...string) (map[string]string, error) {
	if len(names) == 0 {
		return nil, errors.New("standin: no stand-in named")
	}
	if goos == "" {
		goos = "linux"
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	goCmd, err := goTool()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("standin: %w", err)
	}
	out, err := filepath.Abs(outDir)
	if err != nil {
		return nil, fmt.Errorf("standin: %w", err)
	}
	paths := map[string]string{}
	args := []string{"build", "-o", out + string(filepath.Separator)}
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, `/\.`) {
			return nil, fmt.Errorf("standin: %q is not a stand-in name", n)
		}
		bin := n
		if goos == "windows" {
			bin += ".exe"
		}
		paths[n] = filepath.Join(out, bin)
		args = append(args, Module+"/"+n)
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = root
	// Static binaries: the sim runs them as they are, wherever they are.
	cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("standin: go build %s (GOOS=%s): %w\n%s", strings.Join(names, " "), goos, err, b)
	}
	for n, p := range paths {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("standin: %s was not built: %w", n, err)
		}
	}
	return paths, nil
}

// moduleRoot is the wsu module's directory, two levels above this file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("standin: cannot locate its source directory")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("standin: the wsu module is not at %s (built with -trimpath?): %w", root, err)
	}
	return filepath.Clean(root), nil
}

// goTool finds the go command; go test puts its own toolchain first in PATH.
func goTool() (string, error) {
	p, err := exec.LookPath("go")
	if err != nil {
		return "", errors.New("standin: the go command is needed to build the stand-ins, and is not in PATH")
	}
	return p, nil
}
