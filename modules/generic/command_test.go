package generic

import (
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

func strs(ss ...string) cty.Value {
	vals := make([]cty.Value, len(ss))
	for i, s := range ss {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}

func TestCommand(t *testing.T) {
	skipOnWindows(t)
	dir := t.TempDir()
	there := filepath.Join(dir, "there")
	require.NoError(t, os.WriteFile(there, nil, 0o644))
	notThere := filepath.Join(dir, "not-there")

	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSkip    bool
		wantSubject string
		wantRC      int
		wantStdout  string
		wantStderr  string
		wantError   string // summary of an expected apply error
		wantErrAt   string
		wantDetail  []string
	}{
		{
			name:        "runs",
			attrs:       map[string]cty.Value{"argv": strs("echo", "hello", "world")},
			wantSubject: "echo hello world",
			wantStdout:  "hello world\n",
		},
		{
			name:        "stdout and stderr",
			attrs:       map[string]cty.Value{"argv": strs("sh", "-c", "echo out; echo err >&2")},
			wantSubject: "sh -c echo out; echo err >&2",
			wantStdout:  "out\n", wantStderr: "err\n",
		},
		{name: "creates exists skips", attrs: map[string]cty.Value{"argv": strs("false"), "creates": cty.StringVal(there)}, wantSkip: true},
		{name: "creates missing runs", attrs: map[string]cty.Value{"argv": strs("true"), "creates": cty.StringVal(notThere)}, wantSubject: "true"},
		{name: "removes missing skips", attrs: map[string]cty.Value{"argv": strs("false"), "removes": cty.StringVal(notThere)}, wantSkip: true},
		{name: "removes exists runs", attrs: map[string]cty.Value{"argv": strs("true"), "removes": cty.StringVal(there)}, wantSubject: "true"},
		{
			name:        "failure",
			attrs:       map[string]cty.Value{"argv": strs("sh", "-c", "echo boom >&2; exit 3")},
			wantSubject: "sh -c echo boom >&2; exit 3",
			wantRC:      3, wantStderr: "boom\n",
			wantError: "Command failed", wantErrAt: "argv",
			wantDetail: []string{`sh -c "echo boom >&2; exit 3"`, "Exit code: 3 (expected 0)", "boom"},
		},
		{
			name:        "failure without stderr",
			attrs:       map[string]cty.Value{"argv": strs("false")},
			wantSubject: "false",
			wantRC:      1,
			wantError:   "Command failed", wantErrAt: "argv",
			wantDetail: []string{"Exit code: 1", "stderr was empty"},
		},
		{
			name:        "expected exit codes",
			attrs:       map[string]cty.Value{"argv": strs("sh", "-c", "exit 3"), "expected_exit_codes": cty.ListVal([]cty.Value{cty.NumberIntVal(0), cty.NumberIntVal(3)})},
			wantSubject: "sh -c exit 3",
			wantRC:      3,
		},
		{
			name:        "zero no longer expected",
			attrs:       map[string]cty.Value{"argv": strs("true"), "expected_exit_codes": cty.ListVal([]cty.Value{cty.NumberIntVal(2)})},
			wantSubject: "true",
			wantError:   "Command failed", wantErrAt: "argv",
			wantDetail: []string{"Exit code: 0 (expected 2)"},
		},
		{
			name:        "timeout",
			attrs:       map[string]cty.Value{"argv": strs("sleep", "30"), "timeout": cty.NumberFloatVal(0.2)},
			wantSubject: "sleep 30",
			wantRC:      -1,
			wantError:   "Command timed out", wantErrAt: "timeout",
			wantDetail: []string{"sleep 30", "200ms"},
		},
		{
			name:        "stdin env chdir",
			attrs:       map[string]cty.Value{"argv": strs("sh", "-c", `cat; echo " $GREETING $(pwd)"`), "stdin": cty.StringVal("in"), "env": cty.MapVal(map[string]cty.Value{"GREETING": cty.StringVal("hi")}), "chdir": cty.StringVal(dir)},
			wantSubject: `sh -c cat; echo " $GREETING $(pwd)"`,
			wantStdout:  "in hi " + dir + "\n",
		},
		{
			name:        "not found",
			attrs:       map[string]cty.Value{"argv": strs("wsu-no-such-program", "x")},
			wantSubject: "wsu-no-such-program x",
			wantError:   "Command could not be run", wantErrAt: "argv",
			wantDetail: []string{"wsu-no-such-program"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Command{}, tt.attrs)
			resp := plan(t, Command{}, cfg)
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			if tt.wantSkip {
				assert.Nil(t, resp.Change)
				assert.Equal(t, cty.True, resp.Result.GetAttr("skipped"))
				assert.Equal(t, cty.NullVal(cty.Number), resp.Result.GetAttr("rc"))
				assert.True(t, resp.Result.IsWhollyKnown())
				return
			}
			require.NotNil(t, resp.Change)
			assert.Equal(t, modules.Run, resp.Change.Action)
			assert.Equal(t, tt.wantSubject, resp.Change.Subject)
			assert.Equal(t, []string{"argv"}, fieldNames(resp.Change))
			assert.Equal(t, cfg.Get("argv"), field(t, resp.Change, "argv").New)
			assert.Equal(t, cty.False, resp.Result.GetAttr("skipped"))
			assert.False(t, resp.Result.GetAttr("rc").IsKnown(), "rc is known only after apply")

			start := time.Now()
			ar := apply(t, Command{}, cfg, resp.Change)
			assert.Less(t, time.Since(start), 10*time.Second)
			if tt.wantError == "" {
				require.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
			} else {
				d := requireDiag(t, ar.Diagnostics, cfg, tt.wantError, tt.wantErrAt)
				for _, s := range tt.wantDetail {
					assert.Contains(t, d.Detail, s)
				}
			}
			if tt.wantError == "Command could not be run" {
				return
			}
			assert.Equal(t, cty.NumberIntVal(int64(tt.wantRC)), ar.Result.GetAttr("rc"))
			assert.Equal(t, cty.StringVal(tt.wantStdout), ar.Result.GetAttr("stdout"))
			assert.Equal(t, cty.StringVal(tt.wantStderr), ar.Result.GetAttr("stderr"))
			assert.Equal(t, cty.False, ar.Result.GetAttr("skipped"))
		})
	}
}

