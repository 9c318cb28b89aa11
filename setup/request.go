package setup

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
)

// RequestVersion names the JSON form of a Request this wsu writes and
// reads (its apiVersion field). A change a reader of the previous form
// would misread gets a new version.
const RequestVersion = "wsu.dev/run-request/v1"

// MaxRequestBytes bounds the JSON DecodeRequest reads.
const MaxRequestBytes = 1 << 20

// Request is one run as a face asks for it, and the one form a run is
// asked for in: the CLI builds it from its flags, the controller from a
// WindowsInstance, and the controller's Job mode hands it, as JSON
// (Encode, DecodeRequest), to `wsu-controller run-job` in the Job's pod.
// Options carry it with what cannot travel (cluster clients, hooks,
// prompts, agent builds).
//
// Encoded, it carries no secret: it is part of a Job's spec. A secret
// input travels as the name of the file that holds it (SecretFiles, the
// Secret volumes a Job mounts), and Encode refuses any other sensitive
// value.
type Request struct {
	Mode engine.Mode
	// Inputs are the playbook, inventory sources, variables and host
	// selection, as a saved plan records them (Options.Saved, when set,
	// replaces them but for the sensitive -var options it left out).
	planfile.Inputs
	// Inventory, when set, is the inventory itself (a controller's one
	// host per WindowsInstance), used instead of Inputs' sources
	// (Inputs.Inventory).
	Inventory *inventory.Inventory
	// Forks bounds how many hosts the run works on at once (0: the
	// engine's default).
	Forks int
	// SecretVars name -var values that are secrets whatever their
	// variables declare (engine.Inputs.SecretVars): the controller's
	// varsFrom Secret values.
	SecretVars []string
	// Confined runs read files on this machine only in the playbook's own
	// directory and ReadDirs (playbook.Loader.Confine): the playbook, its
	// file functions and the files modules read. The controller confines
	// a site playbook from a ConfigMap, so it cannot read the pod's files
	// (its ServiceAccount token). A stock playbook is never confined.
	Confined bool
	ReadDirs []string
	// Salt keys the plan's hashes (engine.Request.Salt): a controller
	// keeps one per instance, so the same state planned twice has the same
	// hash. nil: a new random one.
	Salt []byte
	// ExpectHash holds an apply to the plan an admin approved, by its
	// hash (engine.Request.ExpectHash).
	ExpectHash string
	// Files, when set, are the files the run reads from this machine, by
	// content, for a run on another (Pack; Unpack writes them back).
	Files *Files
	// SecretFiles name the files that hold the secret inputs the request
	// leaves out; Unpack reads them.
	SecretFiles SecretFiles
}

// Files are the files a request carries by content.
type Files struct {
	// Playbook is the site playbook's directory (file name → content);
	// Inputs.Playbook is then the name of a file in it.
	Playbook map[string]string `json:"playbook,omitempty"`
	// VarFiles are Inputs.VarFiles' contents, in order.
	VarFiles []File `json:"varFiles,omitempty"`
	// HostFiles map an inventory variable naming a file (the hosts'
	// ssh_known_hosts_file) to that file's content.
	HostFiles map[string]string `json:"hostFiles,omitempty"`
}

// File is one file carried by content.
type File struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// SecretFiles locate the secret inputs a request leaves out: files on the
// machine that runs it (a Job's mounted Secret volumes).
type SecretFiles struct {
	// HostVars map an inventory variable to the file holding its value,
	// set (sensitive) on every host: the private key, a rotation's new
	// key. Encode leaves these variables out of the inventory.
	HostVars map[string]string `json:"hostVars,omitempty"`
	// Vars map the index of a -var option (Inputs.Vars) to the file
	// holding its value. Encode writes that option as NAME=.
	Vars map[int]string `json:"vars,omitempty"`
}

// requestJSON is a Request's JSON form.
type requestJSON struct {
	APIVersion  string          `json:"apiVersion"`
	Mode        engine.Mode     `json:"mode"`
	Inputs      planfile.Inputs `json:"inputs"`
	Inventory   *inventory.JSON `json:"inventory,omitempty"`
	Forks       int             `json:"forks,omitempty"`
	SecretVars  []string        `json:"secretVars,omitempty"`
	Confined    bool            `json:"confined,omitempty"`
	ReadDirs    []string        `json:"readDirs,omitempty"`
	Salt        string          `json:"salt,omitempty"`
	ExpectHash  string          `json:"expectHash,omitempty"`
	Files       *Files          `json:"files,omitempty"`
	SecretFiles *SecretFiles    `json:"secretFiles,omitempty"`
}

