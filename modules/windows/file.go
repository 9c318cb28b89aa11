package windows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/modules"
)

// File manages one regular file's content on a Windows host.
type File struct{}

var (
	_ modules.Module    = File{}
	_ modules.Validator = File{}
)

var fileResults = []modules.Attribute{
	{Name: "path", Type: cty.String, Description: "The managed path."},
	{Name: "sha256", Type: cty.String, Description: "Hex SHA-256 of the content; null when `state = \"absent\"`."},
	{Name: "size", Type: cty.Number, Description: "Content length in bytes; null when `state = \"absent\"`."},
}

func (File) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_file",
		Summary: "Write a file's content on a Windows host, or remove the file.",
		Description: "Makes a regular file hold exactly `content`. The new content goes to a temp " +
			"file beside the target and is renamed over it, so a reader (or a cut connection) " +
			"sees the old file or the complete new one. Content is compared by SHA-256, so an " +
			"unchanged file is never rewritten. Missing parent directories are created. " +
			"To copy a payload binary from the controller use `win_copy`, which also handles a " +
			"service running that binary.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "path", Type: cty.String, Required: true,
				Description: "Absolute Windows path of the file (`C:\\k\\kubelet.conf`)."},
			{Name: "content", Type: cty.String,
				Description: "The file's full content. Required unless `state = \"absent\"`."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` to write the file, `\"absent\"` to remove it (content is then ignored)."},
		},
		Results: fileResults,
		Example: `task "kubelet_config" {
  win_file {
    path    = "C:\\k\\kubelet.conf"
    content = templatefile("kubelet.conf.tftpl", { node_ip = host.facts.ipv4 })
  }
}`,
	}
}

func (File) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validatePath(cfg, "path")
	diags = append(diags, validateEnum(cfg, "state", "present", "absent")...)
	if state, ok := str(get(cfg, "state")); ok && state == "present" && isNull(get(cfg, "content")) {
		diags = append(diags, cfg.Error("content", "Missing content",
			"content is required unless state = \"absent\"."))
	}
	return diags
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// contentFields are the sha256 and size change fields of a file.
func contentFields(oldSHA string, oldSize int64, exists bool, newSHA, newSize cty.Value) []modules.FieldChange {
	oldS, oldN := cty.NullVal(cty.String), cty.NullVal(cty.Number)
	if exists {
		oldS, oldN = cty.StringVal(oldSHA), cty.NumberIntVal(oldSize)
	}
	fields := []modules.FieldChange{{Name: "sha256", Old: oldS, New: newSHA}}
	// New content of the same length: the size is no news.
	if !oldN.RawEquals(newSize) {
		fields = append(fields, modules.FieldChange{Name: "size", Old: oldN, New: newSize})
	}
	return fields
}

func (m File) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	pathV := get(cfg, "path")
	path, pathOK := str(pathV)
	state, stateOK := str(get(cfg, "state"))
	content, contentOK := str(get(cfg, "content"))

	// What the file will hold, as far as it is known now.
	wantSHA, wantSize := cty.UnknownVal(cty.String), cty.UnknownVal(cty.Number)
	switch {
	case stateOK && state == "absent":
		wantSHA, wantSize = cty.NullVal(cty.String), cty.NullVal(cty.Number)
	case stateOK && contentOK:
		wantSHA, wantSize = cty.StringVal(sha256Hex([]byte(content))), cty.NumberIntVal(int64(len(content)))
	}
	res := result(fileResults, map[string]cty.Value{"path": pathV, "sha256": wantSHA, "size": wantSize})

	if !pathOK || !stateOK {
		subject := knownAfterApply
		if pathOK {
			subject = path
		}
		return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Update, Subject: subject, Fields: []modules.FieldChange{
			{Name: "sha256", Old: cty.UnknownVal(cty.String), New: wantSHA},
			{Name: "size", Old: cty.UnknownVal(cty.Number), New: wantSize},
		}}}
	}
	fail := func(d hcl.Diagnostics) modules.PlanResponse {
		return modules.PlanResponse{Result: res, Diagnostics: d}
	}
	if diags := onWindows(ctx, req.Host, cfg, "path"); diags.HasErrors() {
		return fail(diags)
	}
	probeSHA, probeSize := "", int64(0)
	if state == "present" && contentOK {
		probeSHA, probeSize = wantSHA.AsString(), int64(len(content))
	}
	fi, oldSHA, diags := probeFile(ctx, req.Host, cfg, "path", path, probeSHA, probeSize)
	if diags.HasErrors() {
		return fail(diags)
	}
	fields := contentFields(oldSHA, fi.Size, fi.Exists, wantSHA, wantSize)
	var change *modules.Change
	switch {
	case state == "absent":
		if fi.Exists {
			change = &modules.Change{Action: modules.Delete, Subject: path, Fields: fields}
		}
	case !fi.Exists:
		change = &modules.Change{Action: modules.Create, Subject: path, Fields: fields}
	case !contentOK || oldSHA != wantSHA.AsString():
		change = &modules.Change{Action: modules.Update, Subject: path, Fields: fields}
	}
	return modules.PlanResponse{Change: change, Result: res}
}

// Apply converges from what it finds: values unknown at plan time are known
// now, and the file may have changed since.
func (m File) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "path", "state", "content"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(fileResults), Diagnostics: diags}
	}
	path, _ := str(get(cfg, "path"))
	state, _ := str(get(cfg, "state"))
	content, _ := str(get(cfg, "content"))
	res := result(fileResults, map[string]cty.Value{"path": cty.StringVal(path)})
	if state == "present" {
		res = result(fileResults, map[string]cty.Value{
			"path":   cty.StringVal(path),
			"sha256": cty.StringVal(sha256Hex([]byte(content))),
			"size":   cty.NumberIntVal(int64(len(content))),
		})
	}
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: res, Diagnostics: d}
	}
	h := req.Host
	if diags := onWindows(ctx, h, cfg, "path"); diags.HasErrors() {
		return fail(diags)
	}
	fi, diags := statFile(ctx, h, cfg, "path", path)
	if diags.HasErrors() {
		return fail(diags)
	}
	if state == "absent" {
		if fi.Exists {
			if err := h.Remove(ctx, path, false); err != nil {
				return fail(hostError(cfg, "path", "Cannot remove file", err))
			}
		}
		return modules.ApplyResponse{Result: res}
	}
	oldSHA, diags := remoteSHA(ctx, h, cfg, "path", path, fi)
	if diags.HasErrors() {
		return fail(diags)
	}
	if fi.Exists && oldSHA == sha256Hex([]byte(content)) {
		return modules.ApplyResponse{Result: res}
	}
	if diags := mkParent(ctx, h, cfg, "path", path); diags.HasErrors() {
		return fail(diags)
	}
	if err := h.WriteFile(ctx, path, strings.NewReader(content), 0o644); err != nil {
		return fail(hostError(cfg, "path", "Cannot write file", err))
	}
	return modules.ApplyResponse{Result: res}
}
