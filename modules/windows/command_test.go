package windows

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
)

// The simulated host runs Linux commands as they are, so sh stands in for
// the node's programs; the guards are Windows paths on the simulated disk.
func TestCommand(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(t *testing.T, h host.Host)
		attrs      map[string]cty.Value
		wantSkip   bool
		wantStdout string
	}{
		{name: "runs", attrs: map[string]cty.Value{"argv": strs("sh", "-c", "echo joined")}, wantStdout: "joined\n"},
		{
			name:  "creates exists: skipped",
			setup: func(t *testing.T, h host.Host) { writeFile(t, h, `C:\k\kubelet.conf`, "x") },
			attrs: map[string]cty.Value{"argv": strs("sh", "-c", "exit 1"), "creates": cty.StringVal(`c:/K/kubelet.conf`)}, wantSkip: true,
		},
		{
			name:  "creates missing: runs",
			attrs: map[string]cty.Value{"argv": strs("sh", "-c", "echo ran"), "creates": cty.StringVal(`C:\k\kubelet.conf`)}, wantStdout: "ran\n",
		},
		{
			name:  "removes missing: skipped",
			attrs: map[string]cty.Value{"argv": strs("sh", "-c", "exit 1"), "removes": cty.StringVal(`C:\k\old.conf`)}, wantSkip: true,
		},
		{
			name:  "chdir is a Windows path",
			setup: func(t *testing.T, h host.Host) { writeFile(t, h, `C:\k\marker`, "here") },
			attrs: map[string]cty.Value{"argv": strs("cat", "marker"), "chdir": cty.StringVal(`C:\k`)}, wantStdout: "here",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.setup != nil {
				tt.setup(t, h)
			}
			cfg := cfgFor(t, Command{}, tt.attrs)
			pr := plan(t, Command{}, h, cfg)
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			if tt.wantSkip {
				assert.Nil(t, pr.Change)
				assert.Equal(t, cty.True, pr.Result.GetAttr("skipped"))
				return
			}
			require.NotNil(t, pr.Change)
			assert.Equal(t, modules.Run, pr.Change.Action)
			ar := apply(t, Command{}, h, cfg, pr.Change)
			require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			assert.Equal(t, cty.NumberIntVal(0), ar.Result.GetAttr("rc"))
			assert.Equal(t, cty.StringVal(tt.wantStdout), ar.Result.GetAttr("stdout"))
			assert.Equal(t, cty.False, ar.Result.GetAttr("skipped"))
		})
	}
}

// A guarded command converges: once it has created its file, the next
// plan skips it.
func TestCommandGuardConverges(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.MkdirAll(ctx, `C:\k`, 0o755))
	local, err := h.LocalPath(`C:\k\done`)
	require.NoError(t, err)
	cfg := cfgFor(t, Command{}, map[string]cty.Value{"argv": strs("touch", local), "creates": cty.StringVal(`C:\k\done`)})
	pr, ar := converge(t, Command{}, h, cfg)
	require.NotNil(t, pr.Change)
	assert.Equal(t, cty.NumberIntVal(0), ar.Result.GetAttr("rc"))
}

func TestCommandFails(t *testing.T) {
	h := newHost(t)
	cfg := cfgFor(t, Command{}, map[string]cty.Value{"argv": strs("sh", "-c", "echo broken >&2; exit 3")})
	ar := apply(t, Command{}, h, cfg, &modules.Change{Action: modules.Run})
	d := requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Command failed", "argv")
	assert.Contains(t, d.Detail, "broken")
	assert.Equal(t, cty.NumberIntVal(3), ar.Result.GetAttr("rc"))
}

func TestCommandUnknown(t *testing.T) {
	h := newHost(t)
	cfg := cfgFor(t, Command{}, map[string]cty.Value{"argv": strs("sh", "-c", "true"), "creates": unknownStr})
	pr := plan(t, Command{}, h, cfg)
	require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
	require.NotNil(t, pr.Change)
	assert.Equal(t, cty.UnknownVal(cty.Bool), pr.Result.GetAttr("skipped"))
}

func TestCommandNotWindows(t *testing.T) {
	f := &fakeHost{Host: newHost(t), facts: &host.Facts{OS: "linux"}}
	cfg := cfgFor(t, Command{}, map[string]cty.Value{"argv": strs("true"), "creates": cty.StringVal(`C:\k\x`)})
	pr := plan(t, Command{}, f, cfg)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "Not a Windows host", "argv")
	ar := apply(t, Command{}, f, cfg, &modules.Change{Action: modules.Run})
	requireDiag(t, ar.Diagnostics, cfg, hcl.DiagError, "Not a Windows host", "argv")
}

func TestCommandSchemaFollowsGeneric(t *testing.T) {
	names := func(s modules.Schema) (out []string) {
		for _, a := range s.Attributes {
			out = append(out, a.Name)
		}
		return out
	}
	assert.Equal(t, names(generic.Command{}.Schema()), names(Command{}.Schema()))
	assert.Equal(t, generic.Command{}.Schema().ResultType(), Command{}.Schema().ResultType())
	assert.Equal(t, "command", generic.Command{}.Schema().Name, "the generic schema is not modified")
}

func TestCommandValidate(t *testing.T) {
	argv := strs("kubeadm.exe", "join")
	runValidate(t, Command{}, []validateCase{
		{name: "ok", attrs: map[string]cty.Value{"argv": argv, "creates": cty.StringVal(`C:\k\kubelet.conf`), "chdir": cty.StringVal("C:/k")}},
		{name: "posix creates", attrs: map[string]cty.Value{"argv": argv, "creates": cty.StringVal("/etc/kubernetes/kubelet.conf")}, wantSummary: "Invalid Windows path", wantAttr: "creates"},
		{name: "relative removes", attrs: map[string]cty.Value{"argv": argv, "removes": cty.StringVal("old.conf")}, wantSummary: "Invalid Windows path", wantAttr: "removes"},
		{name: "relative chdir", attrs: map[string]cty.Value{"argv": argv, "chdir": cty.StringVal("k")}, wantSummary: "Invalid Windows path", wantAttr: "chdir"},
		{name: "empty argv", attrs: map[string]cty.Value{"argv": cty.ListValEmpty(cty.String)}, wantSummary: "Empty argv", wantAttr: "argv"},
		{name: "negative timeout", attrs: map[string]cty.Value{"argv": argv, "timeout": cty.NumberIntVal(-1)}, wantSummary: "Invalid timeout", wantAttr: "timeout"},
		{name: "bad exit code", attrs: map[string]cty.Value{"argv": argv, "expected_exit_codes": cty.ListVal([]cty.Value{cty.NumberFloatVal(0.5)})}, wantSummary: "Invalid exit code", wantAttr: "expected_exit_codes"},
	})
	// A bad path is reported once, not by both layers.
	cfg := cfgFor(t, Command{}, map[string]cty.Value{"argv": argv, "creates": cty.StringVal("done")})
	assert.Len(t, Command{}.Validate(modules.ValidateRequest{Config: cfg}), 1)
}
