package generic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// File manages one regular file's content and permissions.
type File struct {
	// Paths are the path rules; nil means this package's (any absolute
	// path, any host).
	Paths PathRules
}

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
		Name:    "file",
		Summary: "Write a file's content and mode, or remove the file.",
		Description: "Makes a regular file hold exactly `content`, replacing it atomically " +
			"(a temp file beside it is renamed over it, so readers never see half a file). " +
			"Missing parent directories are created. Content is compared by SHA-256, so an " +
			"unchanged file is never rewritten. With `state = \"absent\"` the file is removed.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "path", Type: cty.String, Required: true,
				Description: "Absolute path of the file (`/etc/x` or `C:\\x`)."},
			{Name: "content", Type: cty.String,
				Description: "The file's full content. Required unless `state = \"absent\"`."},
			{Name: "mode", Type: cty.String,
				Description: "Permission bits as an octal string such as `\"0644\"`. Unset: new files get 0644 and existing ones keep theirs. Ignored on Windows."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` to write the file, `\"absent\"` to remove it (content and mode are then ignored)."},
		},
		Results: fileResults,
		Example: `task "kubelet_config" {
  file {
    path    = "C:\\k\\kubelet.conf"
    content = templatefile("kubelet.conf.tftpl", { node = host.facts.hostname })
  }
}`,
	}
}

func (m File) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := rulesOr(m.Paths).ValidatePath(cfg, "path")
	diags = append(diags, validateState(cfg)...)
	diags = append(diags, validateMode(cfg)...)
	if state, ok := str(get(cfg, "state")); ok && state == "present" && isNull(get(cfg, "content")) {
		diags = append(diags, cfg.Error("content", "Missing content",
			"content is required unless state = \"absent\"."))
	}
	return diags
}

// fileConfig is the decoded configuration; the ok flags say what is known.
type fileConfig struct {
	path, state, content       string
	pathOK, stateOK, contentOK bool
	mode                       modeConfig
	wantSHA, wantSize          cty.Value // from content, unknown when it is
}

func decodeFile(cfg modules.Config) fileConfig {
	fc := fileConfig{mode: decodeMode(cfg)}
	fc.path, fc.pathOK = str(get(cfg, "path"))
	fc.state, fc.stateOK = str(get(cfg, "state"))
	fc.content, fc.contentOK = str(get(cfg, "content"))
	fc.wantSHA, fc.wantSize = cty.UnknownVal(cty.String), cty.UnknownVal(cty.Number)
	if fc.contentOK {
		fc.wantSHA = cty.StringVal(sha256Hex(fc.content))
		fc.wantSize = cty.NumberIntVal(int64(len(fc.content)))
	}
	return fc
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// result is the task result; content-derived attributes are known as soon
// as the content is, even before the path is.
func (fc fileConfig) result(cfg modules.Config) cty.Value {
	vals := map[string]cty.Value{"path": get(cfg, "path")}
	switch {
	case !fc.stateOK:
		vals["sha256"], vals["size"] = cty.DynamicVal, cty.DynamicVal
	case fc.state == "present":
		vals["sha256"], vals["size"] = fc.wantSHA, fc.wantSize
	}
	return result(fileResults, vals)
}

func (m File) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	fc := decodeFile(cfg)
	res := fc.result(cfg)

	if !fc.pathOK || !fc.stateOK {
		// Which file, or whether it should exist, is not known: the host
		// cannot be asked, so promise an update of unknown extent.
		subject := knownAfterApply
		if fc.pathOK {
			subject = fc.path
		}
		newSHA, newSize := fc.wantSHA, fc.wantSize
		if !fc.stateOK {
			newSHA, newSize = cty.UnknownVal(cty.String), cty.UnknownVal(cty.Number)
		} else if fc.state == "absent" {
			newSHA, newSize = cty.NullVal(cty.String), cty.NullVal(cty.Number)
		}
		fields := []modules.FieldChange{
			{Name: "sha256", Old: cty.UnknownVal(cty.String), New: newSHA},
			{Name: "size", Old: cty.UnknownVal(cty.Number), New: newSize},
		}
		if fc.mode.set && fc.state != "absent" {
			fields = append(fields, modules.FieldChange{Name: "mode", Old: cty.UnknownVal(cty.String), New: fc.mode.value()})
		}
		return modules.PlanResponse{Change: &modules.Change{Action: modules.Update, Subject: subject, Fields: fields}, Result: res}
	}

	rules := rulesOr(m.Paths)
	windows, diags := rules.CheckHost(ctx, req.Host, cfg, fc.path)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	if windows && fc.mode.set && fc.state == "present" {
		diags = append(diags, modeIgnored(cfg))
	}
	// A managed mode is only in the stat: without one, the sum alone
	// settles an unchanged file.
	probeSHA, probeSize := "", int64(0)
	if fc.state == "present" && fc.contentOK && (!fc.mode.set || windows) {
		probeSHA, probeSize = fc.wantSHA.AsString(), int64(len(fc.content))
	}
	fi, oldSHA, d := rules.FileProbe(cfg).Probe(ctx, req.Host, fc.path, probeSHA, probeSize)
	if diags = append(diags, d...); diags.HasErrors() {
		return modules.PlanResponse{Result: res, Diagnostics: diags}
	}
	oldFields := func() (cty.Value, cty.Value) {
		return cty.StringVal(oldSHA), cty.NumberIntVal(fi.Size)
	}

	var change *modules.Change
	switch {
	case fc.state == "absent":
		if fi.Exists {
			oldS, oldN := oldFields()
			change = &modules.Change{Action: modules.Delete, Subject: fc.path, Fields: []modules.FieldChange{
				{Name: "sha256", Old: oldS, New: cty.NullVal(cty.String)},
				{Name: "size", Old: oldN, New: cty.NullVal(cty.Number)},
			}}
		}
	case !fi.Exists:
		fields := []modules.FieldChange{
			{Name: "sha256", Old: cty.NullVal(cty.String), New: fc.wantSHA},
			{Name: "size", Old: cty.NullVal(cty.Number), New: fc.wantSize},
		}
		if fc.mode.set && !windows {
			fields = append(fields, modules.FieldChange{Name: "mode", Old: cty.NullVal(cty.String), New: fc.mode.value()})
		}
		change = &modules.Change{Action: modules.Create, Subject: fc.path, Fields: fields}
		if req.Diff && fc.contentOK {
			change.Content = &modules.ContentChange{New: fc.content}
		}
	default:
		var fields []modules.FieldChange
		if !fc.contentOK || oldSHA != fc.wantSHA.AsString() {
			oldS, oldN := oldFields()
			fields = append(fields, modules.FieldChange{Name: "sha256", Old: oldS, New: fc.wantSHA})
			// New content of the same length: the size is no news.
			if !oldN.RawEquals(fc.wantSize) {
				fields = append(fields, modules.FieldChange{Name: "size", Old: oldN, New: fc.wantSize})
			}
		}
		if fc.mode.set && !windows && (!fc.mode.known || fi.Mode.Perm() != fc.mode.mode) {
			fields = append(fields, modules.FieldChange{Name: "mode", Old: cty.StringVal(formatMode(fi.Mode)), New: fc.mode.value()})
		}
		if len(fields) > 0 {
			change = &modules.Change{Action: modules.Update, Subject: fc.path, Fields: fields}
			if req.Diff && fc.contentOK && oldSHA != fc.wantSHA.AsString() {
				change.Content = OldContent(ctx, req.Host, fc.path, fi.Size, fc.content)
			}
		}
	}
	return modules.PlanResponse{Change: change, Result: res, Diagnostics: diags}
}

