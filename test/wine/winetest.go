//go:build unix

package winetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

//go:embed bcryptprimitives/bcryptprimitives.c
var prngSource []byte

// Packages are the Debian packages the Wine tier needs.
var Packages = []string{"wine", "wine64", "gcc-mingw-w64-x86-64-win32"}

// InstallCommand is what a root user runs to install Packages.
var InstallCommand = "apt-get update && apt-get install -y --no-install-recommends " + strings.Join(Packages, " ")

// waitDelay bounds how long a wine call's pipes are waited for after it
// exits: services.exe and friends inherit them and never close them.
const waitDelay = 10 * time.Second

// Env is the machine-wide part, prepared once and cached on disk.
type Env struct {
	WineVersion string
	CacheDir    string // per Wine version
	Template    string // template WINEPREFIX, never run directly
	DLL         string // stand-in bcryptprimitives.dll
	wine        string
	wineserver  string
}

var setup struct {
	mu  sync.Mutex
	env *Env
	err error
	ran bool
}

// Setup installs what is missing and prepares the cache. It runs once per
// process; other processes wait on a file lock in the cache.
func Setup(logf func(format string, args ...any)) (*Env, error) {
	setup.mu.Lock()
	defer setup.mu.Unlock()
	if !setup.ran {
		setup.env, setup.err = doSetup(logf)
		setup.ran = true
	}
	return setup.env, setup.err
}

func doSetup(logf func(string, ...any)) (*Env, error) {
	base, err := cacheBase()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(base, "lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	if err := ensurePackages(logf); err != nil {
		return nil, err
	}
	env := &Env{}
	if env.wine, err = exec.LookPath("wine"); err != nil {
		return nil, fmt.Errorf("wine is not on PATH after installing %v: %w", Packages, err)
	}
	if env.wineserver, err = findWineserver(); err != nil {
		return nil, err
	}
	if env.WineVersion, err = wineVersion(env.wine); err != nil {
		return nil, err
	}
	env.CacheDir = filepath.Join(base, sanitize(env.WineVersion))
	if err := os.MkdirAll(env.CacheDir, 0o755); err != nil {
		return nil, err
	}
	if env.DLL, err = buildDLL(env.CacheDir, logf); err != nil {
		return nil, err
	}
	env.Template = filepath.Join(env.CacheDir, "template")
	if err := env.buildTemplate(logf); err != nil {
		return nil, err
	}
	return env, nil
}

func cacheBase() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "wsu", "wine"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: set XDG_CACHE_HOME or HOME: %w", err)
	}
	return filepath.Join(home, ".cache", "wsu", "wine"), nil
}

// lockFile serialises setup between test binaries running in parallel.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// missingPackages asks dpkg which of Packages are not installed.
func missingPackages() ([]string, error) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		return nil, fmt.Errorf("the Wine test tier needs a Debian system (dpkg-query not found) with: %s", InstallCommand)
	}
	args := append([]string{"-W", "-f=${Package} ${db:Status-Abbrev}\n"}, Packages...)
	// dpkg-query exits 1 when it knows none of a package; the output still
	// lists the ones it knows.
	out, _ := exec.Command("dpkg-query", args...).Output()
	installed := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[1] == "ii" {
			installed[strings.Split(f[0], ":")[0]] = true
		}
	}
	var missing []string
	for _, p := range Packages {
		if !installed[p] {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

func ensurePackages(logf func(string, ...any)) error {
	missing, err := missingPackages()
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the Wine test tier needs Debian packages %v; install them as root:\n  sudo sh -c '%s'",
			missing, InstallCommand)
	}
	logf("winetest: installing %v (once per machine)", missing)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for _, argv := range [][]string{
		{"apt-get", "update"},
		append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, Packages...),
	} {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.WaitDelay = waitDelay
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w\n%s\nfix: run as root: %s", strings.Join(argv, " "), err, tail(out), InstallCommand)
		}
	}
	if missing, err = missingPackages(); err != nil || len(missing) > 0 {
		return fmt.Errorf("packages %v still missing after apt-get install (%v); run: %s", missing, err, InstallCommand)
	}
	return nil
}

