package windows

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
)

// Copy sends a file from the controller to a Windows host, stopping the
// service that runs it while the file is replaced.
type Copy struct {
	// Sources are the run's (or its face's) remembered source hashes; nil
	// reads every source each time.
	Sources *SourceHashes
}

var (
	_ modules.Module    = Copy{}
	_ modules.Validator = Copy{}
)

// serviceTimeout bounds how long stopping a service (until its process has
// exited) or starting it may take.
const serviceTimeout = 2 * time.Minute

var copyResults = []modules.Attribute{
	{Name: "dest", Type: cty.String, Description: "The destination path on the host."},
	{Name: "sha256", Type: cty.String, Description: "Hex SHA-256 of the copied content."},
	{Name: "size", Type: cty.Number, Description: "Size of the file in bytes."},
	{Name: "bytes_sent", Type: cty.Number, Description: "Bytes sent to the host; 0 when the host already had the file."},
}

func (Copy) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_copy",
		Summary: "Copy a file from the controller to a Windows host, replacing a running service's binary safely.",
		Description: "Reads `src` on the machine running wsu and makes `dest` on the host hold the same " +
			"bytes. The SHA-256 of both is compared first and nothing is sent when they match, so " +
			"re-running a payload copy costs one hash per file (none on the controller with " +
			"`sha256`). A source is read once per run however many hosts it goes to. The content " +
			"is streamed (never held in memory whole) to a temp file beside `dest`, which is then " +
			"renamed over it. A plan (and `apply --diff`) shows a changed text file of at most " +
			"64 KiB as a unified diff, as `win_file` does; larger and binary files by SHA-256 " +
			"alone, and a source others may not read (mode 0600: a key, a kubeconfig) with no " +
			"content.\n\n" +
			"Windows refuses to replace an executable while a process runs it. When `dest` differs " +
			"and `service` is running, the plan lists the service as restarted and apply stops it " +
			"(waiting for its process to exit), writes the file and starts it again; the service " +
			"is started again even when the write fails, with its old binary. The SCM refuses to " +
			"stop a service while services depending on it run, so its running dependents are " +
			"stopped first (deepest first), listed as restarted too, and started again after it, " +
			"in dependency order. Without `service`, " +
			"the module checks the service named like the file (`kube-proxy` for " +
			"`kube-proxy.exe`) and treats it the same way when it is running with `dest` as its " +
			"binary; name the service explicitly when it is called differently or runs the file " +
			"through a wrapper.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "src", Type: cty.String, Required: true, Local: true,
				Description: "File on the controller. A relative path is resolved against wsu's working directory."},
			{Name: "dest", Type: cty.String, Required: true,
				Description: "Absolute Windows path of the file on the host (`C:\\k\\kubelet.exe`); parent directories are created."},
			{Name: "service", Type: cty.String,
				Description: "The service whose binary `dest` is. When it is running and `dest` changes, it is stopped for the write and started again, with the running services that depend on it."},
			{Name: "sha256", Type: cty.String,
				Description: "The hex SHA-256 `src` must have, e.g. from a payload manifest. Planning then compares `dest` with it without reading `src` (a re-run reads nothing on the controller), and apply refuses to copy, before stopping any service, when `src` differs."},
		},
		Results: copyResults,
		Example: `task "kube_proxy_binary" {
  win_copy {
    src     = "payload/kube-proxy.exe"
    dest    = "C:\\k\\kube-proxy.exe"
    service = "kube-proxy"
  }
}`,
	}
}

