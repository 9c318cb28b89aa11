package windows

import (
	"bytes"
	"context"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/registries"
)

// ContainerdMirrors writes containerd's registry mirror files: one
// hosts.toml per source registry under containerd's config_path, as WMCO
// does on Windows nodes (package registries has the rules), and removes
// the files it wrote earlier for registries no longer mirrored. It is one
// task with one Change, so a handler restarting containerd runs only when
// a file changed.
type ContainerdMirrors struct{}

var (
	_ modules.Module    = ContainerdMirrors{}
	_ modules.Validator = ContainerdMirrors{}
)

// RegistriesDir is containerd's config_path in the stock containerd config.
const RegistriesDir = `C:\k\containerd\registries`

// maxHostsFile bounds a hosts.toml read: they are a few hundred bytes.
const maxHostsFile = 1 << 20

// MirrorType is one mirror entry, the shape k8s_image_mirrors returns.
var MirrorType = cty.Object(map[string]cty.Type{
	"source": cty.String, "mirrors": cty.List(cty.String), "resolve_tags": cty.Bool, "never_contact_source": cty.Bool,
})

var mirrorArgType = cty.ObjectWithOptionalAttrs(map[string]cty.Type{
	"source": cty.String, "mirrors": cty.List(cty.String), "resolve_tags": cty.Bool, "never_contact_source": cty.Bool,
}, []string{"resolve_tags", "never_contact_source"})

// mirrorsShown are the arguments the results come from: never auths.
var mirrorsShown = []string{"mirrors", "dir", "skip_invalid"}

var mirrorsResults = []modules.Attribute{
	{Name: "files", Type: cty.List(cty.String), Description: "The hosts.toml files the mirrors need, sorted.", DerivesFrom: mirrorsShown},
	{Name: "removed", Type: cty.List(cty.String), Description: "Files wsu had written for registries no longer mirrored, removed by this task.", DerivesFrom: mirrorsShown},
	{Name: "skipped", Type: cty.List(cty.String), Description: "Why entries were left out (`skip_invalid`).", DerivesFrom: mirrorsShown},
}

func (ContainerdMirrors) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_containerd_mirrors",
		Summary: "Write containerd's registry mirror files (hosts.toml per source registry) on a Windows host.",
		Description: "containerd mirrors whole registries: for each source registry it reads " +
			"`<dir>\\<registry>\\hosts.toml` (`host:port` becomes `host_port_`, as containerd looks " +
			"for it on Windows), where `dir` is its `config_path`. The entries are merged per registry " +
			"as WMCO does (a mirror allowed to resolve tags wins over the same mirror that is not; " +
			"`never_contact_source` wins), and each mirror is recorded without the source's " +
			"repository path, which containerd appends itself. So a mirror must end with the " +
			"source's path: for `mcr.microsoft.com/oss/kubernetes/pause` a mirror is " +
			"`$registry/[org/]oss/kubernetes/pause`; any other is refused (or, with `skip_invalid`, " +
			"left out with a warning). Files carry a marker line; a marked file for a registry no " +
			"longer listed is removed, with its directory when that is then empty; files without " +
			"the marker are someone else's and stay. The task changes only when a file's content " +
			"does, so `notify` a containerd restart on it.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "mirrors", Type: cty.List(mirrorArgType), Required: true,
				Description: "Entries `{ source, mirrors, resolve_tags, never_contact_source }`: `source` a registry or repository (`quay.io`, `mcr.microsoft.com/oss/kubernetes/pause`), `mirrors` the repositories mirroring it, tried in order; `resolve_tags` (default false) lets the mirrors resolve tags (an ImageTagMirrorSet; without it they serve pulls by digest only); `never_contact_source` (default false) makes pulls fail rather than reach the source. `[]` removes every file wsu wrote."},
			{Name: "dir", Type: cty.String, Default: cty.StringVal(RegistriesDir),
				Description: "containerd's `config_path` (`[plugins.\"io.containerd.grpc.v1.cri\".registry]`)."},
			{Name: "auths", Type: cty.Map(cty.String), Sensitive: true,
				Description: "Registry credentials by registry host (`host[:port]`), as a pull secret's `.dockerconfigjson` keys them under `auths`: each the base64 of `user:password`. A mirror (or a mirror serving as the fallback server) on a host listed gets an `Authorization: Basic` header in its `hosts.toml` (containerd's per-host `header` table). Such a file is a credential: its content is never shown in a plan (the field is sensitive, as is one that held a header before), and its ACL is held to SYSTEM and Administrators after each write."},
			{Name: "skip_invalid", Type: cty.Bool, Default: cty.False,
				Description: "Leave out, with a warning, entries containerd cannot use (a mirror not ending with the source's path) instead of failing: mirror sets read from a cluster often hold entries meant for Linux nodes only."},
		},
		Results: mirrorsResults,
		Example: `task "registry mirrors" {
  win_containerd_mirrors {
    mirrors = [{ source = "mcr.microsoft.com/oss/kubernetes/pause", mirrors = ["mirror.example:5000/windows/oss/kubernetes/pause"], resolve_tags = true }]
  }
  notify = ["restart containerd"]
}`,
	}
}

