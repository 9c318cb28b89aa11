// Package planfile saves a plan (`wsu plan -out FILE`) and tells whether a
// fresh plan still matches it, so `wsu apply FILE` applies exactly what was
// reviewed or refuses, saying what changed.
package planfile

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wsu-project/wsu/limits"
)

// FormatVersion is bumped when the file's meaning changes. 2: every hash
// is an HMAC-SHA256 keyed with the plan's Salt (1 held plain SHA-256s, from
// which a short secret could be guessed with a table made once for all
// plans). 3: the file also carries a checksum of its content (Checksum),
// which Load verifies.
const FormatVersion = 3

// SaltBytes is the length of a plan's Salt.
const SaltBytes = 32

// Plan is the saved form. It holds the inputs needed to plan again and the
// fingerprints of what was planned; sensitive values appear only as keyed
// hashes, except -var values, which are stored as given (the file is
// written 0600).
type Plan struct {
	FormatVersion int    `json:"format_version"`
	WSUVersion    string `json:"wsu_version"`
	// Salt (hex, SaltBytes random bytes, new for every plan) keys every
	// hash below (HMAC-SHA256): the same value hashes differently in
	// each plan, so no table made in advance guesses a value from its
	// hash, and two plans do not show that they hold the same secret.
	// Apply hashes its fresh plan with the saved plan's salt to compare.
	Salt string `json:"salt"`
	// Dir is the directory the plan was made in: relative paths in the
	// inputs are relative to it (see CheckDir).
	Dir string `json:"dir,omitempty"`

	// Inputs are recorded as given, so apply plans again with exactly them.
	Inputs

	// Sources maps every playbook, var file and inventory file read, and
	// every file the file functions read while planning, to its keyed hash.
	Sources map[string]string `json:"sources"`
	Hosts   map[string]*Host  `json:"hosts"`

	// Checksum is the sha256 of the rest of the plan (its JSON with this
	// field empty), set by Save and checked by Load: a plan edited after
	// it was saved (a status, a shown change) is refused by show and
	// apply alike. It guards against edits and damage, not a forger who
	// recomputes it: against that, apply also compares what the saved
	// plan shows with what it plans now (Stale).
	Checksum string `json:"checksum"`
}

