// Package windows holds the modules that only make sense on a Windows host:
// files and directories on Windows paths, payload copies that replace a
// running service's binary safely, services, machine environment and PATH,
// registry values, commands and waits.
//
// Every module here reads and changes the host only through the Host API,
// so the same code runs against the node agent on Windows, under Wine, and
// against the simulated host in tests.
package windows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// Modules returns every module of this package; win_copy remembers its
// sources' hashes in sources (nil: none are remembered).
func Modules(sources *SourceHashes) []modules.Module {
	return []modules.Module{
		Directory{}, File{}, Copy{Sources: sources}, Service{}, Env{}, Path{}, Registry{}, Command{}, Wait{},
		HNSNetwork{}, HNSEndpoint{}, Kill{}, AuthorizedKey{}, ContainerdMirrors{}, Certificate{}, OptionalFeature{}, Reboot{},
		FirewallRule{}, ServiceInfo{}, InstanceMetadata{}, Stat{},
	}
}

// knownAfterApply is the Subject (or Restarts entry) for a name that is not
// known yet.
const knownAfterApply = "(known after apply)"

// The config and result helpers are shared with the other module packages;
// modutil says why each exists.
var (
	get           = modutil.Get
	str           = modutil.Str
	isNull        = modutil.IsNull
	result        = modutil.Result
	unknownResult = modutil.UnknownResult
	requireKnown  = modutil.RequireKnown
	listVal       = modutil.Strings
)

// strList decodes a wholly known list of strings; null is an empty list.
func strList(v cty.Value) ([]string, bool) {
	if !v.IsWhollyKnown() {
		return nil, false
	}
	if v.IsNull() {
		return nil, true
	}
	out := make([]string, 0, v.LengthInt())
	for _, el := range v.AsValueSlice() {
		s, ok := str(el)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// --- Windows paths ---

// checkWinPath explains why p is not an absolute Windows path (C:\x, C:/x
// or \\server\share\x), or returns "". These modules never accept a POSIX
// path: on a Windows host "/etc/x" means the current drive, which is not
// something a playbook should depend on.
func checkWinPath(p string) string {
	var rest string
	switch {
	case p == "":
		return "must not be empty"
	case strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, "//"):
		parts := strings.FieldsFunc(p[2:], isSep)
		if len(parts) < 2 {
			return `a UNC path needs a server and a share (\\server\share\...)`
		}
		rest = p[2:]
	case len(p) >= 3 && isDriveLetter(p[0]) && p[1] == ':' && isSep(rune(p[2])):
		rest = p[3:]
	case strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`):
		return "has no drive letter (write C:\\... rather than a POSIX or drive-relative path)"
	default:
		return "is relative; write an absolute path such as C:\\k\\kubelet.conf"
	}
	for _, r := range rest {
		if r < 0x20 || strings.ContainsRune(`<>:"|?*`, r) {
			return fmt.Sprintf("contains %q, which Windows does not allow in a path", r)
		}
	}
	return ""
}

func isSep(r rune) bool { return r == '\\' || r == '/' }

func isDriveLetter(c byte) bool {
	c |= 0x20 // ASCII lower case
	return c >= 'a' && c <= 'z'
}

// validatePath checks an absolute-Windows-path attribute when it is known
// and set.
func validatePath(cfg modules.Config, name string) hcl.Diagnostics {
	p, ok := str(get(cfg, name))
	if !ok {
		return nil
	}
	if why := checkWinPath(p); why != "" {
		summary := "Invalid Windows path"
		if p == "" {
			summary = "Empty path"
		}
		return hcl.Diagnostics{cfg.Error(name, summary, fmt.Sprintf("%s %q %s.", name, p, why))}
	}
	return nil
}

