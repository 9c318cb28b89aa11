package windows

import (
	"errors"
	"runtime"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/transport/local"
)

func TestDirectory(t *testing.T) {
	const dir = `C:\var\log\kubelet`
	absent := map[string]cty.Value{"state": cty.StringVal("absent")}
	ifEmpty := map[string]cty.Value{"state": cty.StringVal("absent"), "only_if_empty": cty.True}
	tests := []struct {
		name       string
		setup      func(t *testing.T, h host.Host)
		attrs      map[string]cty.Value // path is added
		wantAction modules.Action
		wantExists bool
		wantKept   bool
		wantLeft   string // a file that must survive, "" for none
	}{
		{name: "create with parents", wantAction: modules.Create, wantExists: true},
		{
			name:       "exists in another case",
			setup:      func(t *testing.T, h host.Host) { require.NoError(t, h.MkdirAll(ctx, `c:\VAR\Log\Kubelet`, 0o755)) },
			wantExists: true,
		},
		{
			name: "absent removes the tree",
			setup: func(t *testing.T, h host.Host) {
				writeFile(t, h, dir+`\old\kubelet.log`, "log")
			},
			attrs:      absent,
			wantAction: modules.Delete,
		},
		{name: "absent already", attrs: absent},
		{
			name:       "only if empty removes an empty directory",
			setup:      func(t *testing.T, h host.Host) { require.NoError(t, h.MkdirAll(ctx, dir, 0o755)) },
			attrs:      ifEmpty,
			wantAction: modules.Delete,
		},
		{
			name:       "only if empty keeps a file",
			setup:      func(t *testing.T, h host.Host) { writeFile(t, h, dir+`\other.log`, "not ours") },
			attrs:      ifEmpty,
			wantExists: true, wantKept: true, wantLeft: dir + `\other.log`,
		},
		{
			name:       "only if empty keeps an empty subdirectory",
			setup:      func(t *testing.T, h host.Host) { require.NoError(t, h.MkdirAll(ctx, dir+`\sub`, 0o755)) },
			attrs:      ifEmpty,
			wantExists: true, wantKept: true,
		},
		{
			name:       "only if empty, in another case",
			setup:      func(t *testing.T, h host.Host) { require.NoError(t, h.MkdirAll(ctx, `C:\VAR\LOG\KUBELET`, 0o755)) },
			attrs:      ifEmpty,
			wantAction: modules.Delete,
		},
		{name: "only if empty, absent already", attrs: ifEmpty},
		{
			name:  "only if empty, parent missing",
			attrs: map[string]cty.Value{"path": cty.StringVal(`C:\nothing\here`), "state": cty.StringVal("absent"), "only_if_empty": cty.True},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			attrs := map[string]cty.Value{"path": cty.StringVal(dir)}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			path := attrs["path"].AsString()
			cfg := cfgFor(t, Directory{}, attrs)
			pr, ar := converge(t, Directory{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			final := pr.Result
			if pr.Change != nil {
				assert.Equal(t, path, pr.Change.Subject)
				assert.Empty(t, pr.Change.Fields)
				final = ar.Result
			}
			assert.Equal(t, cty.StringVal(path), final.GetAttr("path"))
			assert.Equal(t, cty.BoolVal(tt.wantKept), final.GetAttr("kept_not_empty"))
			fi, err := h.Stat(ctx, path)
			require.NoError(t, err)
			assert.Equal(t, tt.wantExists, fi.Exists)
			assert.Equal(t, tt.wantExists, fi.IsDir)
			if tt.wantLeft != "" {
				assert.Equal(t, "not ours", readFile(t, h, tt.wantLeft))
			}
		})
	}
}

// A plan that removes an empty directory does not promise what Apply will
// find: what appears in between is kept, not an error, and the result says
// so. Apply lists again and then removes non-recursively, so even an entry
// that appears after its own listing survives.
func TestDirectoryOnlyIfEmptyRace(t *testing.T) {
	const dir = `C:\var`
	tests := []struct {
		name     string
		between  func(t *testing.T, h host.Host) // after the plan
		fake     func(t *testing.T, h host.Host, f *fakeHost)
		wantKept bool
		wantErr  string // a diagnostic summary
		wantOps  []string
	}{
		{
			name:    "still empty",
			wantOps: []string{`list C:\var limit=1`, `remove C:\var recursive=false`},
		},
		{
			name:     "a file appeared before apply",
			between:  func(t *testing.T, h host.Host) { writeFile(t, h, dir+`\lib\x`, "new") },
			wantKept: true,
			wantOps:  []string{`list C:\var limit=1`},
		},
		{
			name: "a file appeared during apply",
			fake: func(t *testing.T, h host.Host, f *fakeHost) {
				f.afterList = func(n int) {
					if n == 1 {
						writeFile(t, h, dir+`\x`, "new")
					}
				}
			},
			wantKept: true,
			wantOps:  []string{`list C:\var limit=1`, `remove C:\var recursive=false`, `list C:\var limit=1`},
		},
		{
			// Its removal fails on the missing directory: the goal is met.
			name: "removed by someone else during apply",
			fake: func(t *testing.T, h host.Host, f *fakeHost) {
				f.afterList = func(n int) {
					if n == 1 {
						require.NoError(t, h.Remove(ctx, dir, false))
					}
				}
				f.removeErr = errors.New("the system cannot find the file specified")
			},
			wantOps: []string{`list C:\var limit=1`, `remove C:\var recursive=false`, `list C:\var limit=1`},
		},
		{
			name: "removal fails",
			fake: func(t *testing.T, h host.Host, f *fakeHost) {
				f.removeErr = errors.New("access is denied (ERROR_ACCESS_DENIED)")
			},
			wantErr: "Cannot remove directory",
			wantOps: []string{`list C:\var limit=1`, `remove C:\var recursive=false`, `list C:\var limit=1`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			require.NoError(t, h.MkdirAll(ctx, dir, 0o755))
			cfg := cfgFor(t, Directory{}, map[string]cty.Value{"path": cty.StringVal(dir), "state": cty.StringVal("absent"), "only_if_empty": cty.True})
			pr := plan(t, Directory{}, h, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.Equal(t, modules.Delete, action(pr.Change))
			assert.False(t, pr.Result.GetAttr("kept_not_empty").IsKnown(), "apply decides")
			if tt.between != nil {
				tt.between(t, h)
			}
			f := &fakeHost{Host: h}
			if tt.fake != nil {
				tt.fake(t, h, f)
			}
			ar := apply(t, Directory{}, f, cfg, pr.Change)
			assert.Equal(t, tt.wantOps, f.ops())
			if tt.wantErr != "" {
				requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, tt.wantErr, "path")
				return
			}
			require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			assert.Equal(t, cty.BoolVal(tt.wantKept), ar.Result.GetAttr("kept_not_empty"))
			fi, err := h.Stat(ctx, dir)
			require.NoError(t, err)
			assert.Equal(t, tt.wantKept, fi.Exists)
		})
	}
}

func TestDirectoryFileInTheWay(t *testing.T) {
	tests := []struct {
		name  string
		attrs map[string]cty.Value
	}{
		{"present", nil},
		{"absent", map[string]cty.Value{"state": cty.StringVal("absent")}},
		{"absent only if empty", map[string]cty.Value{"state": cty.StringVal("absent"), "only_if_empty": cty.True}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			writeFile(t, h, `C:\k\cni`, "not a directory")
			attrs := map[string]cty.Value{"path": cty.StringVal(`C:\k\cni`)}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, Directory{}, attrs)
			pr := plan(t, Directory{}, h, cfg)
			assert.Nil(t, pr.Change)
			requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Path is not a directory", "path")
			ar := apply(t, Directory{}, h, cfg, &modules.Change{Action: modules.Create})
			requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Path is not a directory", "path")
			assert.Equal(t, "not a directory", readFile(t, h, `C:\k\cni`), "the file is left alone")
		})
	}
}

