package windows

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
	"github.com/wsu-project/wsu/modules/moduletest"
)

// TestSchemas holds every module to the documentation contract, and checks
// that each Example is a parseable task using only the module's arguments.
func TestSchemas(t *testing.T) {
	reg := modules.NewRegistry(Modules(nil)...) // panics on a duplicate name
	moduletest.RequireRegistered(t, ".", "modules/windows/windows.go", Modules(nil))
	for _, name := range reg.Names() {
		assert.True(t, strings.HasPrefix(name, "win_"), "a Windows host module's name starts with win_: %s", name)
	}
	// Side by side with the generic modules, as the stock registry has them.
	modules.NewRegistry(append(Modules(nil), generic.Modules()...)...)

	for _, m := range Modules(nil) {
		s := m.Schema()
		t.Run(s.Name, func(t *testing.T) {
			assert.NotEmpty(t, s.Summary)
			assert.NotEmpty(t, s.Description)
			assert.Equal(t, modules.TargetHost, s.Target)
			_, ok := m.(modules.Validator)
			assert.True(t, ok, "has Validate")
			for _, a := range append(append([]modules.Attribute{}, s.Attributes...), s.Results...) {
				assert.NotEmpty(t, a.Description, "description of %s", a.Name)
				if a.Default != cty.NilVal {
					assert.True(t, a.Default.Type().Equals(a.Type), "default of %s has the attribute's type", a.Name)
				}
			}

			f, diags := hclsyntax.ParseConfig([]byte(s.Example), s.Name+".hcl", hcl.InitialPos)
			require.False(t, diags.HasErrors(), "example: %v", diags)
			body := f.Body.(*hclsyntax.Body)
			require.Len(t, body.Blocks, 1)
			task := body.Blocks[0]
			assert.Equal(t, "task", task.Type)
			require.Len(t, task.Labels, 1)
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

func TestCheckWinPath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{`C:\k\kubelet.exe`, true},
		{`c:\k`, true},
		{"C:/k/x", true},
		{`C:\`, true},
		{`\\server\share\x`, true},
		{`//server/share`, true},
		{"", false},
		{"/etc/x", false},
		{`\k\x`, false},
		{"C:", false},
		{"C:x", false},
		{"k\\x", false},
		{"1:/x", false},
		{`\\server`, false},
		{`C:\k\a:b`, false},
		{`C:\k\a?`, false},
		{"C:\\k\\a\x01", false},
		{`C:\k\"x"`, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.ok, checkWinPath(tt.path) == "", "checkWinPath(%q) = %q", tt.path, checkWinPath(tt.path))
	}
}

func TestSamePath(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`C:\k\kubelet.exe`, `c:\K\KUBELET.EXE`, true},
		{`C:\k\kubelet.exe`, `C:/k/kubelet.exe`, true},
		{`C:\k\`, `C:\k`, true},
		{`C:\`, `c:`, true},
		{`C:\k`, `C:\k2`, false},
		{`C:\k\kubelet.exe`, `D:\k\kubelet.exe`, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, samePath(tt.a, tt.b), "samePath(%q, %q)", tt.a, tt.b)
	}
}

func TestParentDirAndRoot(t *testing.T) {
	tests := []struct {
		path, parent string
		root         bool
	}{
		{`C:\k\x`, `C:\k`, false},
		{`C:\k`, `C:\`, false},
		{"C:/k/x", "C:/k", false},
		{`C:\`, `C:\`, true},
		{"c:/", "c:/", true},
		{`\\srv\share`, `\\srv\share`, true},
		{`\\srv\share\x`, `\\srv\share`, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.parent, parentDir(tt.path), "parentDir(%q)", tt.path)
		assert.Equal(t, tt.root, isRoot(tt.path), "isRoot(%q)", tt.path)
	}
	assert.Equal(t, "kube-proxy.exe", baseName(`C:\k\kube-proxy.exe`))
	assert.Equal(t, "kube-proxy.exe", baseName("C:/k/kube-proxy.exe"))
}

func TestCheckServiceName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"kubelet", true},
		{"hybrid-overlay-node", true},
		{"windows_exporter", true},
		{"", false},
		{"  ", false},
		{"a/b", false},
		{`a\b`, false},
		{"a\nb", false},
		{string(make([]byte, 257)), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.ok, checkServiceName(tt.name) == "", "checkServiceName(%q)", tt.name)
	}
	long := make([]rune, 256)
	for i := range long {
		long[i] = 'é' // 256 characters, 512 bytes: the limit counts characters
	}
	assert.Empty(t, checkServiceName(string(long)))
}

func TestResult(t *testing.T) {
	got := result(File{}.Schema().Results, map[string]cty.Value{"path": cty.StringVal(`C:\x`), "size": cty.DynamicVal})
	assert.True(t, got.Type().Equals(File{}.Schema().ResultType()))
	assert.Equal(t, cty.NullVal(cty.String), got.GetAttr("sha256"))
	assert.Equal(t, cty.UnknownVal(cty.Number), got.GetAttr("size"))
}

// Whatever is unknown at plan time, no module panics, and apply reports
// values still unknown instead of acting on them.
func TestEverythingUnknown(t *testing.T) {
	h := newHost(t)
	for _, m := range Modules(nil) {
		s := m.Schema()
		attrs := map[string]cty.Value{}
		for _, a := range s.Attributes {
			attrs[a.Name] = cty.UnknownVal(a.Type)
		}
		configs := map[string]modules.Config{
			"every attribute": {Value: cty.ObjectVal(attrs), Block: blockRange},
			"whole config":    {Value: cty.DynamicVal, Block: blockRange},
		}
		for name, cfg := range configs {
			t.Run(s.Name+"/"+name, func(t *testing.T) {
				m.(modules.Validator).Validate(modules.ValidateRequest{Config: cfg})
				pr := plan(t, m, h, cfg)
				if !pr.Diagnostics.HasErrors() {
					assert.NotNil(t, pr.Change, "an unknown configuration is a change")
				}
				ar := apply(t, m, h, cfg, &modules.Change{Action: modules.Update})
				assert.True(t, ar.Diagnostics.HasErrors(), "apply refuses unknown values")
			})
		}
	}
}
