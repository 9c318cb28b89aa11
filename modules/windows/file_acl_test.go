package windows

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// TestFileAdministratorsACL: a file holding a credential is readable by
// SYSTEM and Administrators only, from its first write, after every
// rewrite (the new file would inherit Users' read), and when someone
// loosened it; a re-run changes nothing.
func TestFileAdministratorsACL(t *testing.T) {
	const path = `C:\k\bootstrap-kubeconfig`
	admins := host.AdminsOnlyACL()
	tests := []struct {
		name       string
		setup      func(t *testing.T, h host.Host)
		content    string
		wantAction modules.Action
		wantFields []string
		wantOldACL string // substring of the acl field's Old; "" for null
	}{
		{name: "created restricted", content: "token-1",
			wantAction: modules.Create, wantFields: []string{"sha256", "size", "acl"}},
		{name: "rewritten restricted", content: "token-2",
			setup: func(t *testing.T, h host.Host) {
				writeFile(t, h, path, "token-1")
				require.NoError(t, h.SetFileACL(ctx, path, admins))
			},
			wantAction: modules.Update, wantFields: []string{"sha256", "acl"}, wantOldACL: "replaced by the write"},
		{name: "inherited ACL tightened, content kept", content: "token-1",
			setup:      func(t *testing.T, h host.Host) { writeFile(t, h, path, "token-1") },
			wantAction: modules.Update, wantFields: []string{"acl"}, wantOldACL: "allow Users read (inherited)"},
		{name: "loosened ACL tightened", content: "token-1",
			setup: func(t *testing.T, h host.Host) {
				writeFile(t, h, path, "token-1")
				require.NoError(t, h.SetFileACL(ctx, path, host.ACL{Protected: true, Entries: []host.ACE{
					{SID: host.SIDSystem, Mask: host.FileFullControl}, {SID: host.SIDAuthenticatedUsers, Mask: host.FileReadExecute}}}))
			},
			wantAction: modules.Update, wantFields: []string{"acl"}, wantOldACL: "allow Authenticated Users read"},
		{name: "in sync", content: "token-1",
			setup: func(t *testing.T, h host.Host) {
				writeFile(t, h, path, "token-1")
				require.NoError(t, h.SetFileACL(ctx, path, admins))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			cfg := cfgFor(t, File{}, map[string]cty.Value{
				"path": cty.StringVal(path), "content": cty.StringVal(tt.content), "acl": cty.StringVal("administrators")})
			pr, _ := converge(t, File{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
			if tt.wantFields != nil {
				f := field(t, pr.Change, "acl")
				assert.Equal(t, admins.String(), f.New.AsString())
				if tt.wantOldACL == "" {
					assert.True(t, f.Old.IsNull())
				} else {
					assert.Contains(t, f.Old.AsString(), tt.wantOldACL)
				}
			}
			assert.Equal(t, tt.content, readFile(t, h, path))
			acl, err := h.FileACL(ctx, path)
			require.NoError(t, err)
			assert.True(t, acl.Satisfies(admins), "SYSTEM and Administrators only, got %s", acl)
			for _, e := range acl.Entries {
				assert.Contains(t, []string{host.SIDSystem, host.SIDAdministrators}, e.SID, "no one else may read it: %s", acl)
			}
		})
	}

	t.Run("absent removes, whatever the acl", func(t *testing.T) {
		h := newHost(t)
		writeFile(t, h, path, "token-1")
		require.NoError(t, h.SetFileACL(ctx, path, admins))
		cfg := cfgFor(t, File{}, map[string]cty.Value{"path": cty.StringVal(path), "state": cty.StringVal("absent"), "acl": cty.StringVal("administrators")})
		pr, _ := converge(t, File{}, h, cfg)
		assert.Equal(t, modules.Delete, action(pr.Change))
		fi, err := h.Stat(ctx, path)
		require.NoError(t, err)
		assert.False(t, fi.Exists)
	})

	t.Run("inherit leaves the ACL alone", func(t *testing.T) {
		h := newHost(t)
		cfg := cfgFor(t, File{}, map[string]cty.Value{"path": cty.StringVal(path), "content": cty.StringVal("x")})
		pr, _ := converge(t, File{}, h, cfg)
		assert.Equal(t, []string{"sha256", "size"}, fieldNames(pr.Change))
		acl, err := h.FileACL(ctx, path)
		require.NoError(t, err)
		assert.False(t, acl.Protected)
	})
}

func TestFileACLValidate(t *testing.T) {
	cfg := cfgFor(t, File{}, map[string]cty.Value{"path": cty.StringVal(`C:\k\x`), "content": cty.StringVal("x"), "acl": cty.StringVal("users")})
	diags := File{}.Validate(modules.ValidateRequest{Config: cfg})
	require.True(t, diags.HasErrors())
	assert.True(t, strings.Contains(diags.Error(), "administrators"), diags.Error())
}

func TestStat(t *testing.T) {
	h := newHost(t)
	writeFile(t, h, `C:\k\kubeconfig`, "abc")
	require.NoError(t, h.MkdirAll(ctx, `C:\k\dir`, 0o755))
	tests := []struct {
		path        string
		exists, dir bool
		size        cty.Value
	}{
		{`C:\k\kubeconfig`, true, false, cty.NumberIntVal(3)},
		{`C:\k\dir`, true, true, cty.NullVal(cty.Number)},
		{`C:\k\missing`, false, false, cty.NullVal(cty.Number)},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			cfg := cfgFor(t, Stat{}, map[string]cty.Value{"path": cty.StringVal(tt.path)})
			pr, ar := converge(t, Stat{}, h, cfg)
			assert.Nil(t, pr.Change, "never a change")
			assert.Equal(t, cty.BoolVal(tt.exists), pr.Result.GetAttr("exists"))
			assert.Equal(t, cty.BoolVal(tt.dir), pr.Result.GetAttr("is_dir"))
			assert.True(t, tt.size.RawEquals(pr.Result.GetAttr("size")), "size %#v", pr.Result.GetAttr("size"))
			assert.True(t, ar.Result == cty.NilVal, "converge applies nothing")
			res := apply(t, Stat{}, h, cfg, nil)
			require.False(t, res.Diagnostics.HasErrors(), "%v", res.Diagnostics)
			assert.Equal(t, pr.Result, res.Result, "apply reads the same")
		})
	}
	runValidate(t, Stat{}, []validateCase{
		{name: "absolute", attrs: map[string]cty.Value{"path": cty.StringVal(`C:\k\kubeconfig`)}},
		{name: "relative", attrs: map[string]cty.Value{"path": cty.StringVal(`k\kubeconfig`)}, wantSummary: "Invalid Windows path", wantAttr: "path"},
	})
}