func TestCommandStderrTail(t *testing.T) {
	skipOnWindows(t)
	// 5000 bytes of noise, then the line that matters.
	cfg := cfgFor(t, Command{}, map[string]cty.Value{"argv": strs("sh", "-c", `head -c 5000 /dev/zero | tr '\0' a >&2; echo FATAL-END >&2; exit 1`)})
	ar := apply(t, Command{}, cfg, &modules.Change{Action: modules.Run})
	d := requireDiag(t, ar.Diagnostics, cfg, "Command failed", "argv")
	assert.Contains(t, d.Detail, "FATAL-END")
	assert.Contains(t, d.Detail, "…")
	assert.NotContains(t, d.Detail, strings.Repeat("a", 2100))
	assert.Equal(t, 5010, len(ar.Result.GetAttr("stderr").AsString()), "the result keeps everything")
}

func TestCommandGuardRecheckedAtApply(t *testing.T) {
	skipOnWindows(t)
	marker := filepath.Join(t.TempDir(), "done")
	cfg := cfgFor(t, Command{}, map[string]cty.Value{"argv": strs("false"), "creates": cty.StringVal(marker)})
	resp := plan(t, Command{}, cfg)
	require.NotNil(t, resp.Change)
	// Something else created the marker between plan and apply.
	require.NoError(t, os.WriteFile(marker, nil, 0o644))
	ar := apply(t, Command{}, cfg, resp.Change)
	assert.False(t, ar.Diagnostics.HasErrors(), "%v", ar.Diagnostics)
	assert.Equal(t, cty.True, ar.Result.GetAttr("skipped"))
}

func TestCommandPlanUnknown(t *testing.T) {
	dir := t.TempDir()
	unknown := cty.UnknownVal(cty.String)
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantChange  bool
		wantSubject string
		wantSkipped cty.Value
	}{
		{name: "argv", attrs: map[string]cty.Value{"argv": cty.UnknownVal(cty.List(cty.String))}, wantChange: true, wantSubject: knownAfterApply, wantSkipped: cty.False},
		{name: "one argument", attrs: map[string]cty.Value{"argv": cty.ListVal([]cty.Value{cty.StringVal("kubeadm"), unknown})}, wantChange: true, wantSubject: "kubeadm " + knownAfterApply, wantSkipped: cty.False},
		{name: "creates", attrs: map[string]cty.Value{"argv": strs("true"), "creates": unknown}, wantChange: true, wantSubject: "true", wantSkipped: cty.UnknownVal(cty.Bool)},
		{name: "creates unknown but removes skips", attrs: map[string]cty.Value{"argv": strs("true"), "creates": unknown, "removes": cty.StringVal(filepath.Join(dir, "nope"))}, wantSkipped: cty.True},
		{name: "everything else", attrs: map[string]cty.Value{"argv": strs("true"), "env": cty.UnknownVal(cty.Map(cty.String)), "stdin": unknown, "chdir": unknown, "timeout": cty.UnknownVal(cty.Number), "expected_exit_codes": cty.UnknownVal(cty.List(cty.Number))}, wantChange: true, wantSubject: "true", wantSkipped: cty.False},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Command{}, tt.attrs)
			resp := plan(t, Command{}, cfg)
			require.False(t, resp.Diagnostics.HasErrors(), "%v", resp.Diagnostics)
			assert.Equal(t, tt.wantChange, resp.Change != nil)
			if resp.Change != nil {
				assert.Equal(t, tt.wantSubject, resp.Change.Subject)
				assert.False(t, resp.Result.GetAttr("stdout").IsKnown())
			}
			assert.Equal(t, tt.wantSkipped, resp.Result.GetAttr("skipped"))
		})
	}
}

