package windows

import (
	"context"
	"errors"
	"io/fs"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
)

// File manages one regular file's content on a Windows host. It is the
// generic file module with Windows path rules and no mode: the planning,
// writing and reporting are that module's, so the two cannot drift apart.
// What Windows adds is the ACL: with acl = "administrators" a file holding
// a credential (the bootstrap kubeconfig) is readable by SYSTEM and
// Administrators only, set through the agent's security calls as
// win_authorized_key sets it, and set again after every write, since a
// write replaces the file and a new file inherits its directory's ACL.
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
	s.Attributes = append(windowsAttributes(s.Attributes, map[string]string{
		"path":  "Absolute Windows path of the file (`C:\\k\\kubelet.conf`).",
		"state": "`\"present\"` to write the file, `\"absent\"` to remove it (content is then ignored).",
	}), modules.Attribute{Name: "acl", Type: cty.String, Default: cty.StringVal(aclInherit),
		Description: "`\"inherit\"`: the ACL is left alone (a new file takes its directory's). `\"administrators\"`: owner " +
			"Administrators, inheritance off, full control for SYSTEM and Administrators and no one else, for a file " +
			"holding a credential; the plan shows an ACL that differs, and the ACL is set again after every write."})
	s.Description += " With `acl = \"administrators\"` the file's ACL is held to SYSTEM and Administrators " +
		"only; between the write and the ACL (one round trip) the new file has its directory's ACL."
	s.Example = `task "kubelet_config" {
  win_file {
    path    = "C:\\k\\kubelet.conf"
    content = templatefile("kubelet.conf.tftpl", { node_ip = host.facts.ipv4 })
  }
}`
	return s
}

// The acl argument's values.
const (
	aclInherit        = "inherit"
	aclAdministrators = "administrators"
)

func (File) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	diags := file().Validate(modules.ValidateRequest{Config: withoutMode(req.Config)})
	return append(diags, validateEnum(req.Config, "acl", aclInherit, aclAdministrators)...)
}

// adminsOnly reports whether the task holds a present file to the
// administrators' ACL; unknown counts as no until it is known.
func adminsOnly(cfg modules.Config) bool {
	acl, _ := str(get(cfg, "acl"))
	state, _ := str(get(cfg, "state"))
	return acl == aclAdministrators && state == "present"
}

func (File) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	req.Config = withoutMode(cfg)
	resp := file().Plan(ctx, req)
	if resp.Diagnostics.HasErrors() || !adminsOnly(cfg) {
		return resp
	}
	path, ok := str(get(cfg, "path"))
	if !ok {
		return resp
	}
	want := host.AdminsOnlyACL()
	field := modules.FieldChange{Name: "acl", Old: cty.NullVal(cty.String), New: cty.StringVal(want.String())}
	switch {
	case resp.Change == nil:
		// Content unchanged: only the ACL may be due.
		acl, err := req.Host.FileACL(ctx, path)
		if err != nil {
			resp.Diagnostics = append(resp.Diagnostics, hostError(cfg, "acl", "Cannot read the file's ACL", err)...)
			return resp
		}
		if acl.Satisfies(want) {
			return resp
		}
		field.Old = cty.StringVal(acl.String())
		resp.Change = &modules.Change{Action: modules.Update, Subject: path}
	case resp.Change.Action == modules.Update:
		field.Old = cty.StringVal("(replaced by the write: inherited)")
	}
	resp.Change.Fields = append(resp.Change.Fields, field)
	return resp
}

// Apply writes as the generic module does, then holds the ACL: after a
// write always (the new file inherited its directory's), else when it
// differs.
func (File) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	req.Config = withoutMode(cfg)
	resp := file().Apply(ctx, req)
	if resp.Diagnostics.HasErrors() || !adminsOnly(cfg) {
		return resp
	}
	path, _ := str(get(cfg, "path"))
	want := host.AdminsOnlyACL()
	acl, err := req.Host.FileACL(ctx, path)
	if err == nil && acl.Satisfies(want) {
		return resp
	}
	if err := req.Host.SetFileACL(ctx, path, want); err != nil {
		summary := "Cannot set the file's ACL"
		if errors.Is(err, fs.ErrNotExist) {
			summary = "The file vanished before its ACL was set"
		}
		resp.Diagnostics = append(resp.Diagnostics, hostError(cfg, "acl", summary, err)...)
	}
	return resp
}
