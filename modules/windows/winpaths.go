package windows

import (
	"context"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
	"github.com/wsu-project/wsu/modules/modutil"
)

// winPaths are the path rules win_file and win_directory give the generic
// file and directory modules they wrap: absolute Windows paths only, on a
// Windows host only, with drive and share roots as roots.
type winPaths struct{}

var _ generic.PathRules = winPaths{}

func (winPaths) ValidatePath(cfg modules.Config, name string) hcl.Diagnostics {
	return validatePath(cfg, name)
}

// CheckHost is onWindows: one Facts round trip, as for every module here.
func (winPaths) CheckHost(ctx context.Context, h host.Host, cfg modules.Config, _ string) (bool, hcl.Diagnostics) {
	return true, onWindows(ctx, h, cfg, "path")
}

func (winPaths) IsRoot(p string) bool      { return isRoot(p) }
func (winPaths) ParentDir(p string) string { return parentDir(p) }

func (winPaths) HostError(cfg modules.Config, summary string, err error) hcl.Diagnostics {
	return hostError(cfg, "path", summary, err)
}

func (winPaths) FileProbe(cfg modules.Config) modutil.FileProbe { return fileProbe(cfg, "path") }

// withoutMode is cfg with a null mode: Windows has no permission bits, so
// the Windows modules have no mode argument, and the generic module they
// wrap reads one.
func withoutMode(cfg modules.Config) modules.Config {
	if !cfg.Value.IsKnown() || cfg.Value.IsNull() {
		return cfg
	}
	obj, marks := cfg.Value.Unmark() // the arguments keep their own marks
	vals := obj.AsValueMap()
	if vals == nil {
		vals = map[string]cty.Value{}
	}
	vals["mode"] = cty.NullVal(cty.String)
	cfg.Value = cty.ObjectVal(vals).WithMarks(marks)
	return cfg
}

// windowsAttributes are a generic module's arguments for its Windows
// wrapper: no mode, and the descriptions in descs (by argument name) in
// place of the generic ones.
func windowsAttributes(attrs []modules.Attribute, descs map[string]string) []modules.Attribute {
	out := make([]modules.Attribute, 0, len(attrs))
	for _, a := range attrs {
		if a.Name == "mode" {
			continue
		}
		if d, ok := descs[a.Name]; ok {
			a.Description = d
		}
		out = append(out, a)
	}
	return out
}
