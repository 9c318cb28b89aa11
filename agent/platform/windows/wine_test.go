//go:build !windows

package windows_test

// The Wine tier: the GOOS=windows build of the platform, driven through
// internal/winprobe, against Wine's real SCM, registry and file system.
// Each test gets its own prefix (test/wine); nothing is skipped: a machine
// that cannot run Wine fails with the command that fixes it.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
	winetest "github.com/wsu-project/wsu/test/wine"
)

var exes struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
}

func TestMain(m *testing.M) {
	code := m.Run()
	if exes.dir != "" {
		os.RemoveAll(exes.dir)
	}
	os.Exit(code)
}

// buildExes builds winprobe.exe and the winsvc stand-in once per run.
func buildExes(t *testing.T) string {
	t.Helper()
	exes.once.Do(func() {
		exes.dir, exes.err = os.MkdirTemp("", "wsu-wine-exe-")
		if exes.err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", exes.dir+string(filepath.Separator),
			"./internal/winprobe", "../../../test/standin/winsvc")
		cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
		exes.out, exes.err = cmd.CombinedOutput()
	})
	require.NoError(t, exes.err, "build the Windows test programs: %s", exes.out)
	return exes.dir
}

type a = map[string]any

type step struct {
	Op   string `json:"op"`
	Args any    `json:"args,omitempty"`
}

type res struct {
	Value        json.RawMessage `json:"value"`
	Error        string          `json:"error"`
	NotSupported bool            `json:"not_supported"`
	NotExist     bool            `json:"not_exist"`
}

type probe struct {
	t      *testing.T
	p      *winetest.Prefix
	exe    string // Linux path of winprobe.exe
	winsvc string // Linux path of winsvc.exe
}

func newProbe(t *testing.T) *probe {
	p := winetest.New(t)
	dir := buildExes(t)
	return &probe{t: t, p: p, exe: filepath.Join(dir, "winprobe.exe"), winsvc: filepath.Join(dir, "winsvc.exe")}
}

// run executes steps in one winprobe process and returns their results.
func (pr *probe) run(steps ...step) []res {
	pr.t.Helper()
	in, err := json.Marshal(steps)
	require.NoError(pr.t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	out, err := pr.p.Output(ctx, in, pr.exe)
	require.NoError(pr.t, err)
	pr.t.Logf("winprobe %s: %v", steps[0].Op, time.Since(start).Round(time.Millisecond))
	var rs []res
	require.NoError(pr.t, json.Unmarshal(out, &rs), "winprobe output: %s", out)
	require.Len(pr.t, rs, len(steps))
	return rs
}

// ok is run, requiring every step to succeed.
func (pr *probe) ok(steps ...step) []res {
	pr.t.Helper()
	rs := pr.run(steps...)
	for i, r := range rs {
		require.Empty(pr.t, r.Error, "step %d (%s)", i, steps[i].Op)
	}
	return rs
}

func value[T any](t *testing.T, r res) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(r.Value, &v), "value %s", r.Value)
	return v
}

