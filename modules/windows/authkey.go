package windows

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/modutil"
)

// AuthorizedKey adds or removes public keys in a Windows OpenSSH
// authorized keys file, and gives the file the ACL sshd demands of it. It
// is Ansible's authorized_key for Windows: keys are matched by type and
// key material (options and comments do not count), lines it does not
// manage (comments, other keys) are kept unless exclusive, and the file's
// line endings are kept.
type AuthorizedKey struct{}

var (
	_ modules.Module    = AuthorizedKey{}
	_ modules.Validator = AuthorizedKey{}
)

// AdminKeysFile is where Windows OpenSSH reads the keys of members of
// Administrators (sshd_config: Match Group administrators,
// AuthorizedKeysFile __PROGRAMDATA__/ssh/administrators_authorized_keys).
const AdminKeysFile = `C:\ProgramData\ssh\administrators_authorized_keys`

// maxKeysFile bounds the file read: authorized keys are a few KiB.
const maxKeysFile = 1 << 20

var authKeyResults = []modules.Attribute{
	{Name: "path", Type: cty.String, Description: "The file."},
	{Name: "fingerprints", Type: cty.List(cty.String), Description: "SHA256 fingerprints of every key in the file afterwards, in file order."},
}

func (AuthorizedKey) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_authorized_key",
		Summary: "Add or remove SSH public keys in a Windows OpenSSH authorized keys file, with the ACL sshd requires.",
		Description: "Manages keys in `path` (by default " + "`" + AdminKeysFile + "`" + ", the file Windows " +
			"OpenSSH reads for members of Administrators). A key is matched by its type and key material, " +
			"whatever its options or comment; lines not naming a managed key stay as they are, unless " +
			"`exclusive`. With `acl = \"administrators\"` (the default) the file gets the ACL sshd " +
			"insists on for that file, set through the agent's security calls (no icacls): owner " +
			"Administrators, inheritance off, full control for SYSTEM and Administrators and nobody else; " +
			"sshd ignores the file otherwise. The ACL is set again after every write, because a write " +
			"replaces the file and a new file inherits its directory's ACL. A missing file is created " +
			"(with its directory). A UTF-16 file (what PowerShell 5's `>` writes) is refused: sshd " +
			"cannot read it either.",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "key", Type: cty.String, Required: true,
				Description: "One or more public keys, one per line, in authorized_keys form (`ssh-ed25519 AAAA... comment`, options allowed)."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` adds the keys missing from the file, `\"absent\"` removes every line holding one of them."},
			{Name: "exclusive", Type: cty.Bool, Default: cty.False,
				Description: "With `state = \"present\"`, remove every other key from the file (comments stay)."},
			{Name: "path", Type: cty.String, Default: cty.StringVal(AdminKeysFile),
				Description: "The authorized keys file."},
			{Name: "acl", Type: cty.String, Default: cty.StringVal("administrators"),
				Description: "`\"administrators\"`: owner Administrators, protected, full control for SYSTEM and Administrators only; `\"keep\"`: leave the ACL alone (a user's own `.ssh\\authorized_keys`)."},
		},
		Results: authKeyResults,
		Example: `task "new_key" {
  win_authorized_key {
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... wsu-2026"
  }
}`,
	}
}

func (AuthorizedKey) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateEnum(cfg, "state", "present", "absent")
	diags = append(diags, validateEnum(cfg, "acl", "administrators", "keep")...)
	diags = append(diags, validatePath(cfg, "path")...)
	if text, ok := str(get(cfg, "key")); ok {
		if _, err := parseKeys(text); err != nil {
			diags = append(diags, cfg.Error("key", "Invalid public key", err.Error()))
		}
	}
	if ex, ok := boolAttr(cfg, "exclusive"); ok && ex {
		if state, ok := str(get(cfg, "state")); ok && state == "absent" {
			diags = append(diags, cfg.Error("exclusive", "exclusive needs state = \"present\"",
				"exclusive keeps only the given keys; with state = \"absent\" it would empty the file."))
		}
	}
	return diags
}

