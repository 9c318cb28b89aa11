package windows

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

const helloSHA = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" // sha256("hello")

func TestFile(t *testing.T) {
	const path = `C:\k\etc\kubelet.conf` // parents missing on a fresh host
	tests := []struct {
		name       string
		existing   *string
		attrs      map[string]cty.Value
		wantAction modules.Action
		wantFields []string
		check      func(t *testing.T, c *modules.Change)
		wantFile   *string // afterwards; nil: absent
	}{
		{
			name:       "create",
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello")},
			wantAction: modules.Create,
			wantFields: []string{"sha256", "size"},
			check: func(t *testing.T, c *modules.Change) {
				assert.Equal(t, cty.NullVal(cty.String), field(t, c, "sha256").Old)
				assert.Equal(t, cty.StringVal(helloSHA), field(t, c, "sha256").New)
				assert.Equal(t, cty.NumberIntVal(5), field(t, c, "size").New)
			},
			wantFile: ptr("hello"),
		},
		{
			name:     "in sync",
			existing: ptr("hello"),
			attrs:    map[string]cty.Value{"content": cty.StringVal("hello")},
			wantFile: ptr("hello"),
		},
		{
			name:       "content differs",
			existing:   ptr("old content"),
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello")},
			wantAction: modules.Update,
			wantFields: []string{"sha256", "size"},
			check: func(t *testing.T, c *modules.Change) {
				assert.Equal(t, cty.NumberIntVal(11), field(t, c, "size").Old)
				assert.Equal(t, cty.NumberIntVal(5), field(t, c, "size").New)
			},
			wantFile: ptr("hello"),
		},
		{
			name:       "same length, new content: only the hash is listed",
			existing:   ptr("jello"),
			attrs:      map[string]cty.Value{"content": cty.StringVal("hello")},
			wantAction: modules.Update,
			wantFields: []string{"sha256"},
			wantFile:   ptr("hello"),
		},
		{
			name:       "emptied",
			existing:   ptr("old"),
			attrs:      map[string]cty.Value{"content": cty.StringVal("")},
			wantAction: modules.Update,
			wantFields: []string{"sha256", "size"},
			wantFile:   ptr(""),
		},
		{
			name:       "absent removes",
			existing:   ptr("hello"),
			attrs:      map[string]cty.Value{"state": cty.StringVal("absent")},
			wantAction: modules.Delete,
			wantFields: []string{"sha256", "size"},
			check: func(t *testing.T, c *modules.Change) {
				assert.Equal(t, cty.StringVal(helloSHA), field(t, c, "sha256").Old)
				assert.Equal(t, cty.NullVal(cty.String), field(t, c, "sha256").New)
			},
		},
		{name: "absent already", attrs: map[string]cty.Value{"state": cty.StringVal("absent")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.existing != nil {
				writeFile(t, h, path, *tt.existing)
			}
			attrs := map[string]cty.Value{"path": cty.StringVal(path)}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, File{}, attrs)
			pr, ar := converge(t, File{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
			assert.True(t, pr.Result.IsWhollyKnown())
			if tt.check != nil {
				tt.check(t, pr.Change)
			}
			if pr.Change != nil {
				assert.Equal(t, path, pr.Change.Subject)
				assert.Equal(t, pr.Result, ar.Result, "apply result matches plan")
			}
			fi, err := h.Stat(ctx, path)
			require.NoError(t, err)
			if tt.wantFile == nil {
				assert.False(t, fi.Exists)
				return
			}
			assert.Equal(t, *tt.wantFile, readFile(t, h, path))
		})
	}
}

func ptr(s string) *string { return &s }

func TestFileUnknown(t *testing.T) {
	h := newHost(t)
	writeFile(t, h, `C:\k\existing`, "hello")
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantAction  modules.Action
		wantSubject string
		wantSHA     cty.Value
	}{
		{"content, file missing", map[string]cty.Value{"path": cty.StringVal(`C:\k\missing`), "content": unknownStr}, modules.Create, `C:\k\missing`, unknownStr},
		{"content, file exists", map[string]cty.Value{"path": cty.StringVal(`C:\k\existing`), "content": unknownStr}, modules.Update, `C:\k\existing`, unknownStr},
		{"path", map[string]cty.Value{"path": unknownStr, "content": cty.StringVal("hello")}, modules.Update, knownAfterApply, cty.StringVal(helloSHA)},
		{"state", map[string]cty.Value{"path": cty.StringVal(`C:\k\existing`), "content": cty.StringVal("hello"), "state": unknownStr}, modules.Update, `C:\k\existing`, unknownStr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, File{}, tt.attrs)
			pr := plan(t, File{}, h, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, tt.wantAction, pr.Change.Action)
			assert.Equal(t, tt.wantSubject, pr.Change.Subject)
			assert.Equal(t, []string{"sha256", "size"}, fieldNames(pr.Change))
			assert.Equal(t, tt.wantSHA, pr.Result.GetAttr("sha256"))
		})
	}
	fi, err := h.Stat(ctx, `C:\k\missing`)
	require.NoError(t, err)
	assert.False(t, fi.Exists, "planning wrote nothing")
}

func TestFileErrors(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.MkdirAll(ctx, `C:\k\dir`, 0o755))
	cfg := cfgFor(t, File{}, map[string]cty.Value{"path": cty.StringVal(`C:\k\dir`), "content": cty.StringVal("x")})
	pr := plan(t, File{}, h, cfg)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Path is a directory", "path")
	ar := apply(t, File{}, h, cfg, &modules.Change{Action: modules.Update})
	requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Path is a directory", "path")

	// Unknown at apply is an engine bug, reported rather than a panic.
	cfg = cfgFor(t, File{}, map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "content": unknownStr})
	ar = apply(t, File{}, h, cfg, &modules.Change{Action: modules.Update})
	requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Value unknown at apply", "content")
}

func TestFileNotWindows(t *testing.T) {
	f := &fakeHost{Host: newHost(t), facts: &host.Facts{OS: "linux"}}
	cfg := cfgFor(t, File{}, map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "content": cty.StringVal("x")})
	pr := plan(t, File{}, f, cfg)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Not a Windows host", "path")
}

func TestFileValidate(t *testing.T) {
	runValidate(t, File{}, []validateCase{
		{name: "ok", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "content": cty.StringVal("")}},
		{name: "absent needs no content", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "state": cty.StringVal("absent")}},
		{name: "unknown state needs no content yet", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "state": unknownStr}},
		{name: "posix path", attrs: map[string]cty.Value{"path": cty.StringVal("/etc/x"), "content": cty.StringVal("")}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "relative path", attrs: map[string]cty.Value{"path": cty.StringVal("x.conf"), "content": cty.StringVal("")}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "missing content", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k\x`)}, wantSummary: "Missing content", wantAttr: "content"},
		{name: "bad state", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "content": cty.StringVal(""), "state": cty.StringVal("file")}, wantSummary: "Invalid state", wantAttr: "state"},
	})
}