func TestDirectoryNotWindows(t *testing.T) {
	cfg := cfgFor(t, Directory{}, map[string]cty.Value{"path": cty.StringVal(`C:\k`)})
	if runtime.GOOS == "windows" {
		t.Skip("the local host is Windows here")
	}
	pr := plan(t, Directory{}, local.New(), cfg)
	assert.Nil(t, pr.Change)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Not a Windows host", "path")
}

func TestDirectoryUnknown(t *testing.T) {
	h := newHost(t)
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSubject string
	}{
		{"path", map[string]cty.Value{"path": unknownStr}, knownAfterApply},
		{"state", map[string]cty.Value{"path": cty.StringVal(`C:\k`), "state": unknownStr}, `C:\k`},
		{"only_if_empty", map[string]cty.Value{"path": cty.StringVal(`C:\k`), "state": cty.StringVal("absent"), "only_if_empty": cty.UnknownVal(cty.Bool)}, `C:\k`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Directory{}, tt.attrs)
			pr := plan(t, Directory{}, h, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.wantSubject, pr.Change.Subject)
		})
	}
	fi, err := h.Stat(ctx, `C:\k`)
	require.NoError(t, err)
	assert.False(t, fi.Exists, "planning changed nothing")
}

func TestDirectoryValidate(t *testing.T) {
	runValidate(t, Directory{}, []validateCase{
		{name: "drive", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k`)}},
		{name: "forward slashes", attrs: map[string]cty.Value{"path": cty.StringVal("C:/k/cni")}},
		{name: "unc", attrs: map[string]cty.Value{"path": cty.StringVal(`\\srv\share\k`)}},
		{name: "root present is fine", attrs: map[string]cty.Value{"path": cty.StringVal(`D:\`)}},
		{name: "posix", attrs: map[string]cty.Value{"path": cty.StringVal("/opt/k")}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "relative", attrs: map[string]cty.Value{"path": cty.StringVal(`k\cni`)}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "drive relative", attrs: map[string]cty.Value{"path": cty.StringVal("C:k")}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "bad character", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k|x`)}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "empty", attrs: map[string]cty.Value{"path": cty.StringVal("")}, wantSummary: "Empty path", wantAttr: "path"},
		{name: "bad state", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k`), "state": cty.StringVal("gone")}, wantSummary: "Invalid state", wantAttr: "state"},
		{name: "only if empty", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\var`), "state": cty.StringVal("absent"), "only_if_empty": cty.True}},
		{name: "not only if empty, present", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\var`), "only_if_empty": cty.False}},
		{name: "only if empty, present", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\var`), "only_if_empty": cty.True}, wantSummary: `only_if_empty needs state = "absent"`, wantAttr: "only_if_empty"},
		{name: "only if empty, a root", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\`), "state": cty.StringVal("absent"), "only_if_empty": cty.True}, wantSummary: "Refusing to remove a root", wantAttr: "path"},
		{name: "remove a root", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\`), "state": cty.StringVal("absent")}, wantSummary: "Refusing to remove a root", wantAttr: "path"},
		{name: "remove a share", attrs: map[string]cty.Value{"path": cty.StringVal(`\\srv\share\`), "state": cty.StringVal("absent")}, wantSummary: "Refusing to remove a root", wantAttr: "path"},
	})
}