// wantedKey is one key the task names.
type wantedKey struct {
	line string // as given
	key  gossh.PublicKey
}

// parseKeys reads the key argument: non-blank lines, each a public key.
func parseKeys(text string) ([]wantedKey, error) {
	var out []wantedKey
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(l))
		if err != nil {
			return nil, fmt.Errorf("line %d is not an authorized_keys line (%v); give public keys such as \"ssh-ed25519 AAAA... comment\"", i+1, err)
		}
		out = append(out, wantedKey{line: l, key: k})
	}
	if len(out) == 0 {
		return nil, errors.New("no public key given")
	}
	return out, nil
}

// keysFile is the file's state and what the task makes of it.
type keysFile struct {
	exists  bool
	content []byte
	newText []byte
	added   []string // fingerprints
	removed []string
	after   []string // fingerprints in the file afterwards
	acl     *host.ACL
	needACL bool
}

func sameKey(a, b gossh.PublicKey) bool { return bytes.Equal(a.Marshal(), b.Marshal()) }

func lineKey(l string) gossh.PublicKey {
	t := strings.TrimSpace(l)
	if t == "" || strings.HasPrefix(t, "#") {
		return nil
	}
	k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(t))
	if err != nil {
		return nil
	}
	return k
}

// edit computes the new content: keys removed or added, line endings kept.
func (f *keysFile) edit(file modutil.Lines, keys []wantedKey, present, exclusive bool) {
	lines := file.Lines
	wanted := func(k gossh.PublicKey) bool {
		for _, w := range keys {
			if sameKey(w.key, k) {
				return true
			}
		}
		return false
	}
	var kept []gossh.PublicKey
	var out []string
	for _, l := range lines {
		k := lineKey(l)
		drop := k != nil && ((!present && wanted(k)) || (present && exclusive && !wanted(k)))
		if drop {
			f.removed = append(f.removed, gossh.FingerprintSHA256(k))
			continue
		}
		if k != nil {
			kept = append(kept, k)
		}
		out = append(out, l)
	}
	if present {
		for _, w := range keys {
			if !containsKey(kept, w.key) {
				out = append(out, w.line)
				kept = append(kept, w.key)
				f.added = append(f.added, gossh.FingerprintSHA256(w.key))
			}
		}
	}
	for _, k := range kept {
		f.after = append(f.after, gossh.FingerprintSHA256(k))
	}
	if len(f.added) > 0 || len(f.removed) > 0 {
		file.Lines = out
		f.newText = file.Bytes()
	}
}

func containsKey(list []gossh.PublicKey, k gossh.PublicKey) bool {
	for _, x := range list {
		if sameKey(x, k) {
			return true
		}
	}
	return false
}

// read loads the file, its ACL, and what the task would change.
func (AuthorizedKey) read(ctx context.Context, h host.Host, cfg modules.Config) (*keysFile, hcl.Diagnostics) {
	path, _ := str(get(cfg, "path"))
	state, _ := str(get(cfg, "state"))
	aclMode, _ := str(get(cfg, "acl"))
	exclusive, _ := boolAttr(cfg, "exclusive")
	text, _ := str(get(cfg, "key"))
	keys, err := parseKeys(text)
	if err != nil {
		return nil, hcl.Diagnostics{cfg.Error("key", "Invalid public key", err.Error())}
	}
	fi, diags := statFile(ctx, h, cfg, "path", path)
	if diags.HasErrors() {
		return nil, diags
	}
	f := &keysFile{exists: fi.Exists}
	if fi.Exists {
		if f.content, err = h.ReadFile(ctx, path, maxKeysFile); err != nil {
			return nil, hostError(cfg, "path", "Cannot read the authorized keys file", err)
		}
	}
	file, err := modutil.ParseLines(f.content)
	if err != nil {
		return nil, hcl.Diagnostics{cfg.Error("path", "The authorized keys file is UTF-16",
			fmt.Sprintf("%s starts with a UTF-16 byte order mark (PowerShell 5's > writes that); sshd cannot read it, so its keys do not work now. Rewrite it as UTF-8 or ASCII, then run again.", path))}
	}
	f.edit(file, keys, state == "present", exclusive)
	if aclMode == "administrators" && (f.exists || f.newText != nil) {
		f.needACL = true
		if f.exists && f.newText == nil {
			acl, err := h.FileACL(ctx, path)
			if err != nil {
				return nil, hostError(cfg, "acl", "Cannot read the file's ACL", err)
			}
			f.acl = &acl
			f.needACL = !acl.Satisfies(host.AdminsOnlyACL())
		}
	}
	return f, nil
}