// Encode is r's JSON form (apiVersion RequestVersion). The inventory
// variables and -var values SecretFiles names are left out; any other
// sensitive inventory value is refused, as is a -var of a SecretVars name
// that carries its value.
func (r Request) Encode() ([]byte, error) {
	w := requestJSON{APIVersion: RequestVersion, Mode: r.Mode, Inputs: r.Inputs, Forks: r.Forks, SecretVars: r.SecretVars,
		Confined: r.Confined, ReadDirs: r.ReadDirs, Salt: hex.EncodeToString(r.Salt), ExpectHash: r.ExpectHash, Files: r.Files}
	if len(r.SecretFiles.HostVars)+len(r.SecretFiles.Vars) > 0 {
		sf := r.SecretFiles
		w.SecretFiles = &sf
	}
	w.Inputs.Vars = r.publicVars()
	if r.Inventory != nil {
		var err error
		if w.Inventory, err = r.publicInventory(); err != nil {
			return nil, err
		}
	}
	if err := w.check(); err != nil {
		return nil, fmt.Errorf("the run request: %w", err)
	}
	return json.Marshal(w)
}

// publicVars are the -var options with the values SecretFiles.Vars names
// left out.
func (r Request) publicVars() []string {
	out := slices.Clone(r.Inputs.Vars)
	for i := range r.SecretFiles.Vars {
		if i >= 0 && i < len(out) {
			name, _, _ := strings.Cut(out[i], "=")
			out[i] = name + "="
		}
	}
	return out
}

// publicInventory is the inventory in JSON without the variables
// SecretFiles.HostVars names.
func (r Request) publicInventory() (*inventory.JSON, error) {
	inv, err := inventory.ToJSON(r.Inventory)
	if err != nil {
		return nil, fmt.Errorf("the run request: inventory: %w", err)
	}
	for _, h := range inv.Hosts {
		for name := range r.SecretFiles.HostVars {
			delete(h.Vars, name)
		}
	}
	for _, g := range inv.Groups {
		for name := range r.SecretFiles.HostVars {
			delete(g.Vars, name)
		}
	}
	return inv, nil
}

// checkSecrets refuses a secret the request would carry: a sensitive
// inventory value, or a value of a -var SecretVars names (a request
// carries the file that holds it, SecretFiles.Vars).
func (w *requestJSON) checkSecrets() error {
	for _, opt := range w.Inputs.Vars {
		name, value, _ := strings.Cut(opt, "=")
		if name = strings.TrimSpace(name); value != "" && slices.Contains(w.SecretVars, name) {
			return fmt.Errorf("inputs.vars: -var %s is a secret: a request carries the file that holds it (secretFiles.vars), not its value", name)
		}
	}
	if w.Inventory == nil {
		return nil
	}
	marked := func(where string, vars map[string]inventory.JSONVar) error {
		for _, name := range slices.Sorted(maps.Keys(vars)) {
			if len(vars[name].Marks) > 0 {
				return fmt.Errorf("inventory: %s: variable %s is sensitive: a request carries the file that holds it (secretFiles.hostVars), not its value", where, name)
			}
		}
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(w.Inventory.Hosts)) {
		if err := marked("host "+name, w.Inventory.Hosts[name].Vars); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(w.Inventory.Groups)) {
		if err := marked("group "+name, w.Inventory.Groups[name].Vars); err != nil {
			return err
		}
	}
	return nil
}

// DecodeRequest reads a request Encode wrote. Every error says where: the
// line and column of bad JSON or of a value of the wrong type, else the
// field at fault. Unknown fields are refused (a field misspelt, or a
// request from a newer wsu that this one would misread).
func DecodeRequest(data []byte) (Request, error) {
	if len(data) > MaxRequestBytes {
		return Request{}, fmt.Errorf("the run request is %d bytes, over %d", len(data), MaxRequestBytes)
	}
	var w requestJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Request{}, fmt.Errorf("the run request: %s", jsonError(data, err, dec.InputOffset()))
	}
	if dec.More() {
		return Request{}, fmt.Errorf("the run request: %s: more after the request's end", lineCol(data, dec.InputOffset()))
	}
	if w.APIVersion != RequestVersion {
		return Request{}, fmt.Errorf("the run request: apiVersion %q: this wsu reads %s (controller and Job images must be the same wsu)", w.APIVersion, RequestVersion)
	}
	if err := w.check(); err != nil {
		return Request{}, fmt.Errorf("the run request: %w", err)
	}
	r := Request{Mode: w.Mode, Inputs: w.Inputs, Forks: w.Forks, SecretVars: w.SecretVars, Confined: w.Confined,
		ReadDirs: w.ReadDirs, ExpectHash: w.ExpectHash, Files: w.Files}
	r.Salt, _ = hex.DecodeString(w.Salt) // check read it
	if w.SecretFiles != nil {
		r.SecretFiles = *w.SecretFiles
	}
	if w.Inventory != nil {
		inv, err := w.Inventory.Inventory()
		if err != nil {
			return Request{}, fmt.Errorf("the run request: inventory: %w", err)
		}
		r.Inventory = inv
	}
	return r, nil
}