// mirrorEntries decodes the mirrors argument; ok is false while any part
// is unknown.
func mirrorEntries(v cty.Value) (out []registries.Entry, ok bool) {
	if !v.IsWhollyKnown() {
		return nil, false
	}
	if v.IsNull() {
		return nil, true
	}
	for _, el := range v.AsValueSlice() {
		e := registries.Entry{}
		e.Source, _ = str(el.GetAttr("source"))
		e.Mirrors, _ = strList(el.GetAttr("mirrors"))
		e.ResolveTags = trueAttr(el, "resolve_tags")
		e.NeverContactSource = trueAttr(el, "never_contact_source")
		out = append(out, e)
	}
	return out, true
}

func trueAttr(obj cty.Value, name string) bool {
	if !obj.Type().HasAttribute(name) {
		return false
	}
	v := obj.GetAttr(name)
	return v.IsKnown() && !v.IsNull() && v.True()
}

func (ContainerdMirrors) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validatePath(cfg, "dir")
	entries, ok := mirrorEntries(get(cfg, "mirrors"))
	skip, known := boolAttr(cfg, "skip_invalid")
	if !ok || !known || skip {
		return diags
	}
	for _, e := range entries {
		if err := registries.Check(e); err != nil {
			diags = append(diags, cfg.Error("mirrors", "Mirror containerd cannot use", err.Error()))
		}
	}
	return diags
}

// mirrorFiles is the directory's state and what the task makes of it.
type mirrorFiles struct {
	want    map[string][]byte // path → content
	secret  map[string]bool   // path → want holds credentials
	have    map[string][]byte // path → content, for the wanted and the stale
	stale   []string          // marked files no longer wanted
	paths   []string          // wanted, sorted
	skipped []string
	warns   hcl.Diagnostics
}

