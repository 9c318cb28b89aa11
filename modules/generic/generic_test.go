package generic

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"io/fs"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/moduletest"
)

// TestSchemas holds every module to the documentation contract, and checks
// that each Example is a parseable task using only the module's arguments.
func TestSchemas(t *testing.T) {
	reg := modules.NewRegistry(Modules()...) // panics on a duplicate name
	assert.NotEmpty(t, reg.Names())
	moduletest.RequireRegistered(t, ".", "modules/generic/generic.go", Modules())

	for _, m := range Modules() {
		s := m.Schema()
		t.Run(s.Name, func(t *testing.T) {
			assert.NotEmpty(t, s.Summary)
			assert.NotEmpty(t, s.Description)
			assert.True(t, s.Target == modules.TargetHost || s.Target == modules.TargetController, "target")
			for _, a := range append(append([]modules.Attribute{}, s.Attributes...), s.Results...) {
				assert.NotEmpty(t, a.Description, "description of %s", a.Name)
				if a.Default != cty.NilVal {
					assert.True(t, a.Default.Type().Equals(a.Type), "default of %s has the attribute's type", a.Name)
				}
			}
			if s.Show != "" {
				assert.True(t, s.ResultType().HasAttribute(s.Show), "Show names a result")
			}

			f, diags := hclsyntax.ParseConfig([]byte(s.Example), s.Name+".hcl", hcl.InitialPos)
			require.False(t, diags.HasErrors(), "example: %v", diags)
			body := f.Body.(*hclsyntax.Body)
			require.Len(t, body.Blocks, 1)
			task := body.Blocks[0]
			assert.Equal(t, "task", task.Type)
			require.Len(t, task.Labels, 1)
			assert.True(t, hclsyntax.ValidIdentifier(task.Labels[0]), "task name %q", task.Labels[0])
			require.Len(t, task.Body.Blocks, 1)
			mod := task.Body.Blocks[0]
			assert.Equal(t, s.Name, mod.Type)
			for name := range mod.Body.Attributes {
				assert.NotNil(t, s.Attribute(name), "example argument %s", name)
			}
			for _, a := range s.Attributes {
				if a.Required {
					_, ok := mod.Body.Attributes[a.Name]
					assert.True(t, ok, "example sets required %s", a.Name)
				}
			}
		})
	}
}

func TestIsAbsPath(t *testing.T) {
	tests := []struct {
		path     string
		abs, win bool
	}{
		{"/", true, false},
		{"/etc/x", true, false},
		{`C:\`, true, true},
		{`c:\k\x`, true, true},
		{"D:/k/x", true, true},
		{`\\server\share\x`, true, true},
		{"C:", false, false},
		{"C:x", false, false},
		{"1:/x", false, false},
		{"x", false, false},
		{"./x", false, false},
		{`k\x`, false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.abs, isAbsPath(tt.path), "isAbsPath(%q)", tt.path)
		assert.Equal(t, tt.win, isWindowsPath(tt.path), "isWindowsPath(%q)", tt.path)
	}
}

func TestParentDir(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/a/b/c", "/a/b"},
		{"/a/b/", "/a"},
		{"/a", "/"},
		{"/", "/"},
		{`C:\k\x`, `C:\k`},
		{`C:\k`, `C:\`},
		{"C:/k", "C:/"},
		{`C:\`, `C:\`},
		{`\\srv\share\x`, `\\srv\share`},
		{"x", "."},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, parentDir(tt.path), "parentDir(%q)", tt.path)
	}
}

func TestIsRoot(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"/", true}, {"//", true}, {`C:\`, true}, {"c:/", true}, {"C:", true},
		{"/a", false}, {`C:\k`, false}, {"x:", true}, {"1:", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, isRoot(tt.path), "isRoot(%q)", tt.path)
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		want    fs.FileMode
		wantErr bool
	}{
		{in: "0644", want: 0o644},
		{in: "644", want: 0o644},
		{in: "0777", want: 0o777},
		{in: "0000", want: 0},
		{in: "64", wantErr: true},
		{in: "00644", wantErr: true},
		{in: "0o64", wantErr: true},
		{in: "0948", wantErr: true},
		{in: "1777", wantErr: true},
		{in: "-644", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseMode(tt.in)
		if tt.wantErr {
			assert.Error(t, err, "parseMode(%q)", tt.in)
			continue
		}
		assert.NoError(t, err, "parseMode(%q)", tt.in)
		assert.Equal(t, tt.want, got)
		assert.Equal(t, tt.in, formatMode(got)[4-len(tt.in):], "round trip")
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdef", 3, "…def"},
		{"aé", 1, "…"}, // never half a rune
		{"éé", 3, "…é"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tail(tt.in, tt.n), "tail(%q, %d)", tt.in, tt.n)
	}
}

func TestResult(t *testing.T) {
	got := result(fileResults, map[string]cty.Value{"path": cty.StringVal("/x"), "size": cty.DynamicVal})
	assert.True(t, got.Type().Equals(File{}.Schema().ResultType()))
	assert.Equal(t, cty.StringVal("/x"), got.GetAttr("path"))
	assert.Equal(t, cty.NullVal(cty.String), got.GetAttr("sha256"))
	assert.Equal(t, cty.UnknownVal(cty.Number), got.GetAttr("size"))
}
