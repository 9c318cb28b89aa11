package generic

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

const helloSHA = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")

func TestFilePlanApply(t *testing.T) {
	skipOnWindows(t)
	type existing struct {
		content string
		mode    os.FileMode
	}
	tests := []struct {
		name       string
		existing   *existing
		attrs      map[string]cty.Value // path is added
		wantAction modules.Action
		wantFields []string
		check      func(t *testing.T, resp modules.PlanResponse)
		wantFile   *existing // afterwards; nil: absent
	}{
		{
			name:       "create",
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello")},
			wantAction: modules.Create,
			wantFields: []string{"sha256", "size"},
			check: func(t *testing.T, resp modules.PlanResponse) {
				assert.Equal(t, cty.NullVal(cty.String), field(t, resp.Change, "sha256").Old)
				assert.Equal(t, cty.StringVal(helloSHA), field(t, resp.Change, "sha256").New)
				assert.Equal(t, cty.NumberIntVal(5), field(t, resp.Change, "size").New)
			},
			wantFile: &existing{"hello", 0o644},
		},
		{
			name:       "create with mode",
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello"), "mode": cty.StringVal("600")},
			wantAction: modules.Create,
			wantFields: []string{"sha256", "size", "mode"},
			check: func(t *testing.T, resp modules.PlanResponse) {
				assert.Equal(t, cty.StringVal("0600"), field(t, resp.Change, "mode").New, "mode is shown canonically")
			},
			wantFile: &existing{"hello", 0o600},
		},
		{
			name:     "in sync",
			existing: &existing{"hello", 0o644},
			attrs:    map[string]cty.Value{"content": cty.StringVal("hello")},
			wantFile: &existing{"hello", 0o644},
		},
		{
			name:       "same length, new content: only the hash is listed",
			existing:   &existing{"jello", 0o644},
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello")},
			wantAction: modules.Update,
			wantFields: []string{"sha256"},
			wantFile:   &existing{"hello", 0o644},
		},
		{
			name:       "content differs keeps mode",
			existing:   &existing{"old content", 0o640},
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello")},
			wantAction: modules.Update,
			wantFields: []string{"sha256", "size"},
			check: func(t *testing.T, resp modules.PlanResponse) {
				assert.Equal(t, cty.NumberIntVal(11), field(t, resp.Change, "size").Old)
				assert.Equal(t, cty.NumberIntVal(5), field(t, resp.Change, "size").New)
			},
			wantFile: &existing{"hello", 0o640},
		},
		{
			name:       "mode differs only",
			existing:   &existing{"hello", 0o644},
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello"), "mode": cty.StringVal("0600")},
			wantAction: modules.Update,
			wantFields: []string{"mode"},
			check: func(t *testing.T, resp modules.PlanResponse) {
				assert.Equal(t, cty.StringVal("0644"), field(t, resp.Change, "mode").Old)
				assert.Equal(t, cty.StringVal("0600"), field(t, resp.Change, "mode").New)
			},
			wantFile: &existing{"hello", 0o600},
		},
		{
			name:       "content and mode differ",
			existing:   &existing{"old", 0o644},
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello"), "mode": cty.StringVal("0400")},
			wantAction: modules.Update,
			wantFields: []string{"sha256", "size", "mode"},
			wantFile:   &existing{"hello", 0o400},
		},
		{
			name:       "empty content",
			existing:   &existing{"old", 0o644},
			attrs:      map[string]cty.Value{"content": cty.StringVal("")},
			wantAction: modules.Update,
			wantFields: []string{"sha256", "size"},
			wantFile:   &existing{"", 0o644},
		},
		{
			name:       "absent removes",
			existing:   &existing{"hello", 0o644},
			attrs:      map[string]cty.Value{"state": cty.StringVal("absent")},
			wantAction: modules.Delete,
			wantFields: []string{"sha256", "size"},
			check: func(t *testing.T, resp modules.PlanResponse) {
				assert.Equal(t, cty.StringVal(helloSHA), field(t, resp.Change, "sha256").Old)
				assert.Equal(t, cty.NullVal(cty.String), field(t, resp.Change, "sha256").New)
				assert.Equal(t, cty.NullVal(cty.String), resp.Result.GetAttr("sha256"))
			},
		},
		{
			name:  "absent already",
			attrs: map[string]cty.Value{"state": cty.StringVal("absent"), "content": cty.StringVal("ignored")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "sub", "dir", "f.conf") // parents missing
			if tt.existing != nil {
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(tt.existing.content), 0o644))
				require.NoError(t, os.Chmod(path, tt.existing.mode))
			}
			attrs := map[string]cty.Value{"path": cty.StringVal(path)}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, File{}, attrs)

			resp := plan(t, File{}, cfg)
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			assert.Equal(t, tt.wantAction, action(resp.Change))
			assert.Equal(t, tt.wantFields, fieldNames(resp.Change))
			assert.True(t, resp.Result.IsWhollyKnown(), "everything is known")
			assert.Equal(t, cty.StringVal(path), resp.Result.GetAttr("path"))
			if tt.check != nil {
				tt.check(t, resp)
			}
			if resp.Change != nil {
				assert.Equal(t, path, resp.Change.Subject)
				ar := apply(t, File{}, cfg, resp.Change)
				require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
				assert.Equal(t, resp.Result, ar.Result, "apply result matches plan")
			}

			got, err := os.ReadFile(path)
			if tt.wantFile == nil {
				assert.True(t, os.IsNotExist(err), "file should be absent")
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.wantFile.content, string(got))
				assert.Equal(t, tt.wantFile.mode, perm(t, path))
			}

			again := plan(t, File{}, cfg)
			require.False(t, again.Diagnostics.HasErrors(), "%v", again.Diagnostics)
			assert.Nil(t, again.Change, "second plan must be empty")
		})
	}
}

