package generic

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"os"
	"path/filepath"
	"testing"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

func TestDirectoryPlanApply(t *testing.T) {
	skipOnWindows(t)
	tests := []struct {
		name       string
		setup      func(t *testing.T, path string)
		attrs      map[string]cty.Value // path is added
		wantAction modules.Action
		wantFields []string
		wantMode   os.FileMode // 0: absent afterwards
	}{
		{name: "create nested", setup: func(*testing.T, string) {}, wantAction: modules.Create, wantMode: 0o755},
		{
			name: "create with mode", setup: func(*testing.T, string) {},
			attrs:      map[string]cty.Value{"mode": cty.StringVal("0700")},
			wantAction: modules.Create, wantFields: []string{"mode"}, wantMode: 0o700,
		},
		{
			name: "in sync", setup: mkdir(0o750),
			wantMode: 0o750,
		},
		{
			name: "in sync with mode", setup: mkdir(0o750),
			attrs:    map[string]cty.Value{"mode": cty.StringVal("750")},
			wantMode: 0o750,
		},
		{
			name: "mode differs", setup: mkdir(0o755),
			attrs:      map[string]cty.Value{"mode": cty.StringVal("0711")},
			wantAction: modules.Update, wantFields: []string{"mode"}, wantMode: 0o711,
		},
		{
			name: "absent removes tree",
			setup: func(t *testing.T, p string) {
				require.NoError(t, os.MkdirAll(filepath.Join(p, "a", "b"), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(p, "a", "b", "f"), []byte("x"), 0o644))
			},
			attrs:      map[string]cty.Value{"state": cty.StringVal("absent")},
			wantAction: modules.Delete,
		},
		{
			name: "absent already", setup: func(*testing.T, string) {},
			attrs: map[string]cty.Value{"state": cty.StringVal("absent")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x", "y")
			tt.setup(t, path)
			attrs := map[string]cty.Value{"path": cty.StringVal(path)}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, Directory{}, attrs)

			resp := plan(t, Directory{}, cfg)
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			assert.Equal(t, tt.wantAction, action(resp.Change))
			assert.Equal(t, tt.wantFields, fieldNames(resp.Change))
			assert.Equal(t, cty.StringVal(path), resp.Result.GetAttr("path"))
			if resp.Change != nil {
				assert.Equal(t, path, resp.Change.Subject)
				ar := apply(t, Directory{}, cfg, resp.Change)
				require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			}

			fi, err := os.Stat(path)
			if tt.wantMode == 0 {
				assert.True(t, os.IsNotExist(err), "directory should be gone")
			} else {
				require.NoError(t, err)
				assert.True(t, fi.IsDir())
				assert.Equal(t, tt.wantMode, fi.Mode().Perm())
			}
			again := plan(t, Directory{}, cfg)
			require.False(t, again.Diagnostics.HasErrors(), "%v", again.Diagnostics)
			assert.Nil(t, again.Change, "second plan must be empty")
		})
	}
}

func mkdir(mode os.FileMode) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		require.NoError(t, os.MkdirAll(path, 0o755))
		require.NoError(t, os.Chmod(path, mode))
	}
}

func TestDirectoryUnknown(t *testing.T) {
	unknown := cty.UnknownVal(cty.String)
	existing := t.TempDir()
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSubject string
		wantFields  []string
	}{
		{name: "path", attrs: map[string]cty.Value{"path": unknown}, wantSubject: knownAfterApply},
		{name: "path and mode", attrs: map[string]cty.Value{"path": unknown, "mode": cty.StringVal("0700")}, wantSubject: knownAfterApply, wantFields: []string{"mode"}},
		{name: "state", attrs: map[string]cty.Value{"path": cty.StringVal(existing), "state": unknown}, wantSubject: existing},
		{name: "mode", attrs: map[string]cty.Value{"path": cty.StringVal(existing), "mode": unknown}, wantSubject: existing, wantFields: []string{"mode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Directory{}, tt.attrs)
			resp := plan(t, Directory{}, cfg)
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			require.NotNil(t, resp.Change)
			assert.Equal(t, modules.Update, resp.Change.Action)
			assert.Equal(t, tt.wantSubject, resp.Change.Subject)
			assert.Equal(t, tt.wantFields, fieldNames(resp.Change))
			assert.Equal(t, cfg.Get("path"), resp.Result.GetAttr("path"))
		})
	}
}

func TestDirectoryValidate(t *testing.T) {
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSummary string
		wantAttr    string
	}{
		{name: "ok", attrs: map[string]cty.Value{"path": cty.StringVal("/opt/wsu")}},
		{name: "windows ok", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k`), "mode": cty.StringVal("0755")}},
		{name: "root present is fine", attrs: map[string]cty.Value{"path": cty.StringVal("/")}},
		{name: "relative", attrs: map[string]cty.Value{"path": cty.StringVal("opt")}, wantSummary: "Relative path", wantAttr: "path"},
		{name: "bad mode", attrs: map[string]cty.Value{"path": cty.StringVal("/x"), "mode": cty.StringVal("rwx")}, wantSummary: "Invalid mode", wantAttr: "mode"},
		{name: "bad state", attrs: map[string]cty.Value{"path": cty.StringVal("/x"), "state": cty.StringVal("directory")}, wantSummary: "Invalid state", wantAttr: "state"},
		{name: "remove root", attrs: map[string]cty.Value{"path": cty.StringVal("/"), "state": cty.StringVal("absent")}, wantSummary: "Refusing to remove a root", wantAttr: "path"},
		{name: "remove drive", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\`), "state": cty.StringVal("absent")}, wantSummary: "Refusing to remove a root", wantAttr: "path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Directory{}, tt.attrs)
			diags := Directory{}.Validate(modules.ValidateRequest{Config: cfg})
			if tt.wantSummary == "" {
				assert.False(t, diags.HasErrors(), "%v", diags)
				return
			}
			requireDiag(t, diags, cfg, tt.wantSummary, tt.wantAttr)
			ar := apply(t, Directory{}, cfg, &modules.Change{Action: modules.Delete})
			requireDiag(t, ar.Diagnostics, cfg, tt.wantSummary, tt.wantAttr)
		})
	}
}

func TestDirectoryFileInTheWay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(path, []byte("keep"), 0o644))
	for _, state := range []string{"present", "absent"} {
		t.Run(state, func(t *testing.T) {
			cfg := cfgFor(t, Directory{}, map[string]cty.Value{"path": cty.StringVal(path), "state": cty.StringVal(state)})
			resp := plan(t, Directory{}, cfg)
			assert.Nil(t, resp.Change)
			requireDiag(t, resp.Diagnostics, cfg, "Path is not a directory", "path")
			ar := apply(t, Directory{}, cfg, &modules.Change{Action: modules.Delete})
			requireDiag(t, ar.Diagnostics, cfg, "Path is not a directory", "path")
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, "keep", string(got))
		})
	}
}