// checksum is p's Checksum: the sha256 of p's JSON without it.
func (p *Plan) checksum() (string, error) {
	c := *p
	c.Checksum = ""
	data, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Inputs are what a run was asked to do: the one list of inputs a saved plan
// records and a later apply restores. Every face (CLI, Job, controller)
// fills it; package setup turns it into an engine request.
type Inputs struct {
	// Playbook is a file path, or wsu:NAME for a stock playbook.
	Playbook  string `json:"playbook"`
	Inventory string `json:"inventory,omitempty"`
	// MoreInventories are the further -i sources, merged over Inventory
	// in order (see InventorySources).
	MoreInventories []string `json:"more_inventories,omitempty"`
	VarFiles        []string `json:"var_files,omitempty"`
	// JoinConfig is --join-config: a kubeadm JoinConfiguration read into
	// join's variables (the path only: its token is not saved; its
	// content's hash is among the sources).
	JoinConfig string   `json:"join_config,omitempty"`
	Vars       []string `json:"vars,omitempty"`
	// SensitiveVars name the -var options not saved because their
	// variable is declared sensitive: apply takes them again (-var or
	// WSU_VAR_), and the plan's value hashes prove they are the same.
	SensitiveVars []string `json:"sensitive_vars,omitempty"`
	// HostVars are --host-var NAME=VALUE options: an inventory variable
	// set on every host, over the inventory's own value (a BYOH ConfigMap
	// has no room for a port or a known_hosts file).
	HostVars []string `json:"host_vars,omitempty"`
	Limit    string   `json:"limit,omitempty"`
	Tags     []string `json:"tags,omitempty"`
	SkipTags []string `json:"skip_tags,omitempty"`
	// StartAtTask is --start-at-task.
	StartAtTask string `json:"start_at_task,omitempty"`
	Local       bool   `json:"local,omitempty"`
	// Kubeconfig and KubeContext are --kubeconfig and --context: the
	// cluster the plan read is the one apply acts on.
	Kubeconfig  string `json:"kubeconfig,omitempty"`
	KubeContext string `json:"kube_context,omitempty"`
}

// InventorySources are every -i source in the order given.
func (in Inputs) InventorySources() []string {
	var out []string
	if in.Inventory != "" {
		out = append(out, in.Inventory)
	}
	return append(out, in.MoreInventories...)
}

// Host is what was planned for one host.
type Host struct {
	// Vars maps variable address (file:name) to a keyed hash of its value.
	Vars  map[string]string `json:"vars"`
	Tasks []Task            `json:"tasks"`
}

// Task is one planned task outcome.
type Task struct {
	Address     string `json:"address"`
	Status      string `json:"status"`
	Summary     string `json:"summary"`
	Fingerprint string `json:"fingerprint"`
	// Module and Change are the task's module and its change as the plan
	// showed it (secrets already hidden), for `wsu show`; the comparison
	// with a fresh plan reads only the fingerprint. Empty in plans saved
	// before wsu recorded them.
	Module string  `json:"module,omitempty"`
	Change *Change `json:"change,omitempty"`
}

// Change is a module's change rendered for display (engine.ChangeView):
// what a plan shows and a saved plan keeps for `wsu show`.
type Change struct {
	Action   string   `json:"action"`
	Symbol   string   `json:"symbol"`
	Subject  string   `json:"subject,omitempty"`
	Fields   []Field  `json:"fields,omitempty"`
	Restarts []string `json:"restarts,omitempty"`
	// Diff is a unified diff of a text file's content; a note in
	// parentheses instead when the content is binary or large. Empty
	// when the module offers none or an argument is sensitive.
	Diff string `json:"diff,omitempty"`
}

// Field is one rendered attribute change. Old is empty for a created
// attribute, New for a removed one.
type Field struct {
	Name string `json:"name"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
	// Before and After are the old and new values as JSON (a string is
	// a JSON string, a number a number), for programs: Old and New are
	// display text as HCL writes it. Each is absent where its text is,
	// and for a value that is hidden or not yet known.
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
	// AfterUnknown says the new value, or part of it, is known only
	// after apply.
	AfterUnknown bool `json:"after_unknown,omitempty"`
	// Sensitive says the values are hidden (Old and New read
	// "(sensitive)").
	Sensitive bool `json:"sensitive,omitempty"`
}

// Save writes p to path atomically with owner-only permissions.
func Save(path string, p *Plan) error {
	p.FormatVersion = FormatVersion
	sum, err := p.checksum()
	if err != nil {
		return err
	}
	p.Checksum = sum
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".wsu-plan-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Load reads a saved plan. ok is false when the file is not a plan at all
// (so the caller can treat it as a playbook). A file is a plan by its
// content — a JSON object naming a format_version, which no HCL playbook
// is — so a damaged plan (cut short, edited, of another format) is
// reported as a plan error, never read as a playbook.
func Load(path string) (p *Plan, ok bool, err error) {
	return LoadFrom(path, nil)
}

// LoadFrom is Load reading path through files, at most limits.MaxPlanSize
// bytes: the CLI reads its argument once, as a plan or else a playbook
// (which may be a pipe).
func LoadFrom(path string, files *limits.Files) (p *Plan, ok bool, err error) {
	head, err := files.Head(path, planHead)
	if err != nil {
		return nil, false, err
	}
	if !looksLikePlan(head) {
		return nil, false, nil
	}
	data, err := files.ReadMax(path, limits.MaxPlanSize)
	if err != nil {
		return nil, true, err
	}
	var probe struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, true, fmt.Errorf("%s is a damaged saved plan (%s): plan again with wsu plan -out", path, jsonProblem(err, len(data)))
	}
	switch {
	case probe.FormatVersion == nil:
		return nil, true, fmt.Errorf("%s is a damaged saved plan (no format_version): plan again with wsu plan -out", path)
	case *probe.FormatVersion != FormatVersion:
		return nil, true, fmt.Errorf("%s is a plan in format %d; this wsu reads format %d: plan again with this wsu", path, *probe.FormatVersion, FormatVersion)
	}
	p = &Plan{}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, true, fmt.Errorf("%s is a damaged saved plan (%s): plan again with wsu plan -out", path, jsonProblem(err, len(data)))
	}
	if p.Playbook == "" || p.Hosts == nil {
		return nil, true, fmt.Errorf("%s is a damaged saved plan (no playbook or no hosts): plan again with wsu plan -out", path)
	}
	if k, err := hex.DecodeString(p.Salt); err != nil || len(k) != SaltBytes {
		return nil, true, fmt.Errorf("%s is a damaged saved plan (no salt of %d bytes in hex): plan again with wsu plan -out", path, SaltBytes)
	}
	if sum, err := p.checksum(); err != nil || sum != p.Checksum {
		return nil, true, fmt.Errorf("%s was changed after wsu saved it (its checksum does not match its content), so what it shows may not be what apply would do: plan again with wsu plan -out", path)
	}
	return p, true, nil
}

// NewSalt is a fresh random salt for a plan's hashes.
func NewSalt() []byte {
	k := make([]byte, SaltBytes)
	if _, err := rand.Read(k); err != nil {
		panic("planfile: no randomness: " + err.Error()) // crypto/rand does not fail on supported systems
	}
	return k
}

// Hash is the plan's keyed hash of parts (each ended by a NUL, so
// ("ab","c") and ("a","bc") differ): HMAC-SHA256 under salt, in hex.
func Hash(salt []byte, parts ...string) string {
	h := hmac.New(sha256.New, salt)
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Hash identifies the plan by what it would do: the sha256 of every
// file's hash and every task's fingerprint (which covers the change itself
// and the configuration, secrets as keyed hashes only), in 32 hex digits.
// The same state planned twice under the same salt gives the same hash
// (what a controller's approval names); any difference in what would be
// applied changes it. The engine computes it once per run
// (engine.Result.PlanHash).
func (p *Plan) Hash() string {
	data, err := json.Marshal(struct {
		Sources map[string]string `json:"sources"`
		Hosts   map[string]*Host  `json:"hosts"`
	}{p.Sources, p.Hosts})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:32]
}

// planHead is how much of a file tells whether it is a plan.
const planHead = 512

// looksLikePlan: a JSON object whose opening names format_version (Save
// writes it first), even when the rest is cut off.
func looksLikePlan(data []byte) bool {
	head := bytes.TrimLeft(data[:min(len(data), planHead)], " \t\r\n\ufeff")
	return bytes.HasPrefix(head, []byte("{")) && bytes.Contains(head, []byte(`"format_version"`))
}

// jsonProblem says what is wrong with a plan's JSON, without quoting it.
func jsonProblem(err error, size int) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON input"),
		errors.As(err, &syn) && syn.Offset >= int64(size)-1:
		return "it ends early: cut short?"
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %s holds a %s", typ.Field, typ.Value)
	}
	return err.Error()
}

// CheckDir says whether the plan can be applied from cwd: its relative
// input paths (playbook, inventory file, var files) are relative to the
// directory it was made in, and its sources are named as read from there.
func (p *Plan) CheckDir(cwd string) error {
	if p.Dir == "" || sameDir(p.Dir, cwd) {
		return nil
	}
	var rel []string
	for _, f := range append([]string{p.Playbook, p.Inventory}, p.VarFiles...) {
		if f != "" && !strings.HasPrefix(f, "wsu:") && !strings.Contains(f, "://") && !strings.Contains(f, ",") && !filepath.IsAbs(f) {
			rel = append(rel, f)
		}
	}
	if len(rel) == 0 {
		return nil
	}
	return fmt.Errorf("this plan was made in %s and names files relative to it (%s); run the apply from there: cd %s", p.Dir, strings.Join(rel, ", "), p.Dir)
}

func sameDir(a, b string) bool {
	if a == b {
		return true
	}
	ea, err1 := filepath.EvalSymlinks(a)
	eb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ea == eb
}

// Stale compares the saved plan with a fresh one and returns, one line each,
// what differs. None means the saved plan is still exactly what would run.
func Stale(saved, fresh *Plan) []string {
	var out []string
	for _, name := range sortedKeys(saved.Sources) {
		now, ok := fresh.Sources[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("file %s is no longer read", name))
		case now != saved.Sources[name]:
			out = append(out, fmt.Sprintf("file %s changed", name))
		}
	}
	for _, name := range sortedKeys(fresh.Sources) {
		if _, ok := saved.Sources[name]; !ok {
			out = append(out, fmt.Sprintf("file %s is now read", name))
		}
	}
	for _, h := range sortedKeys(saved.Hosts) {
		sh, fh := saved.Hosts[h], fresh.Hosts[h]
		if fh == nil {
			out = append(out, fmt.Sprintf("host %s is no longer targeted", h))
			continue
		}
		for _, v := range sortedKeys(sh.Vars) {
			if fh.Vars[v] != sh.Vars[v] {
				out = append(out, fmt.Sprintf("host %s: variable %s changed", h, v))
			}
		}
		out = append(out, staleTasks(h, sh.Tasks, fh.Tasks)...)
	}
	for _, h := range sortedKeys(fresh.Hosts) {
		if saved.Hosts[h] == nil {
			out = append(out, fmt.Sprintf("host %s is now targeted", h))
		}
	}
	return out
}

func staleTasks(host string, saved, fresh []Task) []string {
	var out []string
	byAddr := map[string]Task{}
	for _, t := range fresh {
		byAddr[t.Address] = t
	}
	seen := map[string]bool{}
	for _, t := range saved {
		seen[t.Address] = true
		now, ok := byAddr[t.Address]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("host %s: %s is no longer planned", host, t.Address))
		case now.Fingerprint != t.Fingerprint && now.Summary == t.Summary:
			out = append(out, fmt.Sprintf("host %s: %s: its arguments or the host's state changed (%s either way)", host, t.Address, t.Summary))
		case now.Fingerprint != t.Fingerprint:
			out = append(out, fmt.Sprintf("host %s: %s: planned %s, now %s", host, t.Address, t.Summary, now.Summary))
		case !sameShown(t, now):
			out = append(out, fmt.Sprintf("host %s: %s: the saved plan shows %s, but the plan now is %s (the file was edited?)", host, t.Address, shown(t), shown(now)))
		}
	}
	for _, t := range fresh {
		if !seen[t.Address] {
			out = append(out, fmt.Sprintf("host %s: %s is newly planned: %s", host, t.Address, t.Summary))
		}
	}
	return out
}

// sameShown: what `wsu show` prints of a task (status, summary, module,
// change) is the same in both. The fingerprint does not cover it, so
// without this an edited plan could show "no change" and still apply one.
// They are compared as saved (JSON), where an empty list and none are one.
func sameShown(a, b Task) bool {
	a.Fingerprint, b.Fingerprint = "", ""
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// shown is a task's status and summary, as a staleness line names them.
func shown(t Task) string {
	if t.Summary == "" {
		return t.Status
	}
	return t.Status + ": " + t.Summary
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
