// Package planfile saves a plan (`wsu plan -out FILE`) and tells whether a
// fresh plan still matches it, so `wsu apply FILE` applies exactly what was
// reviewed or refuses, saying what changed.
package planfile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// FormatVersion is bumped when the file's meaning changes.
const FormatVersion = 1

// Plan is the saved form. It holds the inputs needed to plan again and the
// fingerprints of what was planned; sensitive values appear only as hashes,
// except -var values, which are stored as given (the file is written 0600).
type Plan struct {
	FormatVersion int    `json:"format_version"`
	WSUVersion    string `json:"wsu_version"`

	// Inputs are recorded as given, so apply plans again with exactly them.
	Inputs

	// Sources maps every playbook, var file and inventory file read, and
	// every file the file functions read while planning, to its sha256.
	Sources map[string]string `json:"sources"`
	Hosts   map[string]*Host  `json:"hosts"`
}

// Inputs are what a run was asked to do: the one list of inputs a saved plan
// records and a later apply restores. Every face (CLI, Job, controller)
// fills it; package setup turns it into an engine request.
type Inputs struct {
	// Playbook is a file path, or wsu:NAME for a stock playbook.
	Playbook  string   `json:"playbook"`
	Inventory string   `json:"inventory,omitempty"`
	VarFiles  []string `json:"var_files,omitempty"`
	Vars      []string `json:"vars,omitempty"`
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
	Local    bool     `json:"local,omitempty"`
	// Kubeconfig and KubeContext are --kubeconfig and --context: the
	// cluster the plan read is the one apply acts on.
	Kubeconfig  string `json:"kubeconfig,omitempty"`
	KubeContext string `json:"kube_context,omitempty"`
}

// Host is what was planned for one host.
type Host struct {
	// Vars maps variable address (file:name) to a hash of its value.
	Vars  map[string]string `json:"vars"`
	Tasks []Task            `json:"tasks"`
}

// Task is one planned task outcome.
type Task struct {
	Address     string `json:"address"`
	Status      string `json:"status"`
	Summary     string `json:"summary"`
	Fingerprint string `json:"fingerprint"`
}

// Save writes p to path atomically with owner-only permissions.
func Save(path string, p *Plan) error {
	p.FormatVersion = FormatVersion
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
// (so the caller can treat it as a playbook).
func Load(path string) (p *Plan, ok bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	var probe struct {
		FormatVersion *int `json:"format_version"`
	}
	if json.Unmarshal(data, &probe) != nil || probe.FormatVersion == nil {
		return nil, false, nil
	}
	if *probe.FormatVersion != FormatVersion {
		return nil, true, fmt.Errorf("%s is a plan in format %d; this wsu reads format %d: plan again", path, *probe.FormatVersion, FormatVersion)
	}
	p = &Plan{}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, true, fmt.Errorf("reading plan %s: %w", path, err)
	}
	return p, true, nil
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
		}
	}
	for _, t := range fresh {
		if !seen[t.Address] {
			out = append(out, fmt.Sprintf("host %s: %s is newly planned: %s", host, t.Address, t.Summary))
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