// check refuses what no run could mean, naming the field.
func (w *requestJSON) check() error {
	switch {
	case w.Mode != engine.ModePlan && w.Mode != engine.ModeApply:
		return fmt.Errorf("mode %q: want plan or apply", w.Mode)
	case w.Inputs.Playbook == "":
		return errors.New("inputs.playbook: no playbook")
	case w.Forks < 0:
		return fmt.Errorf("forks %d: want 0 (the default) or more", w.Forks)
	}
	if _, err := hex.DecodeString(w.Salt); err != nil {
		return fmt.Errorf("salt: not hex: %w", err)
	}
	if w.ExpectHash != "" && w.Mode != engine.ModeApply {
		return errors.New("expectHash: only an apply is held to a plan")
	}
	if err := w.Files.check(w.Inputs); err != nil {
		return fmt.Errorf("files: %w", err)
	}
	if w.SecretFiles != nil {
		if err := w.SecretFiles.check(w.Inputs.Vars); err != nil {
			return fmt.Errorf("secretFiles: %w", err)
		}
	}
	return w.checkSecrets()
}

func (f *Files) check(in planfile.Inputs) error {
	if f == nil {
		return nil
	}
	for name := range f.Playbook {
		if err := checkFileName(name); err != nil {
			return fmt.Errorf("playbook[%q]: %w", name, err)
		}
	}
	if len(f.Playbook) > 0 {
		if _, ok := f.Playbook[in.Playbook]; !ok {
			return fmt.Errorf("playbook: no file %q (inputs.playbook)", in.Playbook)
		}
	}
	if len(f.VarFiles) > 0 && len(in.VarFiles) > 0 {
		return errors.New("varFiles: given by content and by path (inputs.var_files) at once")
	}
	for i, vf := range f.VarFiles {
		if err := checkFileName(vf.Name); err != nil {
			return fmt.Errorf("varFiles[%d]: %w", i, err)
		}
	}
	for name := range f.HostFiles {
		if !hclsyntax.ValidIdentifier(name) {
			return fmt.Errorf("hostFiles[%q]: not a variable name", name)
		}
	}
	return nil
}

func (s *SecretFiles) check(vars []string) error {
	for name, file := range s.HostVars {
		if !hclsyntax.ValidIdentifier(name) {
			return fmt.Errorf("hostVars[%q]: not a variable name", name)
		}
		if file == "" {
			return fmt.Errorf("hostVars[%q]: no file", name)
		}
	}
	for i, file := range s.Vars {
		if i < 0 || i >= len(vars) {
			return fmt.Errorf("vars[%d]: there are %d -var options (inputs.vars)", i, len(vars))
		}
		if name, value, ok := strings.Cut(vars[i], "="); !ok || value != "" || strings.TrimSpace(name) == "" {
			return fmt.Errorf("vars[%d]: inputs.vars[%d] is not NAME= (its value is in the file)", i, i)
		}
		if file == "" {
			return fmt.Errorf("vars[%d]: no file", i)
		}
	}
	return nil
}

// checkFileName refuses a carried file's name that is not a plain name in
// its directory.
func checkFileName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return errors.New("a file's name, not a path")
	}
	return nil
}

// jsonError says where in data err is: the line and column of bad syntax
// or of a value of the wrong type.
func jsonError(data []byte, err error, at int64) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("%s: %v", lineCol(data, syn.Offset-1), err) // Offset is just past the byte at fault
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the request"
		}
		return fmt.Sprintf("%s: %s: a JSON %s where %s belongs", lineCol(data, typ.Offset), field, typ.Value, typ.Type)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "the request is empty or cut short"
	}
	return fmt.Sprintf("%s: %v", lineCol(data, at), err)
}

// lineCol is "line L, column C" of a byte offset into data.
func lineCol(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return fmt.Sprintf("line %d, column %d", line, col)
}