// normPath is the form two Windows paths are compared in: NTFS is case-
// insensitive and accepts either separator, and a trailing separator does
// not name a different directory.
func normPath(p string) string {
	p = strings.ToLower(strings.ReplaceAll(p, "/", `\`))
	for len(p) > 3 && strings.HasSuffix(p, `\`) {
		p = p[:len(p)-1]
	}
	if len(p) == 2 && p[1] == ':' {
		p += `\`
	}
	return p
}

// samePath compares two Windows paths as Windows does.
func samePath(a, b string) bool { return normPath(a) == normPath(b) }

// isRoot is true for a drive root or UNC share root: never something to
// delete recursively.
func isRoot(p string) bool {
	n := normPath(p)
	if len(n) == 3 && n[1] == ':' {
		return true
	}
	if strings.HasPrefix(n, `\\`) {
		return len(strings.FieldsFunc(n[2:], isSep)) <= 2
	}
	return false
}

// parentDir is the directory holding p; a root is its own parent.
func parentDir(p string) string {
	if isRoot(p) {
		return p
	}
	trimmed := strings.TrimRight(p, `/\`)
	i := strings.LastIndexAny(trimmed, `/\`)
	switch {
	case i < 0:
		return p
	case i == 2 && trimmed[1] == ':':
		return trimmed[:3] // "C:\"
	}
	return trimmed[:i]
}

// baseName is the last element of a Windows path.
func baseName(p string) string {
	trimmed := strings.TrimRight(p, `/\`)
	return trimmed[strings.LastIndexAny(trimmed, `/\`)+1:]
}

// --- validation helpers ---

// validateEnum checks that a known string attribute is one of allowed.
func validateEnum(cfg modules.Config, name string, allowed ...string) hcl.Diagnostics {
	s, ok := str(get(cfg, name))
	if !ok {
		return nil
	}
	for _, a := range allowed {
		if s == a {
			return nil
		}
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return hcl.Diagnostics{cfg.Error(name, "Invalid "+name,
		fmt.Sprintf("%s must be one of %s; got %q.", name, strings.Join(quoted, ", "), s))}
}

// checkServiceName explains why s cannot name a Windows service, or returns
// "". The SCM rejects slashes and names longer than 256 characters.
func checkServiceName(s string) string {
	switch {
	case strings.TrimSpace(s) == "":
		return "must not be empty"
	case len([]rune(s)) > 256:
		return "is longer than 256 characters"
	case strings.ContainsAny(s, `/\`):
		return "contains a slash or backslash"
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "contains a control character"
	}
	return ""
}

// validateServiceName checks a service-name attribute when known and set.
func validateServiceName(cfg modules.Config, name string) hcl.Diagnostics {
	s, ok := str(get(cfg, name))
	if !ok {
		return nil
	}
	if why := checkServiceName(s); why != "" {
		return hcl.Diagnostics{cfg.Error(name, "Invalid service name", fmt.Sprintf("%s %q %s.", name, s, why))}
	}
	return nil
}

// --- host helpers ---

// onWindows refuses a host that is not Windows: a Windows path on a Linux
// host would name a file literally called `C:\x` in the working directory.
func onWindows(ctx context.Context, h host.Host, cfg modules.Config, attr string) hcl.Diagnostics {
	facts, err := h.Facts(ctx)
	if err != nil {
		return hcl.Diagnostics{cfg.Error(attr, "Cannot read host facts", err.Error())}
	}
	if facts.OS != "windows" {
		return hcl.Diagnostics{cfg.Error(attr, "Not a Windows host",
			fmt.Sprintf("This module manages Windows hosts; this one runs %q.", facts.OS))}
	}
	return nil
}

// hostError turns a failed host operation into a diagnostic at attr. An
// operation the platform lacks says so in the summary, so nobody mistakes
// it for a transient failure.
func hostError(cfg modules.Config, attr, summary string, err error) hcl.Diagnostics {
	if errors.Is(err, host.ErrNotSupported) {
		summary = "Not supported on this platform"
	}
	return hcl.Diagnostics{cfg.Error(attr, summary, err.Error())}
}

// fileProbe words the shared file probe for this package's modules.
func fileProbe(cfg modules.Config, attr string) modutil.FileProbe {
	return modutil.FileProbe{
		Cfg:       cfg,
		Attr:      attr,
		DirDetail: "%s is a directory; this module manages regular files (see win_directory).",
		HostError: func(summary string, err error) hcl.Diagnostics { return hostError(cfg, attr, summary, err) },
	}
}

// statFile stats path and refuses a directory there.
func statFile(ctx context.Context, h host.Host, cfg modules.Config, attr, path string) (host.FileInfo, hcl.Diagnostics) {
	return fileProbe(cfg, attr).Stat(ctx, h, path)
}

// remoteSHA is the hex sha256 of an existing file, "" for a missing one.
func remoteSHA(ctx context.Context, h host.Host, cfg modules.Config, attr, path string, fi host.FileInfo) (string, hcl.Diagnostics) {
	if !fi.Exists {
		return "", nil
	}
	sum, err := h.SHA256(ctx, path)
	if err != nil {
		return "", hostError(cfg, attr, "Cannot read file", err)
	}
	return strings.ToLower(sum), nil
}

// probeFile is statFile and remoteSHA for a plan, in one round trip when
// that settles it (modutil.FileProbe.Probe).
func probeFile(ctx context.Context, h host.Host, cfg modules.Config, attr, path, wantSHA string, wantSize int64) (host.FileInfo, string, hcl.Diagnostics) {
	return fileProbe(cfg, attr).Probe(ctx, h, path, wantSHA, wantSize)
}

// mkParent creates the directory a file goes into.
func mkParent(ctx context.Context, h host.Host, cfg modules.Config, attr, path string) hcl.Diagnostics {
	parent := parentDir(path)
	if isRoot(parent) {
		return nil
	}
	if err := h.MkdirAll(ctx, parent, 0o755); err != nil {
		return hostError(cfg, attr, "Cannot create parent directory", err)
	}
	return nil
}

// boolAttr reads a known bool; null is false.
func boolAttr(cfg modules.Config, name string) (v, ok bool) {
	b := get(cfg, name)
	if !b.IsKnown() || !b.Type().Equals(cty.Bool) {
		return false, false
	}
	return !b.IsNull() && b.True(), true
}