func hostsPath(dir, registry string) string {
	return strings.TrimRight(dir, `\/`) + `\` + registries.Dir(registry) + `\hosts.toml`
}

// desired renders the files the entries need.
func desired(cfg modules.Config, dir string, entries []registries.Entry, auths registries.Auths, skip bool) (*mirrorFiles, hcl.Diagnostics) {
	f := &mirrorFiles{want: map[string][]byte{}, secret: map[string]bool{}, have: map[string][]byte{}}
	var good []registries.Entry
	for _, e := range entries {
		if err := registries.Check(e); err != nil {
			if !skip {
				return nil, hcl.Diagnostics{cfg.Error("mirrors", "Mirror containerd cannot use", err.Error())}
			}
			f.skipped = append(f.skipped, err.Error())
			f.warns = append(f.warns, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Mirror left out",
				Detail: err.Error() + " (skip_invalid: the other entries are written).", Subject: cfg.Range("mirrors")})
			continue
		}
		good = append(good, e)
	}
	for _, r := range registries.Merge(good) {
		p := hostsPath(dir, r.Host)
		f.want[p], f.secret[p] = r.RenderAuth(auths)
		f.paths = append(f.paths, p)
	}
	return f, nil
}

// readCurrent reads the wanted files and finds wsu's stale ones.
func (f *mirrorFiles) readCurrent(ctx context.Context, h host.Host, cfg modules.Config, dir string) hcl.Diagnostics {
	for _, p := range f.paths {
		content, exists, diags := readSmall(ctx, h, cfg, p)
		if diags.HasErrors() {
			return diags
		}
		if exists {
			f.have[p] = content
		}
	}
	fi, err := h.Stat(ctx, dir)
	if err != nil {
		return hostError(cfg, "dir", "Cannot read the registries directory", err)
	}
	if !fi.Exists {
		return nil
	}
	ents, err := h.ReadDir(ctx, dir, 0)
	if err != nil {
		return hostError(cfg, "dir", "Cannot list the registries directory", err)
	}
	for _, e := range ents {
		p := strings.TrimRight(dir, `\/`) + `\` + e.Name + `\hosts.toml`
		if _, wanted := f.want[p]; wanted || !e.IsDir {
			continue
		}
		content, exists, diags := readSmall(ctx, h, cfg, p)
		if diags.HasErrors() {
			return diags
		}
		if exists && bytes.HasPrefix(content, []byte(registries.Marker)) {
			f.have[p] = content
			f.stale = append(f.stale, p)
		}
	}
	return nil
}

// readSmall reads a file that may be missing.
func readSmall(ctx context.Context, h host.Host, cfg modules.Config, p string) ([]byte, bool, hcl.Diagnostics) {
	fi, diags := statFile(ctx, h, cfg, "dir", p)
	if diags.HasErrors() || !fi.Exists {
		return nil, false, diags
	}
	content, err := h.ReadFile(ctx, p, maxHostsFile)
	if err != nil {
		return nil, false, hostError(cfg, "dir", "Cannot read "+p, err)
	}
	return content, true, nil
}

// change is the Change the files need, nil when none.
func (f *mirrorFiles) change(dir string) *modules.Change {
	var fields []modules.FieldChange
	for _, p := range f.paths {
		old, exists := f.have[p]
		if exists && bytes.Equal(old, f.want[p]) {
			continue
		}
		oldV := cty.NullVal(cty.String)
		if exists {
			oldV = cty.StringVal(string(old))
		}
		fields = append(fields, modules.FieldChange{Name: relName(dir, p), Old: oldV, New: cty.StringVal(string(f.want[p])),
			Sensitive: f.secret[p] || holdsCredential(old)})
	}
	for _, p := range f.stale {
		fields = append(fields, modules.FieldChange{Name: relName(dir, p), Old: cty.StringVal(string(f.have[p])), New: cty.NullVal(cty.String),
			Sensitive: holdsCredential(f.have[p])})
	}
	if len(fields) == 0 {
		return nil
	}
	return &modules.Change{Action: modules.Update, Subject: dir, Fields: fields}
}

// holdsCredential says a hosts.toml wsu wrote carries a header with
// credentials.
func holdsCredential(content []byte) bool { return bytes.Contains(content, []byte("Authorization")) }

func relName(dir, p string) string { return strings.TrimPrefix(p, strings.TrimRight(dir, `\/`)+`\`) }

func (f *mirrorFiles) result() cty.Value {
	return result(mirrorsResults, map[string]cty.Value{
		"files": listVal(f.paths), "removed": listVal(f.stale), "skipped": listVal(f.skipped),
	})
}

// read works out the wanted files and the host's, for Plan and Apply alike.
func (ContainerdMirrors) read(ctx context.Context, h host.Host, cfg modules.Config) (*mirrorFiles, hcl.Diagnostics) {
	dir, _ := str(get(cfg, "dir"))
	skip, _ := boolAttr(cfg, "skip_invalid")
	entries, _ := mirrorEntries(get(cfg, "mirrors"))
	auths := authsArg(get(cfg, "auths"))
	if diags := onWindows(ctx, h, cfg, "dir"); diags.HasErrors() {
		return nil, diags
	}
	f, diags := desired(cfg, dir, entries, auths, skip)
	if diags.HasErrors() {
		return nil, diags
	}
	if diags := f.readCurrent(ctx, h, cfg, dir); diags.HasErrors() {
		return nil, diags
	}
	return f, nil
}

func (m ContainerdMirrors) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "mirrors", "dir", "skip_invalid", "auths"); diags.HasErrors() {
		dir, ok := str(get(cfg, "dir"))
		if !ok {
			dir = knownAfterApply
		}
		return modules.PlanResponse{Result: unknownResult(mirrorsResults), Change: &modules.Change{Action: modules.Update, Subject: dir}}
	}
	f, diags := m.read(ctx, req.Host, cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(mirrorsResults), Diagnostics: diags}
	}
	dir, _ := str(get(cfg, "dir"))
	return modules.PlanResponse{Result: f.result(), Change: f.change(dir), Diagnostics: f.warns}
}

func (m ContainerdMirrors) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	h := req.Host
	f, diags := m.read(ctx, h, cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(mirrorsResults), Diagnostics: diags}
	}
	for _, p := range f.paths {
		if old, ok := f.have[p]; ok && bytes.Equal(old, f.want[p]) {
			continue
		}
		if diags := mkParent(ctx, h, cfg, "dir", p); diags.HasErrors() {
			return modules.ApplyResponse{Result: f.result(), Diagnostics: diags}
		}
		if err := h.WriteFile(ctx, p, bytes.NewReader(f.want[p]), 0o644); err != nil {
			return modules.ApplyResponse{Result: f.result(), Diagnostics: hostError(cfg, "dir", "Cannot write "+p, err)}
		}
		if f.secret[p] {
			if err := h.SetFileACL(ctx, p, host.AdminsOnlyACL()); err != nil {
				return modules.ApplyResponse{Result: f.result(), Diagnostics: hostError(cfg, "dir", "Cannot restrict the ACL of "+p, err)}
			}
		}
	}
	for _, p := range f.stale {
		if diags := removeHostsFile(ctx, h, cfg, p); diags.HasErrors() {
			return modules.ApplyResponse{Result: f.result(), Diagnostics: diags}
		}
	}
	return modules.ApplyResponse{Result: f.result(), Diagnostics: f.warns}
}

// removeHostsFile removes a stale hosts.toml, and its directory when
// nothing else is left in it.
func removeHostsFile(ctx context.Context, h host.Host, cfg modules.Config, p string) hcl.Diagnostics {
	if err := h.Remove(ctx, p, false); err != nil {
		return hostError(cfg, "dir", "Cannot remove "+p, err)
	}
	parent := parentDir(p)
	left, err := h.ReadDir(ctx, parent, 1)
	if err != nil {
		return hostError(cfg, "dir", "Cannot list "+parent, err)
	}
	if len(left) == 0 {
		if err := h.Remove(ctx, parent, false); err != nil {
			return hostError(cfg, "dir", "Cannot remove "+parent, err)
		}
	}
	return nil
}

// authsArg decodes auths: null or an unknown value is none.
func authsArg(v cty.Value) registries.Auths {
	if v.IsNull() || !v.IsWhollyKnown() {
		return nil
	}
	out := registries.Auths{}
	for k, a := range v.AsValueMap() {
		if s, ok := str(a); ok {
			out[k] = s
		}
	}
	return out
}
