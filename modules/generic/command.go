package generic

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Command runs a program, made idempotent by its creates/removes guards.
type Command struct{}

var (
	_ modules.Module    = Command{}
	_ modules.Validator = Command{}
)

// stderrTail is how much of stderr a failure shows: the end is where the
// error usually is.
const stderrTail = 2 << 10

var commandResults = []modules.Attribute{
	{Name: "rc", Type: cty.Number, Description: "Exit code; null when skipped, -1 when killed."},
	{Name: "stdout", Type: cty.String, Description: "Standard output (first 1 MiB); null when skipped."},
	{Name: "stderr", Type: cty.String, Description: "Standard error (first 1 MiB); null when skipped."},
	{Name: "skipped", Type: cty.Bool, Description: "True when a creates/removes guard kept the command from running."},
}

func (Command) Schema() modules.Schema {
	return modules.Schema{
		Name:    "command",
		Summary: "Run a program, unless a creates/removes guard says it already ran.",
		Description: "Runs `argv[0]` with the remaining elements as its arguments — never through a " +
			"shell, so nothing needs quoting; use `[\"powershell.exe\", \"-Command\", ...]` or " +
			"`[\"sh\", \"-c\", ...]` for shell features. A command always reports a change, so " +
			"guard it with `creates` or `removes` to make it idempotent. An exit code outside " +
			"`expected_exit_codes` fails the task.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "argv", Type: cty.List(cty.String), Required: true,
				Description: "Program and arguments; at least one element."},
			{Name: "creates", Type: cty.String,
				Description: "Absolute path; the command is skipped when it exists."},
			{Name: "removes", Type: cty.String,
				Description: "Absolute path; the command is skipped when it does not exist."},
			{Name: "chdir", Type: cty.String,
				Description: "Absolute working directory for the command."},
			{Name: "env", Type: cty.Map(cty.String),
				Description: "Environment variables added to the host's environment."},
			{Name: "stdin", Type: cty.String,
				Description: "Text fed to the command's standard input."},
			{Name: "timeout", Type: cty.Number, Default: cty.NumberIntVal(0),
				Description: "Seconds before the command is killed and the task fails; 0 means no limit."},
			{Name: "expected_exit_codes", Type: cty.List(cty.Number), Default: cty.ListVal([]cty.Value{cty.NumberIntVal(0)}),
				Description: "Exit codes that count as success."},
		},
		Results: commandResults,
		Example: `task "join" {
  command {
    argv    = ["C:\\k\\kubeadm.exe", "join", "--config", "C:\\k\\join.yaml"]
    creates = "C:\\k\\kubelet.conf"
    timeout = 600
  }
}`,
	}
}

func (Command) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	if argv := get(cfg, "argv"); argv.IsKnown() {
		if argv.IsNull() || argv.LengthInt() == 0 {
			diags = append(diags, cfg.Error("argv", "Empty argv", "argv needs at least the program to run."))
		} else {
			for i, el := range argv.AsValueSlice() {
				if isNull(el) {
					diags = append(diags, cfg.Error("argv", "Null argument", fmt.Sprintf("argv[%d] is null.", i)))
				} else if s, ok := str(el); ok && i == 0 && s == "" {
					diags = append(diags, cfg.Error("argv", "Empty program", "argv[0] must name the program to run."))
				}
			}
		}
	}
	for _, p := range []string{"creates", "removes", "chdir"} {
		diags = append(diags, validatePath(cfg, p)...)
	}
	if env := get(cfg, "env"); env.IsKnown() && !env.IsNull() {
		for k, v := range env.AsValueMap() {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				diags = append(diags, cfg.Error("env", "Invalid environment variable", fmt.Sprintf("%q is not a valid variable name.", k)))
			}
			if isNull(v) {
				diags = append(diags, cfg.Error("env", "Null environment value", fmt.Sprintf("env[%q] is null.", k)))
			}
		}
	}
	if t := get(cfg, "timeout"); t.IsKnown() && !t.IsNull() && t.AsBigFloat().Sign() < 0 {
		diags = append(diags, cfg.Error("timeout", "Invalid timeout", "timeout cannot be negative."))
	}
	if codes := get(cfg, "expected_exit_codes"); codes.IsKnown() && !codes.IsNull() {
		if codes.LengthInt() == 0 {
			diags = append(diags, cfg.Error("expected_exit_codes", "No expected exit codes", "expected_exit_codes needs at least one code."))
		}
		for i, c := range codes.AsValueSlice() {
			if _, ok := exitCode(c); !ok && c.IsKnown() {
				diags = append(diags, cfg.Error("expected_exit_codes", "Invalid exit code",
					fmt.Sprintf("expected_exit_codes[%d] must be a whole number.", i)))
			}
		}
	}
	return diags
}

// exitCode converts a known whole number. Windows reports NTSTATUS codes
// such as 0xC0000005 as large unsigned values, hence the range.
func exitCode(v cty.Value) (int, bool) {
	if !v.IsKnown() || v.IsNull() {
		return 0, false
	}
	i, acc := v.AsBigFloat().Int64()
	if acc != big.Exact || i < math.MinInt32 || i > math.MaxUint32 {
		return 0, false
	}
	return int(i), true
}

// subject is the command line a plan shows. Unknown arguments are named as
// such rather than hiding the whole line.
func subject(argv cty.Value) string {
	if !argv.IsKnown() || argv.IsNull() {
		return knownAfterApply
	}
	var parts []string
	for _, el := range argv.AsValueSlice() {
		if s, ok := str(el); ok {
			parts = append(parts, s)
		} else {
			parts = append(parts, knownAfterApply)
		}
	}
	return strings.Join(parts, " ")
}