func (m AuthorizedKey) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "key", "state", "path", "acl", "exclusive"); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(authKeyResults), Change: &modules.Change{Action: modules.Update, Subject: knownAfterApply}}
	}
	if diags := onWindows(ctx, req.Host, cfg, "path"); diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(authKeyResults), Diagnostics: diags}
	}
	f, diags := m.read(ctx, req.Host, cfg)
	if diags.HasErrors() {
		return modules.PlanResponse{Result: unknownResult(authKeyResults), Diagnostics: diags}
	}
	path, _ := str(get(cfg, "path"))
	res := result(authKeyResults, map[string]cty.Value{"path": cty.StringVal(path), "fingerprints": listVal(f.after)})
	if f.newText == nil && !f.needACL {
		return modules.PlanResponse{Result: res}
	}
	ch := &modules.Change{Action: modules.Update, Subject: path}
	if !f.exists {
		ch.Action = modules.Create
	}
	if len(f.added) > 0 {
		ch.Fields = append(ch.Fields, modules.FieldChange{Name: "keys added", Old: cty.NullVal(cty.List(cty.String)), New: listVal(f.added)})
	}
	if len(f.removed) > 0 {
		ch.Fields = append(ch.Fields, modules.FieldChange{Name: "keys removed", Old: listVal(f.removed), New: cty.NullVal(cty.List(cty.String))})
	}
	if f.needACL {
		old := cty.NullVal(cty.String)
		if f.acl != nil {
			old = cty.StringVal(f.acl.String())
		} else if f.exists {
			old = cty.StringVal("(replaced by the write: inherited)")
		}
		ch.Fields = append(ch.Fields, modules.FieldChange{Name: "acl", Old: old, New: cty.StringVal(host.AdminsOnlyACL().String())})
	}
	return modules.PlanResponse{Result: res, Change: ch}
}

func (m AuthorizedKey) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	h := req.Host
	f, diags := m.read(ctx, h, cfg)
	if diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(authKeyResults), Diagnostics: diags}
	}
	path, _ := str(get(cfg, "path"))
	res := result(authKeyResults, map[string]cty.Value{"path": cty.StringVal(path), "fingerprints": listVal(f.after)})
	if f.newText != nil {
		if diags := mkParent(ctx, h, cfg, "path", path); diags.HasErrors() {
			return modules.ApplyResponse{Result: res, Diagnostics: diags}
		}
		if err := h.WriteFile(ctx, path, bytes.NewReader(f.newText), 0o644); err != nil {
			return modules.ApplyResponse{Result: res, Diagnostics: hostError(cfg, "path", "Cannot write the authorized keys file", err)}
		}
	}
	if f.needACL {
		if err := h.SetFileACL(ctx, path, host.AdminsOnlyACL()); err != nil {
			summary := "Cannot set the file's ACL"
			if errors.Is(err, fs.ErrNotExist) {
				summary = "The file vanished before its ACL was set"
			}
			return modules.ApplyResponse{Result: res, Diagnostics: hostError(cfg, "acl", summary, err)}
		}
	}
	return modules.ApplyResponse{Result: res}
}
