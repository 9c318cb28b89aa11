package payloadtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

const standinModule = "github.com/wsu-project/wsu/test/standin"

// cache holds the stand-ins compiled by this process, per GOOS and
// package, in a directory of its own (see processDir).
var cache struct {
	mu    sync.Mutex
	dir   string
	bins  map[string]string // goos/pkg → path
	dirOK error
}

// standins returns the binary of each test/standin package in pkgs for
// goos, compiling the ones this process has not yet. One go build
// compiles them; the Go build cache makes that cheap after the first time.
func standins(ctx context.Context, goos string, pkgs map[string]bool) (map[string]string, error) {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	if cache.bins == nil {
		cache.bins = map[string]string{}
		cache.dir, cache.dirOK = processDir()
	}
	if cache.dirOK != nil {
		return nil, cache.dirOK
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var todo, missing []string
	for pkg := range pkgs {
		if p, ok := cache.bins[goos+"/"+pkg]; ok {
			out[pkg] = p
			continue
		}
		if !hasGoFiles(filepath.Join(root, "test", "standin", pkg)) {
			missing = append(missing, pkg)
			continue
		}
		todo = append(todo, pkg)
	}
	slices.Sort(todo)
	slices.Sort(missing)
	var errs []error
	if len(todo) > 0 {
		// Build what exists even when something is missing: its errors
		// are worth seeing too, and it is cached for the next call.
		outDir := filepath.Join(cache.dir, goos)
		built, err := goBuild(ctx, root, outDir, goos, todo)
		if err != nil && len(todo) > 1 {
			// One go build fails as a whole: build each alone to keep the
			// ones that compile and name the ones that do not.
			built = map[string]string{}
			for _, pkg := range todo {
				one, err := goBuild(ctx, root, outDir, goos, []string{pkg})
				if err != nil {
					errs = append(errs, fmt.Errorf("%w\n(the stand-in for %s)", err, usedBy(pkg, goos)))
				}
				maps.Copy(built, one)
			}
		} else if err != nil {
			errs = append(errs, err)
		}
		for pkg, p := range built {
			cache.bins[goos+"/"+pkg] = p
			out[pkg] = p
		}
	}
	for _, pkg := range missing {
		err := fmt.Errorf("payloadtest: the stand-in package %s/%s does not exist", standinModule, pkg)
		if files := usedBy(pkg, goos); files != "" {
			err = fmt.Errorf("%w: it builds %s", err, files)
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// usedBy names the payload files built from pkg.
func usedBy(pkg, goos string) string {
	var files []string
	for _, c := range components {
		if standinFor(c, goos) == pkg {
			files = append(files, c.name+".exe")
		}
	}
	return strings.Join(files, ", ")
}

// goBuild compiles pkgs (names under test/standin) into outDir.
func goBuild(ctx context.Context, root, outDir, goos string, pkgs []string) (map[string]string, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("payloadtest: %w", err)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return nil, errors.New("payloadtest: the go command is needed to build the stand-ins, and is not in PATH")
	}
	args := []string{"build", "-o", outDir + string(filepath.Separator)}
	paths := map[string]string{}
	for _, pkg := range pkgs {
		args = append(args, standinModule+"/"+pkg)
		bin := filepath.Join(outDir, pkg)
		if goos == "windows" {
			bin += ".exe"
		}
		paths[pkg] = bin
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = root
	// Static binaries: the simulation runs them wherever they are copied.
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("payloadtest: go build %s (GOOS=%s): %w\n%s", strings.Join(pkgs, " "), goos, err, b)
	}
	return paths, nil
}

// moduleRoot is the wsu module's directory, two levels above this file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("payloadtest: cannot locate its source directory")
	}
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("payloadtest: the wsu module is not at %s (built with -trimpath?): %w", root, err)
	}
	return root, nil
}

func hasGoFiles(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			return true
		}
	}
	return false
}
