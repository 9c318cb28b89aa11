package windows

import (
	"context"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
)

// File manages one regular file's content on a Windows host. It is the
// generic file module with Windows path rules and no mode: the planning,
// writing and reporting are that module's, so the two cannot drift apart.
type File struct{}

var (
	_ modules.Module    = File{}
	_ modules.Validator = File{}
)

// file is the generic module this one wraps.
func file() generic.File { return generic.File{Paths: winPaths{}} }

func (File) Schema() modules.Schema {
	s := file().Schema()
	s.Name = "win_file"
	s.Summary = "Write a file's content on a Windows host, or remove the file."
	s.Description = "Makes a regular file hold exactly `content`. The new content goes to a temp " +
		"file beside the target and is renamed over it, so a reader (or a cut connection) " +
		"sees the old file or the complete new one. Content is compared by SHA-256, so an " +
		"unchanged file is never rewritten. Missing parent directories are created. " +
		"To copy a payload binary from the controller use `win_copy`, which also handles a " +
		"service running that binary."
	s.Attributes = windowsAttributes(s.Attributes, map[string]string{
		"path":  "Absolute Windows path of the file (`C:\\k\\kubelet.conf`).",
		"state": "`\"present\"` to write the file, `\"absent\"` to remove it (content is then ignored).",
	})
	s.Example = `task "kubelet_config" {
  win_file {
    path    = "C:\\k\\kubelet.conf"
    content = templatefile("kubelet.conf.tftpl", { node_ip = host.facts.ipv4 })
  }
}`
	return s
}

func (File) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	return file().Validate(modules.ValidateRequest{Config: withoutMode(req.Config)})
}

func (File) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	req.Config = withoutMode(req.Config)
	return file().Plan(ctx, req)
}

func (File) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	req.Config = withoutMode(req.Config)
	return file().Apply(ctx, req)
}