func (Copy) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	var diags hcl.Diagnostics
	if s, ok := str(get(cfg, "src")); ok && s == "" {
		diags = append(diags, cfg.Error("src", "Empty src", "src must name a file on the controller."))
	}
	diags = append(diags, validatePath(cfg, "dest")...)
	if sum, ok := str(get(cfg, "sha256")); ok && !isSHA256(sum) {
		diags = append(diags, cfg.Error("sha256", "Invalid sha256", fmt.Sprintf("%q is not a hex SHA-256 (64 hex digits).", sum)))
	}
	if d, ok := str(get(cfg, "dest")); ok && d != "" && (strings.HasSuffix(d, `\`) || strings.HasSuffix(d, "/")) {
		diags = append(diags, cfg.Error("dest", "dest is a directory",
			fmt.Sprintf("dest %q ends with a separator; give the full path of the file, such as C:\\k\\kubelet.exe.", d)))
	}
	return append(diags, validateServiceName(cfg, "service")...)
}

func isSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// statLocal resolves src and reads its size without hashing it.
func statLocal(src string) (localFile, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return localFile{}, err
	}
	f, err := openRegular(abs)
	if err != nil {
		return localFile{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return localFile{}, err
	}
	return localFile{path: abs, size: fi.Size()}, nil
}

func openRegular(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file", path)
		}
		return nil, err
	}
	return f, nil
}

// isActive is true for a service whose process may hold its binary open.
func isActive(s host.ServiceState) bool {
	return s == host.ServiceRunning || s == host.ServiceStartPending || s == host.ServicePaused
}

func (m Copy) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	if diags := m.Validate(modules.ValidateRequest{Config: cfg}); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(copyResults), Diagnostics: diags}
	}
	destV, svcV := get(cfg, "dest"), get(cfg, "service")
	dest, destOK := str(destV)
	src, srcOK := str(get(cfg, "src"))

	wantSHA, wantSize := cty.UnknownVal(cty.String), cty.UnknownVal(cty.Number)
	var local localFile
	if srcOK {
		var err error
		// With the expected sum given, the source is only checked at apply.
		if sum, ok := str(get(cfg, "sha256")); ok {
			local, err = statLocal(src)
			local.sha = strings.ToLower(sum)
		} else {
			local, err = m.Sources.hashLocal(src)
		}
		if err != nil {
			return modules.PlanResponse{Result: unknownResult(copyResults), Diagnostics: hcl.Diagnostics{
				cfg.Error("src", "Cannot read source", err.Error())}}
		}
		wantSHA, wantSize = cty.StringVal(local.sha), cty.NumberIntVal(local.size)
	}
	res := func(sent cty.Value) cty.Value {
		return result(copyResults, map[string]cty.Value{"dest": destV, "sha256": wantSHA, "size": wantSize, "bytes_sent": sent})
	}

	if !destOK {
		change := &modules.Change{Action: modules.Update, Subject: knownAfterApply, Fields: []modules.FieldChange{
			{Name: "sha256", Old: cty.UnknownVal(cty.String), New: wantSHA},
			{Name: "size", Old: cty.UnknownVal(cty.Number), New: wantSize},
		}}
		if !isNull(svcV) {
			change.Restarts = []string{nameOrUnknown(svcV)}
		}
		return modules.PlanResponse{Change: change, Result: res(cty.UnknownVal(cty.Number))}
	}
	fail := func(d hcl.Diagnostics) modules.PlanResponse {
		return modules.PlanResponse{Result: res(cty.UnknownVal(cty.Number)), Diagnostics: d}
	}
	h := req.Host
	if diags := onWindows(ctx, h, cfg, "dest"); diags.HasErrors() {
		return fail(diags)
	}
	fi, oldSHA, diags := probeFile(ctx, h, cfg, "dest", dest, local.sha, local.size)
	if diags.HasErrors() {
		return fail(diags)
	}
	if srcOK && fi.Exists && oldSHA == local.sha {
		return modules.PlanResponse{Result: res(cty.NumberIntVal(0))}
	}

	action := modules.Create
	if fi.Exists {
		action = modules.Update
	}
	change := &modules.Change{Action: action, Subject: dest, Fields: contentFields(oldSHA, fi.Size, fi.Exists, wantSHA, wantSize)}
	if req.Diff && srcOK {
		change.Content = copyContent(ctx, h, local, dest, fi)
	}
	// Only an existing file can be some running process's image.
	if fi.Exists {
		restarts, d := m.restarts(ctx, h, cfg, svcV, dest)
		diags = append(diags, d...)
		if diags.HasErrors() {
			return fail(diags)
		}
		change.Restarts = restarts
	}
	return modules.PlanResponse{Change: change, Result: res(cty.UnknownVal(cty.Number)), Diagnostics: diags}
}

// copyContent is dest's content before and after, for the content diff
// of a plan or apply --diff: src is read only when it is at most
// modules.MaxDiffBytes (a payload binary is compared by hash alone), and
// the views show binary content as a note. A source others may not read
// (a key, a kubeconfig: mode 0600) is private, and neither side is shown.
func copyContent(ctx context.Context, h host.Host, local localFile, dest string, fi host.FileInfo) *modules.ContentChange {
	if local.size > modules.MaxDiffBytes {
		return &modules.ContentChange{Omitted: fmt.Sprintf("larger than %d KiB", modules.MaxDiffBytes>>10)}
	}
	f, err := openRegular(local.path)
	if err != nil {
		return &modules.ContentChange{Omitted: "the source could not be read"}
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Mode().Perm()&0o004 == 0 {
		return &modules.ContentChange{Omitted: "the source file is private (others may not read it)"}
	}
	want, err := io.ReadAll(io.LimitReader(f, modules.MaxDiffBytes+1))
	if err != nil {
		return &modules.ContentChange{Omitted: "the source could not be read"}
	}
	if !fi.Exists {
		return &modules.ContentChange{New: string(want)}
	}
	return generic.OldContent(ctx, h, dest, fi.Size, string(want))
}

func nameOrUnknown(v cty.Value) string {
	if s, ok := str(v); ok {
		return s
	}
	return knownAfterApply
}

// restarts finds the services Apply must stop to replace dest, in the
// order to stop them: the one named in `service` if it runs, else the one
// named like the file when it runs dest, each after its running dependents
// (stopOrder). Naming the file's service is the cheap check: it costs one
// query (and one for the dependents when it runs), only when the file
// differs.
func (Copy) restarts(ctx context.Context, h host.Host, cfg modules.Config, svcV cty.Value, dest string) ([]string, hcl.Diagnostics) {
	if !svcV.IsKnown() {
		return []string{knownAfterApply}, nil
	}
	if name, ok := str(svcV); ok {
		info, err := h.QueryService(ctx, name)
		if err != nil {
			return nil, hostError(cfg, "service", "Cannot query service", err)
		}
		if info.Exists && isActive(info.State) {
			return serviceStops(ctx, h, cfg, name)
		}
		return nil, nil
	}

	guess := strings.TrimSuffix(baseName(dest), filepath.Ext(baseName(dest)))
	if checkServiceName(guess) != "" {
		return nil, nil
	}
	info, err := h.QueryService(ctx, guess)
	switch {
	case errors.Is(err, host.ErrNotSupported):
		return nil, nil // no SCM, so no service can hold the file
	case err != nil:
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagWarning,
			Summary:  "Cannot check for a service using dest",
			Detail:   fmt.Sprintf("Querying service %q failed: %v. If a service runs %s, set service so it is stopped for the copy.", guess, err, dest),
			Subject:  cfg.Range("dest"),
		}}
	}
	if info.Exists && isActive(info.State) && samePath(info.Config.BinaryPath, dest) {
		if info.Config.Name != "" {
			guess = info.Config.Name
		}
		return serviceStops(ctx, h, cfg, guess)
	}
	return nil, nil
}

// serviceStops is stopOrder with its error located at service.
func serviceStops(ctx context.Context, h host.Host, cfg modules.Config, name string) ([]string, hcl.Diagnostics) {
	order, err := stopOrder(ctx, h, name)
	if err != nil {
		return nil, hostError(cfg, "service", "Cannot list dependent services", err)
	}
	return order, nil
}

func (m Copy) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	diags := m.Validate(modules.ValidateRequest{Config: cfg})
	if diags = append(diags, requireKnown(cfg, "src", "dest", "service", "sha256")...); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(copyResults), Diagnostics: diags}
	}
	src, _ := str(get(cfg, "src"))
	dest, _ := str(get(cfg, "dest"))
	service, hasService := str(get(cfg, "service"))
	res := func(sha string, size, sent int64) cty.Value {
		return result(copyResults, map[string]cty.Value{
			"dest": cty.StringVal(dest), "sha256": cty.StringVal(sha),
			"size": cty.NumberIntVal(size), "bytes_sent": cty.NumberIntVal(sent),
		})
	}
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: unknownResult(copyResults), Diagnostics: d}
	}

	local, err := m.Sources.hashLocal(src)
	if err != nil {
		return fail(hcl.Diagnostics{cfg.Error("src", "Cannot read source", err.Error())})
	}
	if want, ok := str(get(cfg, "sha256")); ok && !strings.EqualFold(want, local.sha) {
		return fail(hcl.Diagnostics{cfg.Error("src", "Source does not match sha256",
			fmt.Sprintf("%s has sha256 %s, not %s; nothing was copied.", local.path, local.sha, strings.ToLower(want)))})
	}
	h := req.Host
	if diags := onWindows(ctx, h, cfg, "dest"); diags.HasErrors() {
		return fail(diags)
	}
	fi, diags := statFile(ctx, h, cfg, "dest", dest)
	if diags.HasErrors() {
		return fail(diags)
	}
	oldSHA, diags := remoteSHA(ctx, h, cfg, "dest", dest, fi)
	if diags.HasErrors() {
		return fail(diags)
	}
	if fi.Exists && oldSHA == local.sha {
		return modules.ApplyResponse{Result: res(local.sha, local.size, 0)}
	}

	// Stop exactly what the plan said, in its order (dependents first);
	// "(known after apply)" stood for the configured service and its
	// dependents, known now. A service no longer running is left alone and
	// not started afterwards.
	var planned []string
	if req.Change != nil {
		planned = req.Change.Restarts
	}
	if slices.Contains(planned, knownAfterApply) {
		planned = nil
		if hasService {
			order, diags := serviceStops(ctx, h, cfg, service)
			if diags.HasErrors() {
				return fail(diags)
			}
			planned = order
		}
	}
	stopped, err := stopInOrder(ctx, h, planned)
	if err != nil {
		return fail(append(hostError(cfg, "service", "Cannot stop service", err), startAgain(ctx, h, cfg, "service", stopped)...))
	}

	sent, sum, diags := m.write(ctx, h, cfg, local, dest, len(stopped) > 0)
	diags = append(diags, startAgain(ctx, h, cfg, "service", stopped)...)
	if diags.HasErrors() {
		return fail(diags)
	}
	return modules.ApplyResponse{Result: res(sum, sent, sent)}
}

// write streams the local file to dest and returns what it sent.
func (Copy) write(ctx context.Context, h host.Host, cfg modules.Config, local localFile, dest string, serviceStopped bool) (int64, string, hcl.Diagnostics) {
	if diags := mkParent(ctx, h, cfg, "dest", dest); diags.HasErrors() {
		return 0, "", diags
	}
	f, err := openRegular(local.path)
	if err != nil {
		return 0, "", hcl.Diagnostics{cfg.Error("src", "Cannot read source", err.Error())}
	}
	defer f.Close()
	// The file may have changed since it was hashed: the reader fails
	// rather than end then, and the host keeps its old file.
	r := newSendReader(f, local, local.sha)
	// The host's faster way for large files when it has one (SSH: SFTP),
	// with WriteFile's semantics.
	if err := host.Upload(ctx, h, dest, r, 0o755); err != nil {
		detail := err.Error()
		if r.changed != nil {
			return r.n, "", hcl.Diagnostics{cfg.Error("src", "Source changed during the copy", r.changed.Error())}
		}
		if !serviceStopped {
			detail += "\n\nIf a running program has this file open, name its service in `service` so it is stopped for the copy."
		}
		return r.n, "", hcl.Diagnostics{cfg.Error("dest", "Cannot write file", detail)}
	}
	return r.n, local.sha, nil
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
