package modutil

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// FileProbe reads a regular file's state for the file modules of every
// module package (file, win_file, win_copy): one implementation of the
// probe that saves round trips, with diagnostics worded by the package.
type FileProbe struct {
	Cfg modules.Config
	// Attr is the argument the diagnostics point at.
	Attr string
	// DirDetail says, with the path for %s, why a directory found where the
	// file belongs is not the module's to replace or remove.
	DirDetail string
	// HostError turns a failed host operation into a diagnostic at Attr.
	HostError func(summary string, err error) hcl.Diagnostics
}

// Stat stats path and refuses a directory there.
func (p FileProbe) Stat(ctx context.Context, h host.Host, path string) (host.FileInfo, hcl.Diagnostics) {
	fi, err := h.Stat(ctx, path)
	if err != nil {
		return fi, p.HostError("Cannot read file state", err)
	}
	if fi.Exists && fi.IsDir {
		return fi, hcl.Diagnostics{p.Cfg.Error(p.Attr, "Path is a directory", fmt.Sprintf(p.DirDetail, path))}
	}
	return fi, nil
}

// Probe is Stat and the file's sha256 for a plan, in one round trip when
// the file is missing or already holds wantSHA ("" when that does not
// settle it): a sha256 answers only for a regular file, its not-found says
// nothing is there, and the same sha256 means the same size. Otherwise the
// file is stat'ed as well, for its size and mode, or to explain an error
// (a directory, a bad path) exactly as Stat does.
func (p FileProbe) Probe(ctx context.Context, h host.Host, path, wantSHA string, wantSize int64) (host.FileInfo, string, hcl.Diagnostics) {
	sum, err := h.SHA256(ctx, path)
	sum = strings.ToLower(sum)
	switch {
	case err == nil && wantSHA != "" && sum == wantSHA:
		return host.FileInfo{Path: path, Exists: true, Size: wantSize}, sum, nil
	case errors.Is(err, fs.ErrNotExist):
		return host.FileInfo{Path: path}, "", nil
	}
	fi, diags := p.Stat(ctx, h, path)
	switch {
	case diags.HasErrors():
		return fi, "", diags
	case !fi.Exists: // removed in between
		return fi, "", nil
	case err != nil:
		return fi, "", p.HostError("Cannot read file", err)
	}
	return fi, sum, nil
}
