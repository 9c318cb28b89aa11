package controller

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	corev1 "k8s.io/api/core/v1"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
)

// jobRequest is a RunRequest as a Job's pod receives it (request.json,
// from an annotation of the Job's pod template through a downwardAPI
// volume): everything the run needs that is not in the image, so `wsu
// controller run-job` reproduces exactly the run the in-process runner
// would make. No secret is in it — it is part of the Job's spec: the
// private key, a rotation's new key and the values of varsFrom Secrets are
// files of Secret volumes the Job mounts by reference, which the request
// names.
type jobRequest struct {
	Instance string      `json:"instance"`
	Mode     engine.Mode `json:"mode"`
	// Playbook is wsu:NAME, or a file name in Files (a site playbook's
	// directory: playbook.hcl and the templates beside it).
	Playbook string            `json:"playbook"`
	Files    map[string]string `json:"files,omitempty"`
	// ReadDirs are the directories besides its own a site playbook's run
	// may read (RunRequest.ReadDirs).
	ReadDirs []string `json:"readDirs,omitempty"`
	// Vars are the -var values; those from a Secret are NAME= here, and
	// SecretVars names the mounted file holding the value.
	Vars       []string       `json:"vars,omitempty"`
	SecretVars map[int]string `json:"secretVars,omitempty"`
	// NewKeyFile is the mounted file holding a rotation's new key
	// (kubeinv.NewKeyVar), or "".
	NewKeyFile string `json:"newKeyFile,omitempty"`
	// VarFiles are the controller's var files, by base name, in order.
	VarFiles []namedFile `json:"varFiles,omitempty"`
	// Inventory is the instance's one-host inventory, minus the key.
	Inventory jobInventory `json:"inventory"`
	// KnownHosts is the instance's known_hosts file (the pinned key, or
	// empty for trust on first use).
	KnownHosts string `json:"knownHosts,omitempty"`
	// ExpectHash makes an apply refuse unless a fresh plan has this hash:
	// the plan an admin approved.
	ExpectHash string `json:"expectHash,omitempty"`
}

type namedFile struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// jobInventory is an inventory.Inventory in JSON (without source ranges).
type jobInventory struct {
	Source string              `json:"source"`
	Order  []string            `json:"order"`
	Hosts  map[string]jobHost  `json:"hosts"`
	Groups map[string]jobGroup `json:"groups"`
}

type jobHost struct {
	Vars   map[string]jobVar `json:"vars,omitempty"`
	Groups []string          `json:"groups,omitempty"`
}

type jobGroup struct {
	Hosts    []string          `json:"hosts,omitempty"`
	Children []string          `json:"children,omitempty"`
	Vars     map[string]jobVar `json:"vars,omitempty"`
}