func tail(b []byte) string {
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// findWineserver: Debian keeps wineserver out of PATH in some versions.
func findWineserver() (string, error) {
	if p, err := exec.LookPath("wineserver"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/lib/wine/wineserver64", "/usr/lib/wine/wineserver", "/usr/lib/x86_64-linux-gnu/wine/wineserver"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("wineserver not found; reinstall with: %s", InstallCommand)
}

func wineVersion(wine string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, wine, "--version")
	cmd.Env = wineEnv("")
	cmd.WaitDelay = waitDelay
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("wine --version: %w", err)
	}
	v := strings.TrimSpace(string(out))
	if v == "" {
		return "", errors.New("wine --version printed nothing")
	}
	return v, nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func sanitize(s string) string { return strings.Trim(unsafeChars.ReplaceAllString(s, "_"), "_") }

// buildDLL compiles the stand-in DLL once per source version.
func buildDLL(dir string, logf func(string, ...any)) (string, error) {
	sum := sha256.Sum256(prngSource)
	dll := filepath.Join(dir, "bcryptprimitives-"+hex.EncodeToString(sum[:6])+".dll")
	if _, err := os.Stat(dll); err == nil {
		return dll, nil
	}
	gcc, err := exec.LookPath("x86_64-w64-mingw32-gcc")
	if err != nil {
		return "", fmt.Errorf("x86_64-w64-mingw32-gcc not found; run as root: %s", InstallCommand)
	}
	logf("winetest: building %s", filepath.Base(dll))
	tmp, err := os.MkdirTemp(dir, "dll-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "bcryptprimitives.c")
	if err := os.WriteFile(src, prngSource, 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(tmp, "bcryptprimitives.dll")
	cmd := exec.Command(gcc, "-O2", "-shared", "-s", "-o", out, src, "-ladvapi32")
	cmd.WaitDelay = waitDelay
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build bcryptprimitives.dll: %w\n%s", err, b)
	}
	return dll, os.Rename(out, dll)
}

// readyMarker is written last, so a template cut short by a crash is rebuilt.
const readyMarker = ".wsu-template-ready"

func (e *Env) buildTemplate(logf func(string, ...any)) error {
	if _, err := os.Stat(filepath.Join(e.Template, readyMarker)); err == nil {
		return nil
	}
	logf("winetest: creating the template prefix (once per Wine version)")
	tmp := e.Template + ".tmp"
	os.RemoveAll(e.Template)
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Without mscoree/mshtml wineboot does not look for Mono and Gecko, which
	// cannot be downloaded here and are not needed.
	boot := []string{"WINEDLLOVERRIDES=mscoree,mshtml=;" + dllOverrides}
	steps := []struct {
		argv  []string
		extra []string
	}{
		{[]string{e.wine, "wineboot", "-i"}, boot},
		// Report Windows 10 (10.0.18362) rather than Wine 8's default, Windows 7.
		{[]string{e.wine, "winecfg", "/v", "win10"}, boot},
		// Flush the registry and let the two racing services.exe settle.
		{[]string{e.wineserver, "-k"}, nil},
		{[]string{e.wineserver, "-w"}, nil},
	}
	for i, s := range steps {
		err := quietRun(ctx, tmp, s.extra, s.argv...)
		if err != nil && i != 2 { // -k fails when the server already left
			return fmt.Errorf("template prefix: %s: %w", strings.Join(s.argv, " "), err)
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, readyMarker), nil, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, e.Template)
}

// quietRun runs a command against a prefix with its output on /dev/null:
// a first wine call hands its stderr to services.exe, and a pipe there would
// never reach EOF.
func quietRun(ctx context.Context, prefix string, extraEnv []string, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = wineEnv(prefix)
	for _, kv := range extraEnv { // replace, not duplicate
		k, _, _ := strings.Cut(kv, "=")
		for i, old := range cmd.Env {
			if strings.HasPrefix(old, k+"=") {
				cmd.Env = append(cmd.Env[:i], cmd.Env[i+1:]...)
				break
			}
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.WaitDelay = waitDelay
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	return cmd.Run()
}

// dllOverrides skips winemenubuilder, which each session's first process
// starts to write desktop menu entries nobody here needs.
const dllOverrides = "winemenubuilder.exe=d"

// wineEnv is the caller's environment with the Wine settings replaced and
// DISPLAY unset, so nothing tries to open a window.
func wineEnv(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DISPLAY", "WAYLAND_DISPLAY", "WINEPREFIX", "WINEDEBUG", "WINEDLLOVERRIDES", "WINEARCH", "WINESERVER", "WINELOADER":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "WINEDEBUG=-all", "WINEDLLOVERRIDES="+dllOverrides)
	if prefix != "" {
		env = append(env, "WINEPREFIX="+prefix)
	}
	return env
}

// Prefix is one test's WINEPREFIX with its own persistent wineserver.
type Prefix struct {
	Dir string
	env *Env
}

// New gives the test a fresh prefix (a copy of the template) and stops its
// wineserver when the test ends. Anything that cannot be set up fails the
// test with the command that fixes it; it never skips.
func New(t testing.TB) *Prefix {
	t.Helper()
	env, err := Setup(t.Logf)
	if err != nil {
		t.Fatalf("winetest: %v", err)
	}
	p, err := env.NewPrefix(filepath.Join(t.TempDir(), "prefix"))
	if p != nil {
		t.Cleanup(func() {
			if err := p.Close(); err != nil {
				t.Errorf("winetest: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("winetest: %v", err)
	}
	return p
}

// NewPrefix copies the template to dir, installs the stand-in DLL and starts
// the prefix's wineserver. Close stops it. On error the returned Prefix (if
// any) still needs Close.
func (e *Env) NewPrefix(dir string) (*Prefix, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "cp", "-a", e.Template, dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("copy template prefix: %w: %s", err, out)
	}
	dll, err := os.ReadFile(e.DLL)
	if err != nil {
		return nil, err
	}
	sys32 := filepath.Join(dir, "drive_c", "windows", "system32", "bcryptprimitives.dll")
	if err := os.WriteFile(sys32, dll, 0o644); err != nil {
		return nil, err
	}
	p := &Prefix{Dir: dir, env: e}
	// The persistent server comes first: otherwise the wrapper starts one
	// that exits, taking the services with it, when its caller does.
	if err := quietRun(ctx, dir, nil, e.wineserver, "-p"); err != nil {
		return nil, fmt.Errorf("wineserver -p: %w", err)
	}
	// The first call starts services.exe with our /dev/null as its stderr.
	if err := quietRun(ctx, dir, nil, e.wine, "cmd.exe", "/c", "exit", "0"); err != nil {
		return p, fmt.Errorf("first wine call: %w", err)
	}
	return p, nil
}

// Close stops the prefix's wineserver and everything running in it.
func (p *Prefix) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quietRun(ctx, p.Dir, nil, p.env.wineserver, "-k") // fails if already gone
	if err := quietRun(ctx, p.Dir, nil, p.env.wineserver, "-w"); err != nil {
		return fmt.Errorf("wineserver -w: %w", err)
	}
	return nil
}

// Command runs exe (a Windows program or a Linux path to one) under Wine in
// this prefix. Its pipes may be connected: the services already hold
// /dev/null, and WaitDelay bounds any leftover holder. Mind that every
// process exe starts inherits its Unix stderr (see Output).
func (p *Prefix) Command(exe string, args ...string) *exec.Cmd {
	cmd := exec.Command(p.env.wine, append([]string{exe}, args...)...)
	cmd.Env = wineEnv(p.Dir)
	cmd.WaitDelay = waitDelay
	return cmd
}

// CommandContext is Command bound to ctx.
func (p *Prefix) CommandContext(ctx context.Context, exe string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.env.wine, append([]string{exe}, args...)...)
	cmd.Env = wineEnv(p.Dir)
	cmd.WaitDelay = waitDelay
	return cmd
}

// DriveC is the Linux path of the prefix's C: drive.
func (p *Prefix) DriveC() string { return filepath.Join(p.Dir, "drive_c") }

// WinPath maps a Linux path to the Windows path Wine shows for it: C:\ for
// the prefix's drive_c, Z:\ (Wine's view of /) for anything else.
func (p *Prefix) WinPath(linuxPath string) string {
	abs, err := filepath.Abs(linuxPath)
	if err != nil {
		abs = filepath.Clean(linuxPath)
	}
	if rel, err := filepath.Rel(p.DriveC(), abs); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		if rel == "." {
			return `C:\`
		}
		return `C:\` + strings.ReplaceAll(rel, "/", `\`)
	}
	return `Z:` + strings.ReplaceAll(abs, "/", `\`)
}

// LinuxPath maps a C:\ path back into the prefix's drive_c.
func (p *Prefix) LinuxPath(winPath string) string {
	rest, ok := strings.CutPrefix(winPath, `C:\`)
	if !ok {
		rest, ok = strings.CutPrefix(winPath, `c:\`)
	}
	if !ok {
		return ""
	}
	return filepath.Join(p.DriveC(), filepath.FromSlash(strings.ReplaceAll(rest, `\`, "/")))
}

// Output runs exe with stdin and returns stdout, failing with stderr in the
// error. Stderr goes to a file, not a pipe: Wine hands its Unix stderr to
// every process a program starts, so a child left running (a spawned
// server) would keep a pipe open and the call from returning.
func (p *Prefix) Output(ctx context.Context, stdin []byte, exe string, args ...string) ([]byte, error) {
	errFile, err := os.CreateTemp("", "winetest-stderr-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(errFile.Name())
	defer errFile.Close()
	cmd := p.CommandContext(ctx, exe, args...)
	var stdout bytes.Buffer
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, errFile
	if err := cmd.Run(); err != nil {
		stderr, _ := os.ReadFile(errFile.Name())
		return stdout.Bytes(), fmt.Errorf("%s %s: %w\nstderr: %s", filepath.Base(exe), strings.Join(args, " "), err, tail(stderr))
	}
	return stdout.Bytes(), nil
}
