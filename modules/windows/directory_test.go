package windows

import (
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
	tests := []struct {
		name       string
		setup      func(t *testing.T, h host.Host)
		attrs      map[string]cty.Value // path is added
		wantAction modules.Action
		wantExists bool
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
			attrs:      map[string]cty.Value{"state": cty.StringVal("absent")},
			wantAction: modules.Delete,
		},
		{name: "absent already", attrs: map[string]cty.Value{"state": cty.StringVal("absent")}},
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
			cfg := cfgFor(t, Directory{}, attrs)
			pr, _ := converge(t, Directory{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			if pr.Change != nil {
				assert.Equal(t, dir, pr.Change.Subject)
				assert.Empty(t, pr.Change.Fields)
			}
			assert.Equal(t, cty.StringVal(dir), pr.Result.GetAttr("path"))
			fi, err := h.Stat(ctx, dir)
			require.NoError(t, err)
			assert.Equal(t, tt.wantExists, fi.Exists)
			assert.Equal(t, tt.wantExists, fi.IsDir)
		})
	}
}

func TestDirectoryFileInTheWay(t *testing.T) {
	h := newHost(t)
	writeFile(t, h, `C:\k\cni`, "not a directory")
	cfg := cfgFor(t, Directory{}, map[string]cty.Value{"path": cty.StringVal(`C:\k\cni`)})
	pr := plan(t, Directory{}, h, cfg)
	assert.Nil(t, pr.Change)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Path is not a directory", "path")
	ar := apply(t, Directory{}, h, cfg, &modules.Change{Action: modules.Create})
	requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Path is not a directory", "path")
	assert.Equal(t, "not a directory", readFile(t, h, `C:\k\cni`), "the file is left alone")
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
		{name: "remove a root", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\`), "state": cty.StringVal("absent")}, wantSummary: "Refusing to remove a root", wantAttr: "path"},
		{name: "remove a share", attrs: map[string]cty.Value{"path": cty.StringVal(`\\srv\share\`), "state": cty.StringVal("absent")}, wantSummary: "Refusing to remove a root", wantAttr: "path"},
	})
}
