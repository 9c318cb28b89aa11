package generic

import (
	"context"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// PathRules are what the file and directory modules need to know about the
// paths they manage and the hosts those paths are on. The logic of the two
// modules exists once, here; a module package with other rules (win_file and
// win_directory take only Windows paths, on Windows hosts) wraps File and
// Directory with its own PathRules, as win_command wraps command, so the
// modules cannot drift apart.
type PathRules interface {
	// ValidatePath checks the path argument name when it is known.
	ValidatePath(cfg modules.Config, name string) hcl.Diagnostics
	// CheckHost reads the host's facts (one round trip) and refuses a host
	// the path cannot be on. windows says permission bits mean nothing
	// there.
	CheckHost(ctx context.Context, h host.Host, cfg modules.Config, path string) (windows bool, diags hcl.Diagnostics)
	// IsRoot is true for a path never to be removed or created: a root.
	IsRoot(p string) bool
	// ParentDir is the directory holding p; a root is its own parent.
	ParentDir(p string) string
	// HostError turns a failed host operation into a diagnostic at the
	// path argument.
	HostError(cfg modules.Config, summary string, err error) hcl.Diagnostics
	// FileProbe words the shared file probe for the file module.
	FileProbe(cfg modules.Config) modutil.FileProbe
}

// anyPaths are the rules of this package's modules: POSIX or Windows
// absolute paths, on any host that can hold them.
type anyPaths struct{}

var _ PathRules = anyPaths{}

func (anyPaths) ValidatePath(cfg modules.Config, name string) hcl.Diagnostics {
	return validatePath(cfg, name)
}

func (anyPaths) CheckHost(ctx context.Context, h host.Host, cfg modules.Config, path string) (bool, hcl.Diagnostics) {
	return checkHost(ctx, h, cfg, path)
}

func (anyPaths) IsRoot(p string) bool      { return isRoot(p) }
func (anyPaths) ParentDir(p string) string { return parentDir(p) }

func (anyPaths) HostError(cfg modules.Config, summary string, err error) hcl.Diagnostics {
	return hostError(cfg, summary, err)
}

func (anyPaths) FileProbe(cfg modules.Config) modutil.FileProbe {
	return modutil.FileProbe{
		Cfg:       cfg,
		Attr:      "path",
		DirDetail: "%s is a directory; the file module manages regular files (see the directory module).",
		HostError: func(summary string, err error) hcl.Diagnostics { return hostError(cfg, summary, err) },
	}
}

// rulesOr is rules, or this package's own when it is nil.
func rulesOr(rules PathRules) PathRules {
	if rules == nil {
		return anyPaths{}
	}
	return rules
}