func TestFilePlanUnknown(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	require.NoError(t, os.WriteFile(existing, []byte("hello"), 0o644))
	missing := filepath.Join(dir, "missing")
	unknown := cty.UnknownVal(cty.String)

	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantAction  modules.Action
		wantSubject string
		wantFields  []string
		wantSHA     cty.Value // result sha256
		wantPath    cty.Value
	}{
		{
			name:        "content unknown, file missing",
			attrs:       map[string]cty.Value{"path": cty.StringVal(missing), "content": unknown},
			wantAction:  modules.Create,
			wantSubject: missing,
			wantFields:  []string{"sha256", "size"},
			wantSHA:     unknown,
			wantPath:    cty.StringVal(missing),
		},
		{
			name:        "content unknown, file exists",
			attrs:       map[string]cty.Value{"path": cty.StringVal(existing), "content": unknown},
			wantAction:  modules.Update,
			wantSubject: existing,
			wantFields:  []string{"sha256", "size"},
			wantSHA:     unknown,
			wantPath:    cty.StringVal(existing),
		},
		{
			name:        "path unknown",
			attrs:       map[string]cty.Value{"path": unknown, "content": cty.StringVal("hello")},
			wantAction:  modules.Update,
			wantSubject: knownAfterApply,
			wantFields:  []string{"sha256", "size"},
			wantSHA:     cty.StringVal(helloSHA), // known from content alone
			wantPath:    unknown,
		},
		{
			name:        "state unknown",
			attrs:       map[string]cty.Value{"path": cty.StringVal(existing), "content": cty.StringVal("hello"), "state": unknown},
			wantAction:  modules.Update,
			wantSubject: existing,
			wantFields:  []string{"sha256", "size"},
			wantSHA:     unknown,
			wantPath:    cty.StringVal(existing),
		},
		{
			name:        "mode unknown, content in sync",
			attrs:       map[string]cty.Value{"path": cty.StringVal(existing), "content": cty.StringVal("hello"), "mode": unknown},
			wantAction:  modules.Update,
			wantSubject: existing,
			wantFields:  []string{"mode"},
			wantSHA:     cty.StringVal(helloSHA),
			wantPath:    cty.StringVal(existing),
		},
		{
			name:        "everything unknown",
			attrs:       map[string]cty.Value{"path": unknown, "content": unknown, "mode": unknown, "state": unknown},
			wantAction:  modules.Update,
			wantSubject: knownAfterApply,
			wantFields:  []string{"sha256", "size", "mode"},
			wantSHA:     unknown,
			wantPath:    unknown,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, File{}, tt.attrs)
			resp := plan(t, File{}, cfg)
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			require.NotNil(t, resp.Change)
			assert.Equal(t, tt.wantAction, resp.Change.Action)
			assert.Equal(t, tt.wantSubject, resp.Change.Subject)
			assert.Equal(t, tt.wantFields, fieldNames(resp.Change))
			assert.Equal(t, tt.wantSHA, resp.Result.GetAttr("sha256"))
			assert.Equal(t, tt.wantPath, resp.Result.GetAttr("path"))
		})
	}
	// Nothing may have been written while planning.
	_, err := os.Stat(missing)
	assert.True(t, os.IsNotExist(err))
}