// Pack is r with the files it reads on this machine carried by content
// (Files), for a run on another: a site playbook's directory, the var
// files, and the file each host's variable in hostFileVars names (when a
// host sets it; an empty file for one that does not exist yet).
func (r Request) Pack(hostFileVars ...string) (Request, error) {
	out := r
	out.Files = &Files{}
	if !strings.HasPrefix(r.Inputs.Playbook, playbook.EmbeddedPrefix) {
		dir, err := readDir(filepath.Dir(r.Inputs.Playbook))
		if err != nil {
			return Request{}, fmt.Errorf("the site playbook: %w", err)
		}
		out.Files.Playbook = dir
		out.Inputs.Playbook = filepath.Base(r.Inputs.Playbook)
	}
	for _, f := range r.Inputs.VarFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return Request{}, err
		}
		out.Files.VarFiles = append(out.Files.VarFiles, File{Name: filepath.Base(f), Data: string(data)})
	}
	out.Inputs.VarFiles = nil
	for _, v := range hostFileVars {
		f := r.Inventory.HostString(v)
		if f == "" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Request{}, err
		}
		if out.Files.HostFiles == nil {
			out.Files.HostFiles = map[string]string{}
		}
		out.Files.HostFiles[v] = string(data) // none yet: an empty one
	}
	return out, nil
}

// Unpack makes a decoded request runnable here: the files it carries
// written under dir (which must be the same for each run whose plan hashes
// are compared: their paths are fingerprinted) and its paths pointing
// there, and the secret inputs read from the files SecretFiles names.
func (r Request) Unpack(dir string) (Request, error) {
	out := r
	out.Inputs.Vars = slices.Clone(r.Inputs.Vars)
	if f := r.Files; f != nil {
		if len(f.Playbook) > 0 {
			pdir := filepath.Join(dir, "playbook")
			if err := writeFiles(pdir, f.Playbook); err != nil {
				return Request{}, err
			}
			out.Inputs.Playbook = filepath.Join(pdir, r.Inputs.Playbook)
		}
		for i, vf := range f.VarFiles {
			name := fmt.Sprintf("%02d-%s", i, vf.Name)
			if err := writeFiles(filepath.Join(dir, "vars"), map[string]string{name: vf.Data}); err != nil {
				return Request{}, err
			}
			out.Inputs.VarFiles = append(out.Inputs.VarFiles, filepath.Join(dir, "vars", name))
		}
		for v, data := range f.HostFiles {
			if err := writeFiles(filepath.Join(dir, "hostfiles"), map[string]string{v: data}); err != nil {
				return Request{}, err
			}
			setHostVar(out.Inventory, v, cty.StringVal(filepath.Join(dir, "hostfiles", v)), true)
		}
		out.Files = nil
	}
	for i, file := range r.SecretFiles.Vars {
		data, err := os.ReadFile(file)
		if err != nil {
			return Request{}, fmt.Errorf("reading the value of -var %d: %w", i, err)
		}
		out.Inputs.Vars[i] += string(data)
	}
	for v, file := range r.SecretFiles.HostVars {
		data, err := os.ReadFile(file)
		if err != nil {
			return Request{}, fmt.Errorf("reading the value of %s: %w", v, err)
		}
		setHostVar(out.Inventory, v, cty.StringVal(string(data)).Mark(engine.Sensitive), false)
	}
	out.SecretFiles = SecretFiles{}
	return out, nil
}

// confine is where the run may read files: nil (anywhere) unless
// Confined and the playbook is not a stock one.
func (r Request) confine() []string {
	if !r.Confined || strings.HasPrefix(r.Inputs.Playbook, playbook.EmbeddedPrefix) {
		return nil
	}
	return append([]string{filepath.Dir(r.Inputs.Playbook)}, r.ReadDirs...)
}

// setHostVar sets an inventory variable on every host, or, onlySet, on
// those that set it already.
func setHostVar(inv *inventory.Inventory, name string, v cty.Value, onlySet bool) {
	if inv == nil {
		return
	}
	for _, h := range inv.Hosts {
		if _, ok := h.Vars[name]; ok || !onlySet {
			if h.Vars == nil {
				h.Vars = map[string]inventory.Var{}
			}
			h.Vars[name] = inventory.Var{Value: v}
		}
	}
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

func writeFiles(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range files {
		if err := checkFileName(name); err != nil {
			return fmt.Errorf("the run request names the file %q: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			return err
		}
	}
	return nil
}
