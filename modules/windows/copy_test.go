package windows

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

const kubeProxy = `C:\k\kube-proxy.exe`

// localSrc writes a payload file on the controller side.
func localSrc(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "payload.exe")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestCopy(t *testing.T) {
	tests := []struct {
		name       string
		existing   *string
		wantAction modules.Action
	}{
		{name: "fresh host", wantAction: modules.Create},
		{name: "different file", existing: ptr("old binary"), wantAction: modules.Update},
		{name: "same file", existing: ptr("hello")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.existing != nil {
				writeFile(t, h, kubeProxy, *tt.existing)
			}
			cfg := cfgFor(t, Copy{}, map[string]cty.Value{"src": cty.StringVal(localSrc(t, "hello")), "dest": cty.StringVal(kubeProxy)})
			pr, ar := converge(t, Copy{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			assert.Equal(t, cty.StringVal(helloSHA), pr.Result.GetAttr("sha256"))
			assert.Equal(t, cty.NumberIntVal(5), pr.Result.GetAttr("size"))
			if pr.Change == nil {
				assert.Equal(t, cty.NumberIntVal(0), pr.Result.GetAttr("bytes_sent"), "skipped: nothing sent")
			} else {
				assert.Equal(t, []string{"sha256", "size"}, fieldNames(pr.Change))
				assert.Empty(t, pr.Change.Restarts)
				assert.False(t, pr.Result.GetAttr("bytes_sent").IsKnown())
				assert.Equal(t, cty.NumberIntVal(5), ar.Result.GetAttr("bytes_sent"))
				assert.Equal(t, cty.StringVal(helloSHA), ar.Result.GetAttr("sha256"))
			}
			assert.Equal(t, "hello", readFile(t, h, kubeProxy))
		})
	}
}

// Apply on a host that already has the file (it changed since planning)
// sends nothing.
func TestCopyApplySkipsEqualFile(t *testing.T) {
	h := newHost(t)
	f := &fakeHost{Host: h}
	writeFile(t, h, kubeProxy, "hello")
	cfg := cfgFor(t, Copy{}, map[string]cty.Value{"src": cty.StringVal(localSrc(t, "hello")), "dest": cty.StringVal(kubeProxy)})
	ar := apply(t, Copy{}, f, cfg, &modules.Change{Action: modules.Update, Subject: kubeProxy})
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.Equal(t, cty.NumberIntVal(0), ar.Result.GetAttr("bytes_sent"))
	assert.Empty(t, f.ops(), "no write")
}

func TestCopyRelativeSrc(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "payload"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "payload", "kubelet.exe"), []byte("hello"), 0o644))
	t.Chdir(dir)
	h := newHost(t)
	cfg := cfgFor(t, Copy{}, map[string]cty.Value{"src": cty.StringVal("payload/kubelet.exe"), "dest": cty.StringVal(`C:\k\kubelet.exe`)})
	converge(t, Copy{}, h, cfg)
	assert.Equal(t, "hello", readFile(t, h, `C:\k\kubelet.exe`))
}

// The case the module exists for: kube-proxy.exe is replaced while the
// kube-proxy service runs it.
func TestCopyOverRunningService(t *testing.T) {
	tests := []struct {
		name    string
		service cty.Value // null: detected from the file name
	}{
		{"service given", cty.StringVal("kube-proxy")},
		{"service detected", cty.NullVal(cty.String)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			before := runningService(t, h, "kube-proxy", kubeProxy, "--windows-service")
			// What the module must avoid: Windows refuses the write.
			err := h.WriteFile(ctx, kubeProxy, strings.NewReader("new"), 0o755)
			require.ErrorIs(t, err, sim.ErrFileInUse)

			f := &fakeHost{Host: h}
			cfg := cfgFor(t, Copy{}, map[string]cty.Value{
				"src": cty.StringVal(localSrc(t, "new kube-proxy")), "dest": cty.StringVal(kubeProxy), "service": tt.service,
			})
			pr := plan(t, Copy{}, f, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, modules.Update, pr.Change.Action)
			assert.Equal(t, []string{"kube-proxy"}, pr.Change.Restarts)
			assert.Empty(t, f.ops(), "planning stopped nothing")

			ar := apply(t, Copy{}, f, cfg, pr.Change)
			require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			assert.Equal(t, []string{"stop kube-proxy", "write " + kubeProxy, "start kube-proxy"}, f.ops())
			assert.Equal(t, "new kube-proxy", readFile(t, h, kubeProxy))
			after := query(t, h, "kube-proxy")
			assert.Equal(t, host.ServiceRunning, after.State, "running again")
			assert.NotEqual(t, before.PID, after.PID, "a new process runs the new binary")
			assert.Equal(t, cty.NumberIntVal(int64(len("new kube-proxy"))), ar.Result.GetAttr("bytes_sent"))

			again := plan(t, Copy{}, h, cfg)
			assert.Nil(t, again.Change, "second apply: no change")
		})
	}
}