func TestCommandValidate(t *testing.T) {
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSummary string
		wantAttr    string
	}{
		{name: "ok", attrs: map[string]cty.Value{"argv": strs("true"), "creates": cty.StringVal(`C:\k\done`), "timeout": cty.NumberIntVal(5)}},
		{name: "windows exit code", attrs: map[string]cty.Value{"argv": strs("x"), "expected_exit_codes": cty.ListVal([]cty.Value{cty.NumberIntVal(3221225477)})}},
		{name: "empty argv", attrs: map[string]cty.Value{"argv": cty.ListValEmpty(cty.String)}, wantSummary: "Empty argv", wantAttr: "argv"},
		{name: "null argv", attrs: map[string]cty.Value{"argv": cty.NullVal(cty.List(cty.String))}, wantSummary: "Empty argv", wantAttr: "argv"},
		{name: "empty program", attrs: map[string]cty.Value{"argv": strs("", "x")}, wantSummary: "Empty program", wantAttr: "argv"},
		{name: "null argument", attrs: map[string]cty.Value{"argv": cty.ListVal([]cty.Value{cty.StringVal("x"), cty.NullVal(cty.String)})}, wantSummary: "Null argument", wantAttr: "argv"},
		{name: "relative creates", attrs: map[string]cty.Value{"argv": strs("x"), "creates": cty.StringVal("done")}, wantSummary: "Relative path", wantAttr: "creates"},
		{name: "relative removes", attrs: map[string]cty.Value{"argv": strs("x"), "removes": cty.StringVal("done")}, wantSummary: "Relative path", wantAttr: "removes"},
		{name: "relative chdir", attrs: map[string]cty.Value{"argv": strs("x"), "chdir": cty.StringVal("tmp")}, wantSummary: "Relative path", wantAttr: "chdir"},
		{name: "negative timeout", attrs: map[string]cty.Value{"argv": strs("x"), "timeout": cty.NumberIntVal(-1)}, wantSummary: "Invalid timeout", wantAttr: "timeout"},
		{name: "fractional exit code", attrs: map[string]cty.Value{"argv": strs("x"), "expected_exit_codes": cty.ListVal([]cty.Value{cty.NumberFloatVal(1.5)})}, wantSummary: "Invalid exit code", wantAttr: "expected_exit_codes"},
		{name: "no exit codes", attrs: map[string]cty.Value{"argv": strs("x"), "expected_exit_codes": cty.ListValEmpty(cty.Number)}, wantSummary: "No expected exit codes", wantAttr: "expected_exit_codes"},
		{name: "bad env name", attrs: map[string]cty.Value{"argv": strs("x"), "env": cty.MapVal(map[string]cty.Value{"A=B": cty.StringVal("c")})}, wantSummary: "Invalid environment variable", wantAttr: "env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, Command{}, tt.attrs)
			diags := Command{}.Validate(modules.ValidateRequest{Config: cfg})
			if tt.wantSummary == "" {
				assert.False(t, diags.HasErrors(), "%v", diags)
				return
			}
			requireDiag(t, diags, cfg, tt.wantSummary, tt.wantAttr)
			resp := plan(t, Command{}, cfg)
			assert.Nil(t, resp.Change)
			requireDiag(t, resp.Diagnostics, cfg, tt.wantSummary, tt.wantAttr)
		})
	}
}

func TestQuoteArgv(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"kubeadm", "join"}, "kubeadm join"},
		{[]string{"sh", "-c", "a b"}, `sh -c "a b"`},
		{[]string{"x", ""}, `x ""`},
		{[]string{`C:\k\kubelet.exe`}, `"C:\\k\\kubelet.exe"`},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, quoteArgv(tt.argv))
	}
}