// OldContent reads a file's current content for a diff against want,
// unless either side is larger than modules.MaxDiffBytes (file and
// win_copy share it).
func OldContent(ctx context.Context, h host.Host, path string, size int64, want string) *modules.ContentChange {
	if size > modules.MaxDiffBytes || len(want) > modules.MaxDiffBytes {
		return &modules.ContentChange{New: want, Omitted: fmt.Sprintf("larger than %d KiB", modules.MaxDiffBytes>>10)}
	}
	old, err := h.ReadFile(ctx, path, modules.MaxDiffBytes)
	if err != nil {
		return &modules.ContentChange{New: want, Omitted: "the old content could not be read"}
	}
	return &modules.ContentChange{Old: string(old), New: want}
}

// Apply converges from what it finds rather than replaying the plan's
// fields: values unknown at plan time are known now.
func (m File) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "path", "state", "content", "mode"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(fileResults), Diagnostics: diags}
	}
	fc := decodeFile(cfg)
	res := fc.result(cfg)
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: res, Diagnostics: d}
	}

	rules := rulesOr(m.Paths)
	windows, diags := rules.CheckHost(ctx, req.Host, cfg, fc.path)
	if diags.HasErrors() {
		return fail(diags)
	}
	fi, diags := rules.FileProbe(cfg).Stat(ctx, req.Host, fc.path)
	if diags.HasErrors() {
		return fail(diags)
	}
	h := req.Host

	if fc.state == "absent" {
		if fi.Exists {
			if err := h.Remove(ctx, fc.path, false); err != nil {
				return fail(rules.HostError(cfg, "Cannot remove file", err))
			}
		}
		return modules.ApplyResponse{Result: res}
	}

	write := !fi.Exists
	if fi.Exists {
		sum, err := h.SHA256(ctx, fc.path)
		if err != nil {
			return fail(rules.HostError(cfg, "Cannot read file", err))
		}
		write = strings.ToLower(sum) != fc.wantSHA.AsString()
	}
	wantMode := fs.FileMode(0o644)
	if fi.Exists && !windows {
		wantMode = fi.Mode.Perm() // rewriting must not reset a mode nobody asked to change
	}
	if fc.mode.known && !windows {
		wantMode = fc.mode.mode
	}

	switch {
	case write:
		if parent := rules.ParentDir(fc.path); !rules.IsRoot(parent) {
			if err := h.MkdirAll(ctx, parent, 0o755); err != nil {
				return fail(rules.HostError(cfg, "Cannot create parent directory", err))
			}
		}
		if err := h.WriteFile(ctx, fc.path, strings.NewReader(fc.content), wantMode); err != nil {
			return fail(rules.HostError(cfg, "Cannot write file", err))
		}
	case !windows && fi.Mode.Perm() != wantMode:
		if err := h.Chmod(ctx, fc.path, wantMode); err != nil {
			return fail(rules.HostError(cfg, "Cannot change mode", err))
		}
	}
	return modules.ApplyResponse{Result: res}
}