func TestCopyNoRestart(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, h host.Host)
		service cty.Value
	}{
		{
			name: "named service stopped",
			setup: func(t *testing.T, h host.Host) {
				runningService(t, h, "kube-proxy", kubeProxy)
				require.NoError(t, h.StopService(ctx, "kube-proxy", 0))
			},
			service: cty.StringVal("kube-proxy"),
		},
		{
			name:    "named service missing",
			setup:   func(t *testing.T, h host.Host) { writeFile(t, h, kubeProxy, "old") },
			service: cty.StringVal("kube-proxy"),
		},
		{
			name: "same-named service runs another binary",
			setup: func(t *testing.T, h host.Host) {
				runningService(t, h, "kube-proxy", `C:\k\kube-log-runner.exe`)
				writeFile(t, h, kubeProxy, "old")
			},
			service: cty.NullVal(cty.String),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			tt.setup(t, h)
			before := query(t, h, "kube-proxy")
			f := &fakeHost{Host: h}
			cfg := cfgFor(t, Copy{}, map[string]cty.Value{
				"src": cty.StringVal(localSrc(t, "new")), "dest": cty.StringVal(kubeProxy), "service": tt.service,
			})
			pr, _ := converge(t, Copy{}, f, cfg)
			require.NotNil(t, pr.Change)
			assert.Empty(t, pr.Change.Restarts)
			assert.Equal(t, []string{"write " + kubeProxy}, f.ops(), "nothing stopped or started")
			assert.Equal(t, before.State, query(t, h, "kube-proxy").State)
		})
	}
}

// A failed write still starts the service again, on its old binary.
func TestCopyWriteFailsServiceRestarted(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kube-proxy", kubeProxy)
	f := &fakeHost{Host: h, writeErr: errors.New("disk full")}
	cfg := cfgFor(t, Copy{}, map[string]cty.Value{"src": cty.StringVal(localSrc(t, "new")), "dest": cty.StringVal(kubeProxy), "service": cty.StringVal("kube-proxy")})
	pr := plan(t, Copy{}, f, cfg)
	require.NotNil(t, pr.Change)
	ar := apply(t, Copy{}, f, cfg, pr.Change)
	d := requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Cannot write file", "dest")
	assert.Contains(t, d.Detail, "disk full")
	assert.Equal(t, []string{"stop kube-proxy", "write " + kubeProxy, "start kube-proxy"}, f.ops())
	assert.Equal(t, host.ServiceRunning, query(t, h, "kube-proxy").State)
	assert.Equal(t, "MZ stand-in for kube-proxy", readFile(t, h, kubeProxy), "old binary kept")
}

func TestCopyErrors(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.MkdirAll(ctx, `C:\k\dir`, 0o755))
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSummary string
		wantAttr    string
	}{
		{"missing src", map[string]cty.Value{"src": cty.StringVal(filepath.Join(t.TempDir(), "nope")), "dest": cty.StringVal(kubeProxy)}, "Cannot read source", "src"},
		{"src is a directory", map[string]cty.Value{"src": cty.StringVal(t.TempDir()), "dest": cty.StringVal(kubeProxy)}, "Cannot read source", "src"},
		{"dest is a directory", map[string]cty.Value{"src": cty.StringVal(localSrc(t, "x")), "dest": cty.StringVal(`C:\k\dir`)}, "Path is a directory", "dest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Copy{}, tt.attrs)
			pr := plan(t, Copy{}, h, cfg)
			assert.Nil(t, pr.Change)
			requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, tt.wantSummary, tt.wantAttr)
			ar := apply(t, Copy{}, h, cfg, &modules.Change{Action: modules.Update})
			requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, tt.wantSummary, tt.wantAttr)
		})
	}
}

func TestCopyUnknown(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kube-proxy", kubeProxy)
	src := cty.StringVal(localSrc(t, "hello"))
	tests := []struct {
		name         string
		attrs        map[string]cty.Value
		wantSubject  string
		wantRestarts []string
		wantSHA      cty.Value
	}{
		{"dest", map[string]cty.Value{"src": src, "dest": unknownStr}, knownAfterApply, nil, cty.StringVal(helloSHA)},
		{"dest and service", map[string]cty.Value{"src": src, "dest": unknownStr, "service": unknownStr}, knownAfterApply, []string{knownAfterApply}, cty.StringVal(helloSHA)},
		{"service", map[string]cty.Value{"src": src, "dest": cty.StringVal(kubeProxy), "service": unknownStr}, kubeProxy, []string{knownAfterApply}, cty.StringVal(helloSHA)},
		{"src", map[string]cty.Value{"src": unknownStr, "dest": cty.StringVal(kubeProxy)}, kubeProxy, []string{"kube-proxy"}, unknownStr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Copy{}, tt.attrs)
			pr := plan(t, Copy{}, h, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.wantSubject, pr.Change.Subject)
			assert.Equal(t, tt.wantRestarts, pr.Change.Restarts)
			assert.Equal(t, tt.wantSHA, pr.Result.GetAttr("sha256"))
			assert.False(t, pr.Result.GetAttr("bytes_sent").IsKnown())
		})
	}
	assert.Equal(t, host.ServiceRunning, query(t, h, "kube-proxy").State, "planning stopped nothing")
}