func TestWineFiles(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	dir := `C:\wsu files\k`
	fa, big, ro := dir+`\a.txt`, dir+`\big.bin`, dir+`\ro.txt`
	linDir := pr.p.LinuxPath(dir)

	bigData := make([]byte, 3<<20+123)
	rand.Read(bigData)
	bigSum := sha256.Sum256(bigData)

	rs := pr.ok(
		step{"mkdir", a{"path": dir}},
		step{"write", a{"path": fa, "content": []byte("one"), "mode": 0o644}},
		step{"write", a{"path": fa, "content": []byte("two two"), "mode": 0o644}}, // replaces
		step{"read", a{"path": fa}},
		step{"stat", a{"path": fa}},
		step{"write", a{"path": big, "content": bigData, "mode": 0o644}},
		step{"sha256", a{"path": big}},
		step{"read", a{"path": fa, "limit": 7}},
		step{"stat", a{"path": dir}},
		step{"mtime-step", a{"path": fa}},
	)
	// Wine's C: is NTFS to a program: times advance at the clock tick, so
	// the hash cache trusts a sum taken 100 ms after a write.
	assert.Equal(t, 16*time.Millisecond, value[time.Duration](t, rs[9]))
	assert.Equal(t, []byte("two two"), value[[]byte](t, rs[3]))
	st := value[host.FileInfo](t, rs[4])
	assert.True(t, st.Exists)
	assert.False(t, st.IsDir)
	assert.EqualValues(t, 7, st.Size)
	assert.Equal(t, hex.EncodeToString(bigSum[:]), value[string](t, rs[6]))
	assert.Equal(t, []byte("two two"), value[[]byte](t, rs[7]))
	assert.True(t, value[host.FileInfo](t, rs[8]).IsDir)
	// What Windows wrote is what Linux reads.
	got, err := os.ReadFile(filepath.Join(linDir, "big.bin"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(bigData, got))

	rs = pr.run(
		// A stream cut after 1000 bytes, and a play cancelled after 1 MiB.
		step{"write-cut", a{"path": fa, "content": bigData, "cut_after": 1000, "mode": 0o644}},
		step{"write-cut", a{"path": fa, "content": bigData, "cut_after": 1 << 20, "cancel": true, "mode": 0o644}},
		step{"read", a{"path": fa}},
		step{"read", a{"path": fa, "limit": 3}},
		step{"read", a{"path": dir}},
		step{"stat", a{"path": dir + `\missing`}},
		step{"sha256", a{"path": dir + `\missing`}},
		step{"write", a{"path": ro, "content": []byte("read-only"), "mode": 0o444}},
		step{"stat", a{"path": ro}},
		// A read-only target is still replaced.
		step{"write", a{"path": ro, "content": []byte("replaced"), "mode": 0o644}},
		step{"read", a{"path": ro}},
		step{"stat", a{"path": ro}},
		step{"write", a{"path": dir + `\keep-ro.txt`, "content": []byte("x"), "mode": 0o444}},
	)
	assert.Contains(t, rs[0].Error, "connection reset")
	assert.Contains(t, rs[1].Error, "context canceled")
	assert.Equal(t, []byte("two two"), value[[]byte](t, rs[2]), "a cut write keeps the old file")
	assert.Contains(t, rs[3].Error, "larger than the limit")
	assert.Contains(t, rs[4].Error, "is a directory")
	assert.Empty(t, rs[5].Error)
	assert.False(t, value[host.FileInfo](t, rs[5]).Exists)
	assert.NotEmpty(t, rs[6].Error)
	for _, i := range []int{7, 8, 9, 10, 11, 12} {
		require.Empty(t, rs[i].Error, "step %d", i)
	}
	assert.Equal(t, os.FileMode(0o444), value[host.FileInfo](t, rs[8]).Mode.Perm())
	assert.Equal(t, []byte("replaced"), value[[]byte](t, rs[10]))
	assert.Equal(t, os.FileMode(0o666), value[host.FileInfo](t, rs[11]).Mode.Perm())
	entries, err := os.ReadDir(linDir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), ".wsu-tmp-", "temp file left behind")
	}

	// Listings: sorted, described as Stat describes, bounded by the limit;
	// the path matches in any case.
	rs = pr.run(
		step{"mkdir", a{"path": dir + `\empty`}},
		step{"readdir", a{"path": dir}},
		step{"readdir", a{"path": `c:/WSU FILES/K`, "limit": 2}},
		step{"readdir", a{"path": dir + `\empty`, "limit": 1}},
		step{"readdir", a{"path": dir + `\missing`}},
		step{"readdir", a{"path": fa}},
	)
	for _, i := range []int{0, 1, 2, 3} {
		require.Empty(t, rs[i].Error, "step %d", i)
	}
	ents := value[[]host.DirEntry](t, rs[1])
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"a.txt", "big.bin", "empty", "keep-ro.txt", "ro.txt"}, names)
	if assert.Len(t, ents, 5) {
		assert.EqualValues(t, 7, ents[0].Size)
		assert.False(t, ents[0].IsDir)
		assert.WithinDuration(t, time.Now(), ents[0].ModTime, 10*time.Minute)
		assert.True(t, ents[2].IsDir)
		assert.Equal(t, os.FileMode(0o444), ents[3].Mode.Perm())
		assert.Equal(t, os.FileMode(0o666), ents[4].Mode.Perm())
	}
	assert.Len(t, value[[]host.DirEntry](t, rs[2]), 2)
	assert.Empty(t, value[[]host.DirEntry](t, rs[3]))
	assert.True(t, rs[4].NotExist, "a missing directory: %s", rs[4].Error)
	assert.NotEmpty(t, rs[5].Error, "a file is not a directory")
	assert.False(t, rs[5].NotExist)

	rs = pr.ok(
		step{"remove", a{"path": `C:\wsu files`, "recursive": true}},
		step{"stat", a{"path": `C:\wsu files`}},
		step{"remove", a{"path": `C:\wsu files`}},
		step{"remove", a{"path": `C:\wsu files`, "recursive": true}},
	)
	assert.False(t, value[host.FileInfo](t, rs[1]).Exists)
	_, err = os.Stat(pr.p.LinuxPath(`C:\wsu files`))
	assert.True(t, os.IsNotExist(err))
}

