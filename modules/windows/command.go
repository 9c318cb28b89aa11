package windows

import (
	"context"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
)

// Command runs a program on a Windows host, guarded by creates/removes.
// It is the generic command module with Windows paths: the running,
// guarding and reporting are that module's, so the two cannot drift apart.
type Command struct{}

var (
	_ modules.Module    = Command{}
	_ modules.Validator = Command{}
)

// commandPaths are the arguments that name paths on the host.
var commandPaths = []string{"creates", "removes", "chdir"}

func (Command) Schema() modules.Schema {
	s := generic.Command{}.Schema()
	s.Name = "win_command"
	s.Summary = "Run a program on a Windows host, unless a creates/removes guard says it already ran."
	s.Description = "Runs `argv[0]` with the remaining elements as its arguments — never through " +
		"cmd.exe or PowerShell, so nothing needs quoting and no shell's rules apply. For shell " +
		"features use `[\"cmd.exe\", \"/c\", ...]` explicitly. A command always reports a change, " +
		"so guard it with `creates` or `removes`, which are checked on the host before running " +
		"(again at apply, in case an earlier task created the file). An exit code outside " +
		"`expected_exit_codes` fails the task; Windows status codes such as 3221225477 " +
		"(0xC0000005) are accepted there."
	attrs := make([]modules.Attribute, len(s.Attributes))
	copy(attrs, s.Attributes)
	for i := range attrs {
		switch attrs[i].Name {
		case "creates":
			attrs[i].Description = "Absolute Windows path; the command is skipped when it exists."
		case "removes":
			attrs[i].Description = "Absolute Windows path; the command is skipped when it does not exist."
		case "chdir":
			attrs[i].Description = "Absolute Windows path of the working directory."
		}
	}
	s.Attributes = attrs
	s.Example = `task "containerd_service" {
  win_command {
    argv    = ["C:\\k\\containerd\\containerd.exe", "--register-service", "--config", "C:\\k\\containerd\\containerd_conf.toml"]
    creates = "C:\\k\\containerd\\registered"
    timeout = 60
  }
}`
	return s
}

// Validate checks the paths as Windows paths and everything else as the
// generic module does (with the paths hidden from it, so a bad path is
// reported once).
func (Command) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	for _, p := range commandPaths {
		diags = append(diags, validatePath(cfg, p)...)
	}
	return append(diags, generic.Command{}.Validate(modules.ValidateRequest{Config: withoutPaths(cfg)})...)
}

// withoutPaths is cfg with the path arguments null.
func withoutPaths(cfg modules.Config) modules.Config {
	if !cfg.Value.IsKnown() || cfg.Value.IsNull() {
		return cfg
	}
	vals := cfg.Value.AsValueMap()
	for _, p := range commandPaths {
		vals[p] = cty.NullVal(cty.String)
	}
	cfg.Value = cty.ObjectVal(vals)
	return cfg
}

func (m Command) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	if diags := onWindows(ctx, req.Host, req.Config, "argv"); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(m.Schema().Results), Diagnostics: diags}
	}
	return generic.Command{}.Plan(ctx, req)
}

func (m Command) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	if diags := onWindows(ctx, req.Host, req.Config, "argv"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(m.Schema().Results), Diagnostics: diags}
	}
	return generic.Command{}.Apply(ctx, req)
}
