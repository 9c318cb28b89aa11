package controller

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/controller/run"
	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/payload"
)

// payloadDirVar is the stock playbooks' variable naming the payload
// directory (on the machine running wsu) whose manifest.json version the
// join writes on the Node.
const payloadDirVar = "payload_dir"

// payloadVersions tells which payload version an instance's runs install:
// the version in manifest.json of its payload_dir, the controller's (its
// -var options and var files, resolved once) unless the instance's own vars
// set another. The manifest is read again only when its size or time
// changed, so the check on every pass costs a stat.
type payloadVersions struct {
	dir string // the controller's payload_dir; "" when it sets none

	mu    sync.Mutex
	cache map[string]manifestStamp
}

type manifestStamp struct {
	size    int64
	mod     time.Time
	version string
}

func newPayloadVersions(o Options) (*payloadVersions, error) {
	dir, err := controllerPayloadDir(o.VarFiles, o.Vars)
	if err != nil {
		return nil, err
	}
	return &payloadVersions{dir: dir, cache: map[string]manifestStamp{}}, nil
}

// want is the payload version wi's runs install, "" when no payload_dir is
// set (then nothing is upgraded).
func (p *payloadVersions) want(wi *wsuv1.WindowsInstance) (string, error) {
	dir := p.dir
	if v, ok := wi.Spec.Vars[payloadDirVar]; ok {
		dir = strings.Trim(v, `"`)
	}
	if dir == "" {
		return "", nil
	}
	return p.version(dir)
}

// version reads dir's manifest version, from the cache while the file is
// unchanged.
func (p *payloadVersions) version(dir string) (string, error) {
	file := filepath.Join(dir, payload.ManifestFile)
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("the payload manifest: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.cache[dir]; ok && c.size == fi.Size() && c.mod.Equal(fi.ModTime()) {
		return c.version, nil
	}
	m, err := payload.Load(dir)
	if err != nil {
		return "", err
	}
	p.cache[dir] = manifestStamp{size: fi.Size(), mod: fi.ModTime(), version: m.Version}
	return m.Version, nil
}

// controllerPayloadDir is payload_dir as the controller's runs get it: the
// last var file that sets it, overridden by the last -var that does.
func controllerPayloadDir(varFiles, vars []string) (string, error) {
	dir := ""
	for _, path := range varFiles {
		v, found, err := varFileString(path, payloadDirVar)
		if err != nil {
			return "", err
		}
		if found {
			dir = v
		}
	}
	for _, kv := range vars {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.TrimSpace(k) == payloadDirVar {
			dir = v
		}
	}
	return dir, nil
}

// varFileString reads the string value of name from a var file (literal
// values only, as the engine reads it).
func varFileString(path, name string) (string, bool, error) {
	src, err := limits.ReadFile(path)
	if err != nil {
		return "", false, fmt.Errorf("reading var file %s: %w", path, err)
	}
	file, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return "", false, fmt.Errorf("var file %s: %s", path, run.FirstError(diags))
	}
	attrs, diags := file.Body.JustAttributes()
	if diags.HasErrors() {
		return "", false, fmt.Errorf("var file %s: %s", path, run.FirstError(diags))
	}
	a, ok := attrs[name]
	if !ok {
		return "", false, nil
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
		return "", false, fmt.Errorf("var file %s: %s is not a string", path, name)
	}
	return v.AsString(), true, nil
}