func TestWineRegistryAndEnvironment(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)

	key := `HKLM\SOFTWARE\wsu-test\sub key`
	values := []struct {
		name string
		v    host.RegistryValue
	}{
		{"sz", host.RegistryValue{Type: host.RegSZ, String: "hello wörld"}},
		{"expand", host.RegistryValue{Type: host.RegExpandSZ, String: `%SystemRoot%\k`}},
		{"multi", host.RegistryValue{Type: host.RegMultiSZ, Strings: []string{"a", "b c"}}},
		{"dword", host.RegistryValue{Type: host.RegDWORD, Integer: 0xfffffffe}},
		{"qword", host.RegistryValue{Type: host.RegQWORD, Integer: 1<<63 + 5}},
		{"binary", host.RegistryValue{Type: host.RegBinary, Binary: []byte{0, 1, 2, 255}}},
		{"", host.RegistryValue{Type: host.RegSZ, String: "the default value"}},
	}
	var steps []step
	for _, v := range values {
		steps = append(steps, step{"reg-set", a{"key": key, "name": v.name, "reg_value": v.v}})
	}
	for _, v := range values {
		steps = append(steps, step{"reg-get", a{"key": key, "name": v.name}})
	}
	rs := pr.ok(steps...)
	for i, v := range values {
		want := v.v
		want.Exists = true
		assert.Equal(t, want, value[host.RegistryValue](t, rs[len(values)+i]), "value %q", v.name)
	}

	// Every hive, long and short names, and Wine's own reg.exe agreeing.
	hives := []string{`HKEY_LOCAL_MACHINE\SOFTWARE\wsu-test`, `HKCU\Software\wsu-test`, `HKEY_CURRENT_USER\Software\wsu-test2`,
		`HKCR\wsu-test.ext`, `HKU\.DEFAULT\Software\wsu-test`, `HKCC\Software\wsu-test`}
	steps = nil
	for _, k := range hives {
		steps = append(steps,
			step{"reg-set", a{"key": k, "name": "v", "reg_value": host.RegistryValue{Type: host.RegSZ, String: k}}},
			step{"reg-get", a{"key": k, "name": "v"}})
	}
	rs = pr.ok(steps...)
	for i, k := range hives {
		assert.Equal(t, k, value[host.RegistryValue](t, rs[2*i+1]).String, k)
	}

	rs = pr.run(
		step{"run", a{"argv": []string{"reg.exe", "query", `HKLM\SOFTWARE\wsu-test\sub key`, "/v", "sz"}}},
		step{"reg-get", a{"key": `HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion`, "name": "CurrentBuildNumber"}},
		step{"reg-delete", a{"key": key, "name": "dword"}},
		step{"reg-get", a{"key": key, "name": "dword"}},
		step{"reg-delete", a{"key": key, "name": "dword"}},
		step{"reg-get", a{"key": `HKLM\SOFTWARE\wsu-test\no such key`, "name": "x"}},
		step{"reg-delete", a{"key": `HKLM\SOFTWARE\wsu-test\no such key`, "name": "x"}},
		step{"reg-get", a{"key": `HKXX\SOFTWARE`, "name": "x"}},
		step{"reg-set", a{"key": key, "name": "big", "reg_value": host.RegistryValue{Type: host.RegDWORD, Integer: 1 << 32}}},
		step{"reg-set", a{"key": key, "name": "m", "reg_value": host.RegistryValue{Type: host.RegMultiSZ, Strings: []string{"a", ""}}}},
	)
	for _, i := range []int{0, 1, 2, 3, 4, 5, 6} {
		require.Empty(t, rs[i].Error, "step %d", i)
	}
	assert.Contains(t, string(value[host.RunResult](t, rs[0]).Stdout), "hello")
	assert.Equal(t, "18362", value[host.RegistryValue](t, rs[1]).String)
	assert.False(t, value[host.RegistryValue](t, rs[3]).Exists)
	assert.False(t, value[host.RegistryValue](t, rs[5]).Exists)
	assert.Contains(t, rs[7].Error, "must start with HKLM")
	assert.Contains(t, rs[8].Error, "does not fit a REG_DWORD")
	assert.Contains(t, rs[9].Error, "empty string")

	// Machine environment and PATH.
	envKey := `HKLM\SYSTEM\CurrentControlSet\Control\Session Manager\Environment`
	type envValue struct {
		Value  string `json:"value"`
		Exists bool   `json:"exists"`
	}
	rs = pr.ok(
		step{"env-get", a{"name": "Path"}},
		step{"env-set", a{"name": "WSU_TEST_VAR", "value": "hello world"}},
		step{"env-get", a{"name": "WSU_TEST_VAR"}},
		step{"reg-get", a{"key": envKey, "name": "WSU_TEST_VAR"}},
		step{"env-set", a{"name": "WSU_TEST_EXP", "value": `%SystemRoot%\wsu`}},
		step{"reg-get", a{"key": envKey, "name": "WSU_TEST_EXP"}},
		step{"path-add", a{"path": `C:\k`}},
		step{"path-add", a{"path": `c:\K\`}},
		step{"reg-get", a{"key": envKey, "name": "Path"}},
		// This process's later runs see the change at once.
		step{"run", a{"argv": []string{"cmd.exe", "/c", "echo %WSU_TEST_VAR%^|%WSU_TEST_EXP%^|%PATH%"}}},
	)
	origPath := value[envValue](t, rs[0])
	require.True(t, origPath.Exists)
	assert.Equal(t, envValue{"hello world", true}, value[envValue](t, rs[2]))
	assert.Equal(t, host.RegSZ, value[host.RegistryValue](t, rs[3]).Type)
	assert.Equal(t, host.RegExpandSZ, value[host.RegistryValue](t, rs[5]).Type)
	assert.True(t, value[bool](t, rs[6]), "first add changes")
	assert.False(t, value[bool](t, rs[7]), "second add (other case, trailing backslash) does not")
	pathVal := value[host.RegistryValue](t, rs[8])
	assert.Equal(t, host.RegExpandSZ, pathVal.Type, "Path stays REG_EXPAND_SZ")
	assert.Equal(t, origPath.Value+`;C:\k`, pathVal.String)
	out := strings.TrimSpace(string(value[host.RunResult](t, rs[9]).Stdout))
	assert.True(t, strings.HasPrefix(strings.ToLower(out), `hello world|c:\windows\wsu|`), out)
	assert.Contains(t, out, `;C:\k`)

	// A new process (not a child of the one that set them) sees them too.
	rs = pr.ok(step{"run", a{"argv": []string{"cmd.exe", "/c", "echo %WSU_TEST_VAR%^|%PATH%"}}})
	out = string(value[host.RunResult](t, rs[0]).Stdout)
	assert.Contains(t, out, "hello world|")
	assert.Contains(t, out, `;C:\k`)

	rs = pr.ok(
		step{"path-remove", a{"path": `C:\K\`}},
		step{"path-remove", a{"path": `C:\k`}},
		step{"env-get", a{"name": "Path"}},
		step{"env-delete", a{"name": "WSU_TEST_VAR"}},
		step{"env-delete", a{"name": "WSU_TEST_VAR"}},
		step{"env-get", a{"name": "WSU_TEST_VAR"}},
		step{"env-delete", a{"name": "WSU_TEST_EXP"}},
	)
	assert.True(t, value[bool](t, rs[0]))
	assert.False(t, value[bool](t, rs[1]))
	assert.Equal(t, origPath, value[envValue](t, rs[2]), "PATH back as it was")
	assert.Equal(t, envValue{}, value[envValue](t, rs[5]))
	assert.Contains(t, pr.run(step{"path-add", a{"path": `C:\a;C:\b`}})[0].Error, "cannot contain ';'")
}

func TestWineProcesses(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	probeWin := pr.p.WinPath(pr.exe)
	winsvc := pr.p.WinPath(pr.winsvc)
	tricky := []string{"a b", `q"uote`, "", `trail\`, `C:\dir with space\`, `x\\"y`}

	rs := pr.run(
		step{"run", a{"argv": append([]string{probeWin, "child"}, tricky...), "stdin": []byte("input"),
			"env": []string{"PROBE_ENV=from env", "PROBE_EXIT=7"}}},
		step{"run", a{"argv": []string{probeWin, "child"}, "env": []string{"PROBE_BIG=100000"}, "output_limit": 1000}},
		step{"run", a{"argv": []string{"cmd.exe", "/c", "cd"}, "dir": `C:\windows`}},
		step{"run", a{"argv": []string{`C:\no\such.exe`}}},
		step{"run", a{"argv": []string{"cmd.exe"}, "dir": `C:\no such dir`}},
		// cmd.exe starts winsvc (console mode, runs until killed): the
		// timeout must take the grandchild down too.
		step{"run", a{"argv": []string{"cmd.exe", "/c", winsvc}, "timeout_ms": 1500}},
		step{Op: "ps"},
		// Wine's PowerShell is a stub that exits 0: refused, never a silent pass.
		step{"run", a{"argv": []string{"powershell.exe", "-Command", "exit 3"}}},
		step{"run", a{"argv": []string{`C:\Program Files\PowerShell\7\pwsh.exe`, "-c", "exit 3"}}},
	)
	for _, i := range []int{0, 1, 2, 5, 6} {
		require.Empty(t, rs[i].Error, "step %d", i)
	}
	r := value[host.RunResult](t, rs[0])
	assert.Equal(t, 7, r.ExitCode)
	assert.Equal(t, "to stderr", string(r.Stderr))
	var child struct {
		Args  []string `json:"args"`
		Stdin string   `json:"stdin"`
		Env   string   `json:"env"`
	}
	require.NoError(t, json.Unmarshal(r.Stdout, &child), "%s", r.Stdout)
	assert.Equal(t, tricky, child.Args, "arguments arrive unchanged (no shell, proper quoting)")
	assert.Equal(t, "input", child.Stdin)
	assert.Equal(t, "from env", child.Env)

	r = value[host.RunResult](t, rs[1])
	assert.Equal(t, 0, r.ExitCode)
	assert.True(t, r.Truncated)
	assert.Len(t, r.Stdout, 1000)

	assert.Equal(t, `c:\windows`, strings.ToLower(strings.TrimSpace(string(value[host.RunResult](t, rs[2]).Stdout))))
	assert.NotEmpty(t, rs[3].Error)
	assert.Contains(t, rs[4].Error, "working directory")

	for _, i := range []int{7, 8} {
		assert.Contains(t, rs[i].Error, "not supported on this platform", "step %d", i)
		assert.Contains(t, rs[i].Error, "Wine", "step %d", i)
	}

	r = value[host.RunResult](t, rs[5])
	assert.True(t, r.TimedOut)
	assert.Equal(t, -1, r.ExitCode)
	for _, p := range value[[]host.Process](t, rs[6]) {
		assert.NotEqual(t, "winsvc.exe", strings.ToLower(p.Image), "grandchild survived the timeout: %+v", p)
	}

	// Spawned processes outlive the probe; list and kill them by image name
	// and by pid.
	rs = pr.ok(
		step{"spawn", a{"argv": []string{winsvc}}},
		step{"spawn", a{"argv": []string{winsvc}}},
		step{"spawn", a{"argv": []string{winsvc}}},
	)
	pids := []int{value[int](t, rs[0]), value[int](t, rs[1]), value[int](t, rs[2])}
	rs = pr.ok(
		step{Op: "ps"},
		step{"kill", a{"pid": pids[2]}},
		step{"kill", a{"image": "WINSVC"}},
		step{Op: "ps"},
		step{"kill", a{"pid": pids[0]}},
		step{"kill", a{"image": "winsvc.exe"}},
	)
	images := map[int]string{}
	for _, p := range value[[]host.Process](t, rs[0]) {
		images[p.PID] = p.Image
	}
	for _, pid := range pids {
		assert.Equal(t, "winsvc.exe", images[pid], "pid %d listed", pid)
	}
	assert.Equal(t, 1, value[int](t, rs[1]))
	assert.Equal(t, 2, value[int](t, rs[2]))
	for _, p := range value[[]host.Process](t, rs[3]) {
		assert.NotEqual(t, "winsvc.exe", p.Image)
	}
	assert.Equal(t, 0, value[int](t, rs[4]), "a gone pid is no error")
	assert.Equal(t, 0, value[int](t, rs[5]))
	assert.Contains(t, pr.run(step{"kill", a{}})[0].Error, "neither a pid nor an image")
}

type markerLine struct {
	Event string   `json:"event"`
	PID   int      `json:"pid"`
	Args  []string `json:"args"`
}

func readMarker(t *testing.T, path string) []markerLine {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var out []markerLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m markerLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "marker line %q", sc.Text())
		out = append(out, m)
	}
	return out
}

func events(ms []markerLine) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Event)
	}
	return out
}

func TestWineServices(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	// The binary and its marker live under paths with spaces.
	binDir := pr.p.LinuxPath(`C:\Program Files\wsu test`)
	require.NoError(t, os.MkdirAll(binDir, 0o755))
	exe, err := os.ReadFile(pr.winsvc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(binDir, "winsvc.exe"), exe, 0o755))
	markerDir := `C:\wsu markers\run one`
	require.NoError(t, os.MkdirAll(pr.p.LinuxPath(markerDir), 0o755))
	marker1, marker2 := markerDir+`\first.log`, markerDir+`\second.log`

	const name = "wsu-standin"
	cfg := host.ServiceConfig{
		Name:        name,
		DisplayName: "wsu stand-in service",
		Description: "Managed by wsu (test stand-in)",
		BinaryPath:  `C:\Program Files\wsu test\winsvc.exe`,
		Args:        []string{"-service", "-name", name, "-exit-delay", "1s", "-marker", marker1, "--", "two words", `q"uote`, `trail\`},
		StartType:   host.StartAutomatic,
	}
	rs := pr.ok(
		step{"svc-query", a{"name": name}},
		step{"svc-create", a{"service": cfg}},
		step{"svc-query", a{"name": name}},
	)
	assert.False(t, value[host.ServiceInfo](t, rs[0]).Exists)
	info := value[host.ServiceInfo](t, rs[2])
	assert.True(t, info.Exists)
	assert.Equal(t, host.ServiceStopped, info.State)
	assert.Equal(t, cfg, info.Config, "the configuration reads back as written")
	assert.Contains(t, pr.run(step{"svc-create", a{"service": cfg}})[0].Error, "already exists")

	rs = pr.ok(
		step{"svc-start", a{"name": name}},
		step{"svc-wait", a{"name": name, "state": host.ServiceRunning, "timeout_ms": 20000}},
		step{"svc-query", a{"name": name}},
		step{"svc-start", a{"name": name}}, // already running: fine
		step{Op: "ps"},
	)
	info = value[host.ServiceInfo](t, rs[2])
	assert.Equal(t, host.ServiceRunning, info.State)
	require.NotZero(t, info.PID)
	found := false
	for _, p := range value[[]host.Process](t, rs[4]) {
		found = found || (p.PID == info.PID && strings.EqualFold(p.Image, "winsvc.exe"))
	}
	assert.True(t, found, "service pid %d is a running winsvc.exe", info.PID)
	require.Eventually(t, func() bool { return len(readMarker(t, pr.p.LinuxPath(marker1))) > 0 }, 10*time.Second, 50*time.Millisecond)
	m := readMarker(t, pr.p.LinuxPath(marker1))
	assert.Equal(t, "start", m[0].Event)
	assert.Equal(t, info.PID, m[0].PID)
	assert.Equal(t, cfg.Args, m[0].Args, "the service got its arguments through the SCM unchanged")

	// A new binary path and arguments apply at the next start.
	cfg2 := cfg
	cfg2.Args = []string{"-service", "-name", name, "-marker", marker2, "--", "second run"}
	cfg2.Description = "Managed by wsu (updated)"
	cfg2.StartType = host.StartManual
	rs = pr.ok(
		step{"svc-update", a{"service": cfg2}},
		step{"svc-query", a{"name": name}},
		step{"svc-stop", a{"name": name, "timeout_ms": 20000}},
		step{"svc-query", a{"name": name}},
		step{Op: "ps"},
	)
	assert.Equal(t, cfg2, value[host.ServiceInfo](t, rs[1]).Config)
	assert.Equal(t, host.ServiceStopped, value[host.ServiceInfo](t, rs[3]).State)
	// "exit" is written after a 1 s delay just before the process ends: seeing
	// it means StopService waited for the process, not just for STOPPED.
	assert.Equal(t, []string{"start", "stop", "exit"}, events(readMarker(t, pr.p.LinuxPath(marker1))))
	for _, p := range value[[]host.Process](t, rs[4]) {
		assert.NotEqual(t, info.PID, p.PID, "service process still listed after stop")
	}

	pr.ok(
		step{"svc-stop", a{"name": name, "timeout_ms": 5000}}, // stopped already: fine
		step{"svc-start", a{"name": name}},
		step{"svc-wait", a{"name": name, "state": host.ServiceRunning, "timeout_ms": 20000}},
	)
	require.Eventually(t, func() bool { return len(readMarker(t, pr.p.LinuxPath(marker2))) > 0 }, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, cfg2.Args, readMarker(t, pr.p.LinuxPath(marker2))[0].Args)

	// Settings Wine's SCM does not have are reported, not hidden.
	delayed := cfg
	// Display names are unique too.
	delayed.Name, delayed.DisplayName, delayed.StartType = "wsu-delayed", "wsu delayed stand-in", host.StartDelayedAutomatic
	rs = pr.run(
		step{"svc-recovery", a{"name": name, "recovery": host.ServiceRecovery{
			RestartDelays: []time.Duration{5 * time.Second, 10 * time.Second}, ResetPeriod: time.Hour}}},
		step{"svc-create", a{"service": delayed}},
		step{"svc-query", a{"name": "wsu-delayed"}},
		step{"svc-update", a{"service": delayed}},
		step{"svc-delete", a{"name": "wsu-delayed", "timeout_ms": 20000}},
	)
	for i, what := range map[int]string{0: "recovery actions", 1: "delayed automatic start", 3: "delayed automatic start"} {
		t.Logf("reported: %s", rs[i].Error)
		assert.True(t, rs[i].NotSupported, "step %d: %s", i, rs[i].Error)
		assert.Contains(t, rs[i].Error, what)
		assert.Contains(t, rs[i].Error, host.ErrNotSupported.Error())
	}
	assert.Equal(t, host.StartAutomatic, value[host.ServiceInfo](t, rs[2]).Config.StartType,
		"the service exists, starting automatically; only the delay is missing")
	assert.Empty(t, rs[4].Error)

	// Delete stops the running service, waits for its process, then for
	// the SCM to forget it.
	rs = pr.ok(
		step{"svc-query", a{"name": name}},
		step{"svc-delete", a{"name": name, "timeout_ms": 20000}},
		step{"svc-query", a{"name": name}},
		step{"svc-delete", a{"name": name, "timeout_ms": 20000}}, // gone: fine
		step{Op: "ps"},
	)
	pid := value[host.ServiceInfo](t, rs[0]).PID
	assert.False(t, value[host.ServiceInfo](t, rs[2]).Exists)
	assert.Equal(t, []string{"start", "stop", "exit"}, events(readMarker(t, pr.p.LinuxPath(marker2))))
	for _, p := range value[[]host.Process](t, rs[4]) {
		assert.NotEqual(t, pid, p.PID)
	}
	rs = pr.run(
		step{"svc-start", a{"name": name}},
		step{"svc-stop", a{"name": name}},
		step{"svc-wait", a{"name": name, "state": host.ServiceRunning, "timeout_ms": 100}},
	)
	for _, r := range rs {
		assert.Contains(t, r.Error, "does not exist")
	}
}

func TestWineFactsAndHNS(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	rs := pr.run(
		step{Op: "facts"},
		step{Op: "hns-networks"},
		step{Op: "hns-endpoints"},
		step{"hns-create-endpoint", a{"endpoint": host.HNSEndpoint{Name: "VIPEndpoint", Network: "OVNKubernetesHybridOverlayNetwork", HostAttach: true}}},
		step{"hns-delete-endpoint", a{"id": "VIPEndpoint"}},
		step{"hns-delete-network", a{"id": "OVNKubernetesHybridOverlayNetwork"}},
	)
	require.Empty(t, rs[0].Error)
	f := value[host.Facts](t, rs[0])
	assert.Equal(t, "windows", f.OS)
	assert.Equal(t, "10.0", f.Version, "the template prefix reports Windows 10")
	assert.Equal(t, "18362", f.Build)
	assert.Equal(t, "amd64", f.Architecture)
	// Wine answers from the Linux machine it runs on.
	linuxName, err := os.Hostname()
	require.NoError(t, err)
	assert.True(t, strings.EqualFold(linuxName, f.Hostname), "hostname %q, Linux says %q", f.Hostname, linuxName)
	assert.True(t, strings.HasPrefix(strings.ToLower(f.FQDN), strings.ToLower(f.Hostname)), "FQDN %q starts with the hostname", f.FQDN)
	assert.Equal(t, linuxDefaultIPv4(t), f.IPv4, "IPv4 of the interface holding the default route")
	t.Logf("facts under Wine: %+v", f)
	// Wine has no computenetwork.dll: every HNS call says so.
	for i, r := range rs[1:] {
		t.Logf("reported: %s", r.Error)
		assert.True(t, r.NotSupported, "HNS step %d: %q", i+1, r.Error)
		assert.Contains(t, r.Error, "no Host Networking Service API")
	}
}

// linuxDefaultIPv4 is the first IPv4 address of the interface that holds
// the default route in /proc/net/route ("" without one), which is what the
// Windows code must find through Wine's GetBestInterface.
func linuxDefaultIPv4(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/net/route")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 8 || f[1] != "00000000" || f[7] != "00000000" {
			continue
		}
		ifc, err := net.InterfaceByName(f[0])
		require.NoError(t, err)
		addrs, err := ifc.Addrs()
		require.NoError(t, err)
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
		}
	}
	return ""
}