// quoteArgv shows argv unambiguously in an error: arguments with spaces or
// quotes are quoted.
func quoteArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// guard tells whether the creates/removes guards skip the command. known is
// false while a guard's path is unknown.
func guard(ctx context.Context, h host.Host, cfg modules.Config) (skip, known bool, diags hcl.Diagnostics) {
	known = true
	for _, g := range []struct {
		name        string
		skipIfThere bool
	}{{"creates", true}, {"removes", false}} {
		v := get(cfg, g.name)
		if isNull(v) {
			continue
		}
		p, ok := str(v)
		if !ok {
			known = false
			continue
		}
		fi, err := h.Stat(ctx, p)
		if err != nil {
			return false, false, hcl.Diagnostics{cfg.Error(g.name, "Cannot check "+g.name, err.Error())}
		}
		if fi.Exists == g.skipIfThere {
			// One guard saying skip settles it, even if the other is unknown.
			return true, true, nil
		}
	}
	return false, known, nil
}

func skippedResult() cty.Value {
	return result(commandResults, map[string]cty.Value{"skipped": cty.True})
}

func (m Command) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	skip, known, diags := guard(ctx, req.Host, cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(commandResults), Diagnostics: diags}
	}
	if skip {
		return modules.PlanResponse{Result: skippedResult()}
	}
	argv := get(cfg, "argv")
	skipped := cty.False
	if !known {
		skipped = cty.UnknownVal(cty.Bool)
	}
	return modules.PlanResponse{
		Change: &modules.Change{
			Action:  modules.Run,
			Subject: subject(argv),
			Fields:  []modules.FieldChange{{Name: "argv", Old: cty.NullVal(argv.Type()), New: argv}},
		},
		Result: result(commandResults, map[string]cty.Value{
			"rc": cty.DynamicVal, "stdout": cty.DynamicVal, "stderr": cty.DynamicVal, "skipped": skipped,
		}),
	}
}

func (m Command) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "argv", "creates", "removes", "chdir", "env", "stdin", "timeout", "expected_exit_codes"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(commandResults), Diagnostics: diags}
	}
	// Guards again: a path unknown at plan time is known now.
	skip, _, diags := guard(ctx, req.Host, cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(commandResults), Diagnostics: diags}
	}
	if skip {
		return modules.ApplyResponse{Result: skippedResult()}
	}

	rr := host.RunRequest{}
	for _, el := range get(cfg, "argv").AsValueSlice() {
		rr.Argv = append(rr.Argv, el.AsString())
	}
	rr.Dir, _ = str(get(cfg, "chdir"))
	if env := get(cfg, "env"); !env.IsNull() {
		m := env.AsValueMap()
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys) // deterministic order for the process
		for _, k := range keys {
			rr.Env = append(rr.Env, k+"="+m[k].AsString())
		}
	}
	if s, ok := str(get(cfg, "stdin")); ok {
		rr.Stdin = []byte(s)
	}
	if t := get(cfg, "timeout"); !t.IsNull() {
		secs, _ := t.AsBigFloat().Float64()
		rr.Timeout = time.Duration(secs * float64(time.Second))
	}
	expected := []int{0}
	if codes := get(cfg, "expected_exit_codes"); !codes.IsNull() {
		expected = expected[:0]
		for _, c := range codes.AsValueSlice() {
			code, _ := exitCode(c)
			expected = append(expected, code)
		}
	}

	out, err := req.Host.Run(ctx, rr)
	if err != nil {
		return modules.ApplyResponse{
			Result:      result(commandResults, map[string]cty.Value{"skipped": cty.False}),
			Diagnostics: hcl.Diagnostics{cfg.Error("argv", "Command could not be run", fmt.Sprintf("%s\n\n%v", quoteArgv(rr.Argv), err))},
		}
	}
	res := result(commandResults, map[string]cty.Value{
		"rc":      cty.NumberIntVal(int64(out.ExitCode)),
		"stdout":  cty.StringVal(validText(out.Stdout)),
		"stderr":  cty.StringVal(validText(out.Stderr)),
		"skipped": cty.False,
	})
	if out.Truncated {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Command output truncated",
			Detail:   fmt.Sprintf("%s wrote more output than is kept; stdout and stderr hold only the beginning.", quoteArgv(rr.Argv)),
			Subject:  cfg.Range("argv"),
		})
	}
	switch {
	case out.TimedOut:
		diags = append(diags, cfg.Error("timeout", "Command timed out", fmt.Sprintf(
			"Command: %s\nIt did not finish within %s and was killed.%s",
			quoteArgv(rr.Argv), rr.Timeout, stderrSection(out.Stderr))))
	case !slices.Contains(expected, out.ExitCode):
		diags = append(diags, cfg.Error("argv", "Command failed", fmt.Sprintf(
			"Command: %s\nExit code: %d (expected %s)%s",
			quoteArgv(rr.Argv), out.ExitCode, formatCodes(expected), stderrSection(out.Stderr))))
	}
	return modules.ApplyResponse{Result: res, Diagnostics: diags}
}

// stderrSection is the end of stderr for a failure's detail.
func stderrSection(stderr []byte) string {
	s := strings.TrimRight(validText(stderr), "\r\n")
	if s == "" {
		return "\n\nstderr was empty."
	}
	return "\n\nstderr (last 2 KiB):\n" + tail(s, stderrTail)
}

func formatCodes(codes []int) string {
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = strconv.Itoa(c)
	}
	return strings.Join(parts, ", ")
}