func TestFileValidate(t *testing.T) {
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSummary string // "" for valid
		wantAttr    string
	}{
		{name: "posix", attrs: map[string]cty.Value{"path": cty.StringVal("/etc/x"), "content": cty.StringVal("")}},
		{name: "drive backslash", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "content": cty.StringVal("")}},
		{name: "drive slash", attrs: map[string]cty.Value{"path": cty.StringVal("c:/k/x"), "content": cty.StringVal("")}},
		{name: "unc", attrs: map[string]cty.Value{"path": cty.StringVal(`\\srv\share\x`), "content": cty.StringVal("")}},
		{name: "unknown path", attrs: map[string]cty.Value{"path": cty.UnknownVal(cty.String), "content": cty.StringVal("")}},
		{name: "absent needs no content", attrs: map[string]cty.Value{"path": cty.StringVal("/x"), "state": cty.StringVal("absent")}},
		{name: "unknown state needs no content yet", attrs: map[string]cty.Value{"path": cty.StringVal("/x"), "state": cty.UnknownVal(cty.String)}},
		{name: "relative", attrs: map[string]cty.Value{"path": cty.StringVal("etc/x"), "content": cty.StringVal("")}, wantSummary: "Relative path", wantAttr: "path"},
		{name: "dot relative", attrs: map[string]cty.Value{"path": cty.StringVal("./x"), "content": cty.StringVal("")}, wantSummary: "Relative path", wantAttr: "path"},
		{name: "drive relative", attrs: map[string]cty.Value{"path": cty.StringVal("C:x"), "content": cty.StringVal("")}, wantSummary: "Relative path", wantAttr: "path"},
		{name: "empty path", attrs: map[string]cty.Value{"path": cty.StringVal(""), "content": cty.StringVal("")}, wantSummary: "Empty path", wantAttr: "path"},
		{name: "missing content", attrs: map[string]cty.Value{"path": cty.StringVal("/x")}, wantSummary: "Missing content", wantAttr: "content"},
		{name: "bad state", attrs: map[string]cty.Value{"path": cty.StringVal("/x"), "content": cty.StringVal(""), "state": cty.StringVal("gone")}, wantSummary: "Invalid state", wantAttr: "state"},
		{name: "mode not octal", attrs: map[string]cty.Value{"path": cty.StringVal("/x"), "content": cty.StringVal(""), "mode": cty.StringVal("0948")}, wantSummary: "Invalid mode", wantAttr: "mode"},
		{name: "mode too short", attrs: map[string]cty.Value{"path": cty.StringVal("/x"), "content": cty.StringVal(""), "mode": cty.StringVal("64")}, wantSummary: "Invalid mode", wantAttr: "mode"},
		{name: "mode setuid", attrs: map[string]cty.Value{"path": cty.StringVal("/x"), "content": cty.StringVal(""), "mode": cty.StringVal("4755")}, wantSummary: "Invalid mode", wantAttr: "mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, File{}, tt.attrs)
			diags := File{}.Validate(modules.ValidateRequest{Config: cfg})
			if tt.wantSummary == "" {
				assert.False(t, diags.HasErrors(), "%v", diags)
				return
			}
			requireDiag(t, diags, cfg, tt.wantSummary, tt.wantAttr)
			// Plan repeats the check rather than acting on a bad config.
			resp := plan(t, File{}, cfg)
			assert.Nil(t, resp.Change)
			requireDiag(t, resp.Diagnostics, cfg, tt.wantSummary, tt.wantAttr)
		})
	}
}

func TestFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSummary string
	}{
		{name: "directory in the way", attrs: map[string]cty.Value{"path": cty.StringVal(dir), "content": cty.StringVal("x")}, wantSummary: "Path is a directory"},
		{name: "absent on a directory", attrs: map[string]cty.Value{"path": cty.StringVal(dir), "state": cty.StringVal("absent")}, wantSummary: "Path is a directory"},
		{name: "windows path on linux", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "content": cty.StringVal("x")}, wantSummary: "Windows path on a non-Windows host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "windows path on linux" {
				skipOnWindows(t)
			}
			cfg := cfgFor(t, File{}, tt.attrs)
			resp := plan(t, File{}, cfg)
			assert.Nil(t, resp.Change)
			requireDiag(t, resp.Diagnostics, cfg, tt.wantSummary, "path")
			ar := apply(t, File{}, cfg, &modules.Change{Action: modules.Update})
			requireDiag(t, ar.Diagnostics, cfg, tt.wantSummary, "path")
		})
	}
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.True(t, fi.IsDir(), "the directory survived")
}

func TestFileApplyUnknown(t *testing.T) {
	cfg := cfgFor(t, File{}, map[string]cty.Value{"path": cty.StringVal("/x"), "content": cty.UnknownVal(cty.String)})
	ar := apply(t, File{}, cfg, &modules.Change{Action: modules.Update})
	requireDiag(t, ar.Diagnostics, cfg, "Value unknown at apply", "content")
}

func TestFileModeIgnoredOnWindowsWarning(t *testing.T) {
	d := modeIgnored(cfgFor(t, File{}, map[string]cty.Value{"path": cty.StringVal("/x"), "mode": cty.StringVal("0644")}))
	assert.Equal(t, hcl.DiagWarning, d.Severity)
}
