// Package generic holds the modules that work on any host, whatever its OS:
// file, directory, command, assert and print.
package generic

import (
	"context"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// Modules returns every module of this package.
func Modules() []modules.Module {
	return []modules.Module{File{}, Directory{}, Command{}, Assert{}, Print{}, SSHKeyCheck{}}
}

// knownAfterApply is the Subject of a change whose target is not known yet.
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
)

// isAbsPath accepts POSIX (/x), drive (C:\x, C:/x) and UNC (\\server\share)
// absolute paths whatever OS wsu itself runs on: the host may differ.
func isAbsPath(p string) bool {
	return strings.HasPrefix(p, "/") || isWindowsPath(p)
}

// isWindowsPath is true for drive-letter and UNC absolute paths.
func isWindowsPath(p string) bool {
	if strings.HasPrefix(p, `\\`) {
		return true
	}
	if len(p) < 3 || p[1] != ':' || (p[2] != '\\' && p[2] != '/') {
		return false
	}
	c := p[0] | 0x20 // ASCII lower case
	return c >= 'a' && c <= 'z'
}

// isRoot is true for "/", "C:\" and "C:/": never something to delete.
func isRoot(p string) bool {
	p = strings.TrimRight(p, `/\`)
	return p == "" || (len(p) == 2 && p[1] == ':' && isWindowsPath(p+`\`))
}

// parentDir returns the directory holding p, using either separator since
// the host's OS decides which one p uses. A root is its own parent.
func parentDir(p string) string {
	trimmed := strings.TrimRight(p, `/\`)
	if isRoot(p) {
		return p
	}
	i := strings.LastIndexAny(trimmed, `/\`)
	switch {
	case i < 0:
		return "."
	case i == 0:
		return trimmed[:1] // "/"
	case i == 2 && trimmed[1] == ':':
		return trimmed[:3] // "C:\"
	}
	return trimmed[:i]
}

// parseMode reads a permission string such as "0644" or "755".
func parseMode(s string) (fs.FileMode, error) {
	if len(s) < 3 || len(s) > 4 {
		return 0, fmt.Errorf("mode %q must be three or four octal digits, like \"0644\"", s)
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q is not an octal number", s)
	}
	if n > 0o777 {
		return 0, fmt.Errorf("mode %q sets setuid, setgid or sticky bits, which are not supported", s)
	}
	return fs.FileMode(n), nil
}

// formatMode is the canonical form plans show, so "644" and "0644" agree.
func formatMode(m fs.FileMode) string { return fmt.Sprintf("%04o", uint32(m.Perm())) }

// validatePath checks an absolute-path attribute when it is known.
func validatePath(cfg modules.Config, name string) hcl.Diagnostics {
	p, ok := str(get(cfg, name))
	switch {
	case !ok:
		return nil
	case p == "":
		return hcl.Diagnostics{cfg.Error(name, "Empty path", name+" must not be empty.")}
	case !isAbsPath(p):
		return hcl.Diagnostics{cfg.Error(name, "Relative path",
			fmt.Sprintf("%s must be absolute (like /etc/wsu or C:\\wsu), got %q.", name, p))}
	}
	return nil
}

// validateMode checks the mode attribute when it is known and set.
func validateMode(cfg modules.Config) hcl.Diagnostics {
	s, ok := str(get(cfg, "mode"))
	if !ok {
		return nil
	}
	if _, err := parseMode(s); err != nil {
		return hcl.Diagnostics{cfg.Error("mode", "Invalid mode", err.Error()+".")}
	}
	return nil
}

// validateState checks that state is present or absent.
func validateState(cfg modules.Config) hcl.Diagnostics {
	s, ok := str(get(cfg, "state"))
	if !ok || s == "present" || s == "absent" {
		return nil
	}
	return hcl.Diagnostics{cfg.Error("state", "Invalid state",
		fmt.Sprintf("state must be \"present\" or \"absent\", got %q.", s))}
}

// modeConfig is the decoded mode attribute.
type modeConfig struct {
	set   bool // not null (possibly unknown)
	known bool
	mode  fs.FileMode
}

func decodeMode(cfg modules.Config) modeConfig {
	v := get(cfg, "mode")
	mc := modeConfig{set: !isNull(v)}
	if s, ok := str(v); ok {
		if m, err := parseMode(s); err == nil {
			mc.known, mc.mode = true, m
		}
	}
	return mc
}

// value is what a plan shows as the mode's new value.
func (mc modeConfig) value() cty.Value {
	if !mc.known {
		return cty.UnknownVal(cty.String)
	}
	return cty.StringVal(formatMode(mc.mode))
}

// checkHost reads the host's facts and rejects a Windows path on a host that
// would read it as a relative name (a file literally called `C:\x`).
// windows says permission bits mean nothing on the host.
func checkHost(ctx context.Context, h host.Host, cfg modules.Config, path string) (windows bool, diags hcl.Diagnostics) {
	facts, err := h.Facts(ctx)
	if err != nil {
		return false, hcl.Diagnostics{cfg.Error("path", "Cannot read host facts", err.Error())}
	}
	windows = facts.OS == "windows"
	if !windows && isWindowsPath(path) {
		return false, hcl.Diagnostics{cfg.Error("path", "Windows path on a non-Windows host",
			fmt.Sprintf("%q is a Windows path but the host runs %s.", path, facts.OS))}
	}
	return windows, nil
}

// hostError turns a failed host operation into a diagnostic at the path.
func hostError(cfg modules.Config, summary string, err error) hcl.Diagnostics {
	return hcl.Diagnostics{cfg.Error("path", summary, err.Error())}
}

// modeIgnored warns, once per plan, that Windows has no permission bits, so
// a mode there could never converge.
func modeIgnored(cfg modules.Config) *hcl.Diagnostic {
	return &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  "mode ignored on Windows",
		Detail:   "Windows has no POSIX permission bits; mode is not applied.",
		Subject:  cfg.Range("mode"),
	}
}

// validText makes process output safe for a cty string, which must be UTF-8.
func validText(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// tail returns at most n bytes from the end of s, cut at a rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return "…" + s
}