// A service unknown at plan time is the one "(known after apply)" stood
// for: apply restarts it.
func TestCopyServiceKnownAtApply(t *testing.T) {
	h := newHost(t)
	runningService(t, h, "kube-proxy", kubeProxy)
	f := &fakeHost{Host: h}
	src := cty.StringVal(localSrc(t, "new"))
	pr := plan(t, Copy{}, f, cfgFor(t, Copy{}, map[string]cty.Value{"src": src, "dest": cty.StringVal(kubeProxy), "service": unknownStr}))
	require.NotNil(t, pr.Change)
	cfg := cfgFor(t, Copy{}, map[string]cty.Value{"src": src, "dest": cty.StringVal(kubeProxy), "service": cty.StringVal("kube-proxy")})
	ar := apply(t, Copy{}, f, cfg, pr.Change)
	require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.Equal(t, []string{"stop kube-proxy", "write " + kubeProxy, "start kube-proxy"}, f.ops())
}

func TestCopyValidate(t *testing.T) {
	src := cty.StringVal("payload/kubelet.exe")
	runValidate(t, Copy{}, []validateCase{
		{name: "ok", attrs: map[string]cty.Value{"src": src, "dest": cty.StringVal(`C:\k\kubelet.exe`), "service": cty.StringVal("kubelet")}},
		{name: "forward slashes", attrs: map[string]cty.Value{"src": src, "dest": cty.StringVal("C:/k/kubelet.exe")}},
		{name: "empty src", attrs: map[string]cty.Value{"src": cty.StringVal(""), "dest": cty.StringVal(`C:\k\x`)}, wantSummary: "Empty src", wantAttr: "src"},
		{name: "posix dest", attrs: map[string]cty.Value{"src": src, "dest": cty.StringVal("/k/kubelet.exe")}, wantSummary: "Invalid Windows path", wantAttr: "dest"},
		{name: "relative dest", attrs: map[string]cty.Value{"src": src, "dest": cty.StringVal("kubelet.exe")}, wantSummary: "Invalid Windows path", wantAttr: "dest"},
		{name: "dest is a directory", attrs: map[string]cty.Value{"src": src, "dest": cty.StringVal(`C:\k\`)}, wantSummary: "dest is a directory", wantAttr: "dest"},
		{name: "service with slash", attrs: map[string]cty.Value{"src": src, "dest": cty.StringVal(`C:\k\x`), "service": cty.StringVal("kube/proxy")}, wantSummary: "Invalid service name", wantAttr: "service"},
		{name: "service too long", attrs: map[string]cty.Value{"src": src, "dest": cty.StringVal(`C:\k\x`), "service": cty.StringVal(strings.Repeat("s", 257))}, wantSummary: "Invalid service name", wantAttr: "service"},
	})
}

// A copied text file's change carries its content before and after for
// the plan's unified diff (as win_file's), when asked (a plan, apply
// --diff); a source larger than the bound, or private (mode 0600: a key,
// a kubeconfig), is not read for it.
func TestCopyContentDiff(t *testing.T) {
	const dest = `C:\k\cni\config.json`
	private := localSrc(t, "token: s3cret\n")
	require.NoError(t, os.Chmod(private, 0o600))
	tests := []struct {
		name     string
		src      string
		existing *string
		diff     bool
		want     *modules.ContentChange
	}{
		{name: "update", src: localSrc(t, "a\nb\n"), existing: ptr("a\nc\n"), diff: true, want: &modules.ContentChange{Old: "a\nc\n", New: "a\nb\n"}},
		{name: "create", src: localSrc(t, "a\n"), diff: true, want: &modules.ContentChange{New: "a\n"}},
		{name: "not asked", src: localSrc(t, "a\nb\n"), existing: ptr("a\nc\n")},
		{name: "large", src: localSrc(t, strings.Repeat("x", modules.MaxDiffBytes+1)), existing: ptr("a\n"), diff: true, want: &modules.ContentChange{Omitted: "larger than 64 KiB"}},
		{name: "private", src: private, existing: ptr("token: old\n"), diff: true, want: &modules.ContentChange{Omitted: "the source file is private (others may not read it)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.existing != nil {
				writeFile(t, h, dest, *tt.existing)
			}
			cfg := cfgFor(t, Copy{}, map[string]cty.Value{"src": cty.StringVal(tt.src), "dest": cty.StringVal(dest)})
			pr := Copy{}.Plan(ctx, modules.PlanRequest{Config: cfg, Host: route(t, h), Diff: tt.diff})
			require.False(t, pr.Diagnostics.HasErrors(), pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.want, pr.Change.Content)
		})
	}
}