// jobVar is a cty value with its type; Sensitive keeps the engine's mark.
type jobVar struct {
	Type      json.RawMessage `json:"type"`
	Value     json.RawMessage `json:"value"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// encodeVars encodes inventory variables, without the keys (they travel
// by Secret reference). Any other sensitive value is refused: the request
// is part of the Job's spec.
func encodeVars(vars map[string]inventory.Var) (map[string]jobVar, error) {
	out := map[string]jobVar{}
	for k, v := range vars {
		if k == kubeinv.KeyVar || k == kubeinv.NewKeyVar {
			continue
		}
		val, marks := v.Value.Unmark()
		if _, sensitive := marks[engine.Sensitive]; sensitive {
			return nil, fmt.Errorf("variable %s is sensitive: a Job's request cannot carry it (only the keys travel, by Secret reference)", k)
		}
		typ, err := ctyjson.MarshalType(val.Type())
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", k, err)
		}
		data, err := ctyjson.Marshal(val, val.Type())
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", k, err)
		}
		out[k] = jobVar{Type: typ, Value: data}
	}
	return out, nil
}

func decodeVars(vars map[string]jobVar) (map[string]inventory.Var, error) {
	out := map[string]inventory.Var{}
	for k, v := range vars {
		typ, err := ctyjson.UnmarshalType(v.Type)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", k, err)
		}
		val, err := ctyjson.Unmarshal(v.Value, typ)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", k, err)
		}
		if v.Sensitive {
			val = val.Mark(engine.Sensitive)
		}
		out[k] = inventory.Var{Value: val}
	}
	return out, nil
}

// encodeInventory writes inv without the key variables.
func encodeInventory(inv *inventory.Inventory) (jobInventory, error) {
	out := jobInventory{Source: inv.Source, Order: inv.Order, Hosts: map[string]jobHost{}, Groups: map[string]jobGroup{}}
	for name, h := range inv.Hosts {
		vars, err := encodeVars(h.Vars)
		if err != nil {
			return out, fmt.Errorf("host %s: %w", name, err)
		}
		out.Hosts[name] = jobHost{Vars: vars, Groups: h.Groups}
	}
	for name, g := range inv.Groups {
		vars, err := encodeVars(g.Vars)
		if err != nil {
			return out, fmt.Errorf("group %s: %w", name, err)
		}
		out.Groups[name] = jobGroup{Hosts: g.Hosts, Children: g.Children, Vars: vars}
	}
	return out, nil
}

// decodeInventory rebuilds the inventory, giving every host key as its
// private key and newKey, when not "", as a rotation's new key (both
// sensitive).
func decodeInventory(in jobInventory, key, newKey string) (*inventory.Inventory, error) {
	inv := &inventory.Inventory{Source: in.Source, Order: in.Order, Hosts: map[string]*inventory.Host{}, Groups: map[string]*inventory.Group{}}
	for name, h := range in.Hosts {
		vars, err := decodeVars(h.Vars)
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
		if key != "" {
			vars[kubeinv.KeyVar] = inventory.Var{Value: cty.StringVal(key).Mark(engine.Sensitive)}
		}
		if newKey != "" {
			vars[kubeinv.NewKeyVar] = inventory.Var{Value: cty.StringVal(newKey).Mark(engine.Sensitive)}
		}
		inv.Hosts[name] = &inventory.Host{Name: name, Vars: vars, Groups: h.Groups}
	}
	for name, g := range in.Groups {
		vars, err := decodeVars(g.Vars)
		if err != nil {
			return nil, fmt.Errorf("group %s: %w", name, err)
		}
		inv.Groups[name] = &inventory.Group{Name: name, Hosts: g.Hosts, Children: g.Children, Vars: vars}
	}
	return inv, nil
}

// knownHostsVar is the inventory variable naming a host's known_hosts
// file (transport/ssh).
const knownHostsVar = "ssh_known_hosts_file"

// newJobRequest turns a RunRequest into what the Job's pod reads: files
// the controller holds (a site playbook, var files, known_hosts) travel by
// content; secrets by reference, as items of the Secret volumes in mounts.
func newJobRequest(req RunRequest) (*jobRequest, *secretMounts, error) {
	inv, err := encodeInventory(req.Inventory)
	if err != nil {
		return nil, nil, err
	}
	mounts := &secretMounts{}
	jr := &jobRequest{Instance: req.Instance, Mode: req.Mode, Playbook: req.Playbook, ReadDirs: req.ReadDirs, Inventory: inv, ExpectHash: req.ExpectHash}
	if jr.ExpectHash == "" && req.Expect != nil {
		jr.ExpectHash = PlanHash(req.Expect)
	}
	for i, v := range req.Vars {
		item, ok := req.Secrets.Vars[i]
		if !ok {
			jr.Vars = append(jr.Vars, v)
			continue
		}
		name, _, _ := strings.Cut(v, "=")
		jr.Vars = append(jr.Vars, name+"=")
		if jr.SecretVars == nil {
			jr.SecretVars = map[int]string{}
		}
		jr.SecretVars[i] = mounts.file(item, fmt.Sprintf("var-%d", i))
	}
	if req.Secrets.NewKey.Secret != "" {
		jr.NewKeyFile = mounts.file(req.Secrets.NewKey, jobNewKeyFile)
	}
	if !strings.HasPrefix(req.Playbook, "wsu:") {
		if jr.Files, err = readDir(filepath.Dir(req.Playbook)); err != nil {
			return nil, nil, fmt.Errorf("the site playbook: %w", err)
		}
		jr.Playbook = filepath.Base(req.Playbook)
	}
	for _, f := range req.VarFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		jr.VarFiles = append(jr.VarFiles, namedFile{Name: filepath.Base(f), Data: string(data)})
	}
	if f := knownHostsFile(req.Inventory); f != "" {
		if data, err := os.ReadFile(f); err == nil {
			jr.KnownHosts = string(data)
		}
	}
	return jr, mounts, nil
}

// secretMounts are the Secret volumes a Job mounts, by reference: one per
// Secret, with the items the run reads, under jobSecretsDir.
type secretMounts struct {
	volumes []corev1.Volume
}

// file mounts item as file and returns its path in the pod.
func (m *secretMounts) file(item SecretItem, file string) string {
	var vol *corev1.Volume
	for i := range m.volumes {
		if m.volumes[i].Secret.SecretName == item.Secret {
			vol = &m.volumes[i]
		}
	}
	if vol == nil {
		m.volumes = append(m.volumes, corev1.Volume{Name: fmt.Sprintf("wsu-secret-%d", len(m.volumes)),
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: item.Secret}}})
		vol = &m.volumes[len(m.volumes)-1]
	}
	vol.Secret.Items = append(vol.Secret.Items, corev1.KeyToPath{Key: item.Key, Path: file})
	return path.Join(jobSecretsDir, vol.Name, file)
}

// mountsFor are the volume mounts of the volumes.
func (m *secretMounts) mountsFor() []corev1.VolumeMount {
	var out []corev1.VolumeMount
	for _, v := range m.volumes {
		out = append(out, corev1.VolumeMount{Name: v.Name, MountPath: path.Join(jobSecretsDir, v.Name), ReadOnly: true})
	}
	return out
}

// knownHostsFile is the known_hosts file the run's one host uses.
func knownHostsFile(inv *inventory.Inventory) string {
	for _, h := range inv.Hosts {
		if v, ok := h.Vars[knownHostsVar]; ok {
			if s, _ := v.Value.Unmark(); s.Type() == cty.String && s.IsKnown() && !s.IsNull() {
				return s.AsString()
			}
		}
	}
	return ""
}

func readDir(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = string(data)
	}
	return out, nil
}

// jobResult is what a Job's pod reports back in its termination message:
// RunOutcome without the plan itself (an apply sends its hash instead),
// and the known_hosts file after the run (a host key trusted on first
// use). It must stay within maxJobResult bytes.
type jobResult struct {
	Hash        string      `json:"hash,omitempty"`
	Add         int         `json:"add,omitempty"`
	Change      int         `json:"change,omitempty"`
	Destroy     int         `json:"destroy,omitempty"`
	Run         int         `json:"run,omitempty"`
	Changed     int         `json:"changed,omitempty"`
	Tasks       []string    `json:"tasks,omitempty"`
	MoreTasks   int         `json:"moreTasks,omitempty"`
	Facts       *host.Facts `json:"facts,omitempty"`
	Unreachable bool        `json:"unreachable,omitempty"`
	// LoginRefused is kept apart from Message, which may be cut short.
	LoginRefused bool   `json:"loginRefused,omitempty"`
	Failed       bool   `json:"failed,omitempty"`
	Message      string `json:"message,omitempty"`
	KnownHosts   string `json:"knownHosts,omitempty"`
}

// maxJobResult is the kubelet's bound on a termination message.
const maxJobResult = 4096

func resultOf(out RunOutcome, knownHosts string) jobResult {
	return jobResult{Hash: out.Hash, Add: out.Add, Change: out.Change, Destroy: out.Destroy, Run: out.Run, Changed: out.Changed,
		Tasks: out.Tasks, Facts: out.Facts, Unreachable: out.Unreachable, LoginRefused: out.LoginRefused, Failed: out.Failed, Message: out.Message, KnownHosts: knownHosts}
}

// encodeResult is the result as compact JSON within maxJobResult: the
// message is cut first, then task addresses are dropped from the end
// (counted in MoreTasks).
func encodeResult(r jobResult) ([]byte, error) {
	r.Message = truncate(r.Message, 1000)
	for {
		data, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if len(data) <= maxJobResult {
			return data, nil
		}
		if len(r.Tasks) == 0 {
			if len(r.Message) > 100 {
				r.Message = truncate(r.Message, 100)
				continue
			}
			return nil, fmt.Errorf("the run's result is %d bytes, over %d even without its task list", len(data), maxJobResult)
		}
		drop := max(1, len(r.Tasks)/4)
		r.MoreTasks += drop
		r.Tasks = r.Tasks[:len(r.Tasks)-drop]
	}
}

func (r jobResult) outcome() RunOutcome {
	return RunOutcome{Hash: r.Hash, Add: r.Add, Change: r.Change, Destroy: r.Destroy, Run: r.Run, Changed: r.Changed,
		Tasks: r.Tasks, Facts: r.Facts, Unreachable: r.Unreachable, LoginRefused: r.LoginRefused, Failed: r.Failed, Message: r.Message}
}
