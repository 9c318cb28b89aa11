// Package setup prepares a run: everything between what a face was asked to
// do (a playbook, an inventory, variables, a saved plan) and engine.Run. The
// CLI, the in-cluster Job and the controller all call Prepare, so a playbook
// runs the same whichever face starts it, and none of them copies the
// loading of playbooks, inventories and var files or the wiring of modules,
// transports and credentials.
//
// Everything a run needs that could be shared (cluster clients, the SSH
// passphrases typed, the transports and their agent binaries) belongs to the
// run Prepare returns or comes in through Options: nothing is process-wide,
// so a controller can run many playbooks at once for different clusters and
// keys in one process.
package setup

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/modules/windows"
	"github.com/wsu-project/wsu/playbooks"
	"github.com/wsu-project/wsu/transport"
	"github.com/wsu-project/wsu/transport/agentbin"
	sshtransport "github.com/wsu-project/wsu/transport/ssh"
	"github.com/wsu-project/wsu/version"
)

// Options are what a face decides about one run: the Request (what it
// asks for, serialisable) and what cannot travel with it.
type Options struct {
	Request
	// Saved is a saved plan to apply exactly: its inputs are used, and the
	// run refuses to apply if a fresh plan differs from it. Inputs.Vars
	// then holds only the sensitive -var options the plan left out.
	Saved *planfile.Plan

	// Environ is the environment WSU_VAR_* values are read from (the CLI's
	// os.Environ(); a controller's own list).
	Environ []string
	// Hooks receive the run's events; may be nil, and may be set on the
	// Request afterwards (a view that needs Run.Text).
	Hooks engine.Hooks

	// Clusters are the run's cluster clients. nil: a new cache whose
	// defaults are Inputs.Kubeconfig and Inputs.KubeContext. A cache
	// belongs to one run: its RunStart is the start of the run's CSR time
	// window.
	Clusters *kube.Cache
	// Sources are the hashes of the source files win_copy sends, kept
	// across the hosts of the run. nil: the run's own. A face whose runs
	// copy the same files (the controller) may keep one for all of them:
	// it is bounded and keyed by each file's path and metadata.
	Sources *SourceHashes
	// Passphrase asks for an encrypted SSH key's passphrase (a CLI on a
	// terminal). nil: only WSU_SSH_PASSPHRASE.
	Passphrase sshtransport.PassphrasePrompt
	// Transports dial the hosts. nil: transport.NewRegistry with Agents.
	Transports *transport.Registry
	// Agents are the agent builds the transports deploy and start (the
	// CLI's embedded ones). nil: only wsu_agent_binary files.
	Agents *agentbin.Source
	// Stock are the stock playbooks `wsu:NAME` names. nil: the embedded ones.
	Stock fs.FS
	// Files reads the run's inputs from disk, each once (pipes, FIFOs and
	// devices too: bounded, and given up on when the run is interrupted).
	// The CLI passes the one that looked at its argument for a saved
	// plan. nil: a new one that gives up when ctx ends.
	Files *limits.Files
}

// SourceHashes are win_copy's remembered source hashes (Options.Sources).
type SourceHashes = windows.SourceHashes

// NewSourceHashes returns an empty, bounded SourceHashes.
func NewSourceHashes() *SourceHashes { return windows.NewSourceHashes() }

// Run is a prepared run.
type Run struct {
	// Request is ready for engine.Run.
	Request engine.Request
	// Inputs are the inputs used (a saved plan's when one was given), with
	// the playbook resolved (a stock name becomes wsu:NAME.hcl).
	Inputs planfile.Inputs
	// Text maps every file a diagnostic may quote (playbooks and the files
	// the run reads later, the inventory, var files) to its content. It is
	// filled even when Prepare fails, so its diagnostics can be shown with
	// their source lines (except those Hidden refuses), and it grows as
	// the engine reads templates.
	Text map[string][]byte
	// Secrets is the run's scrubber (also Request.Secrets): the secrets of
	// the inventory and the inputs are registered with it before Prepare
	// returns, and the diagnostics it returns are scrubbed with it.
	Secrets *engine.Scrubber

	files       *limits.Files
	secretFiles secretFiles
	// valueFiles are the inputs read into values here (--join-config).
	valueFiles []engine.ValueFile
}

// Prepare loads the playbook and inventory and builds the engine request.
// Errors are reported before any host is touched; warnings come with a
// usable Run.
func Prepare(ctx context.Context, o Options) (*Run, hcl.Diagnostics) {
	in := o.Inputs
	var savedDiags hcl.Diagnostics
	if o.Saved != nil {
		in, savedDiags = savedInputs(o.Saved.Inputs, o.Inputs.Vars, o.Environ)
	}
	stock := o.Stock
	if stock == nil {
		stock = playbooks.FS
	}
	clusters := o.Clusters
	if clusters == nil {
		clusters = kube.NewCache(kube.Defaults{Kubeconfig: in.Kubeconfig, Context: in.KubeContext, Parallel: forks(o.Forks)})
	}
	files := o.Files
	if files == nil {
		files = limits.NewFiles(ctx)
	}
	hashes := o.Sources
	if hashes == nil {
		hashes = windows.NewSourceHashes()
	}
	registry := all.Registry(all.Options{Clusters: clusters, Sources: hashes})
	loader := playbook.NewLoader(registry, stock)
	loader.Files = files
	var diags hcl.Diagnostics
	loader.Confine, diags = confineDirs(o.confine())
	if diags.HasErrors() {
		return &Run{Inputs: in, Text: loader.Sources(), Secrets: engine.NewScrubber(), files: files}, diags
	}
	in.Playbook, diags = resolvePlaybook(in.Playbook, stock, files)
	run := &Run{Inputs: in, Text: loader.Sources(), Secrets: engine.NewScrubber(), files: files}
	if in.JoinConfig != "" {
		vf, d := run.readJoinConfig(in.JoinConfig)
		diags = append(diags, d...)
		if vf != nil {
			run.valueFiles = append(run.valueFiles, *vf)
		}
	}
	if diags.HasErrors() {
		run.collectSecrets(nil, nil, in, o.Environ, o.SecretVars)
		return run, run.scrub(append(savedDiags, diags...))
	}
	pb, loadDiags := loader.Load(in.Playbook)
	diags = append(diags, loadDiags...)
	if diags.HasErrors() {
		diags = append(savedDiags, diags...)
		run.collectSecrets(nil, nil, in, o.Environ, o.SecretVars)
		return run, run.scrub(diags)
	}
	sources := map[string][]byte{}
	for k, s := range loader.Sources() {
		sources[k] = s
	}
	// Text holds the join configuration masked, for diagnostics; the engine
	// fingerprints its real content (Inputs.ValueFiles).
	delete(sources, in.JoinConfig)
	inv := o.Inventory
	if inv == nil {
		var invDiags hcl.Diagnostics
		inv, invDiags = loadInventory(ctx, in, clusters, files, sources, run.Text)
		diags = append(diags, invDiags...)
	}
	// Var files too, so their diagnostics quote the line; the engine gets
	// the same content from files (and reports one it cannot read).
	for _, f := range in.VarFiles {
		if src, err := files.Read(f); err == nil {
			run.Text[f] = src
		}
	}
	run.collectSecrets(pb, inv, in, o.Environ, o.SecretVars)
	diags = run.scrub(append(savedDiags, diags...))
	if diags.HasErrors() {
		return run, diags
	}
	transports := o.Transports
	if transports == nil {
		transports = transport.NewRegistry(transport.Options{Agents: o.Agents})
	}
	if d := checkHosts(inv, transports, in.Local); d.HasErrors() {
		return run, append(diags, d...)
	}
	o.Transports = transports
	run.Request = engine.Request{
		Playbook:   pb,
		Inventory:  inv,
		Inputs:     engine.Inputs{VarFiles: in.VarFiles, Vars: in.Vars, Environ: o.Environ, SecretVars: o.SecretVars, ValueFiles: run.valueFiles, Files: files},
		Mode:       o.Mode,
		Registry:   registry,
		Connector:  connector(o, in.Local),
		Hooks:      o.Hooks,
		Forks:      o.Forks,
		Limit:      in.Limit,
		Tags:       in.Tags,
		SkipTags:   in.SkipTags,
		StartAt:    in.StartAtTask,
		Sources:    sources,
		Expect:     o.Saved,
		ExpectHash: o.ExpectHash,
		Salt:       o.Salt,
		Secrets:    run.Secrets,
	}
	return run, diags
}

// checkHosts refuses, before any play, hosts whose connection settings
// cannot work whatever the host does (an unknown connection, a port that
// is not a number), each located in the inventory where it can be.
func checkHosts(inv *inventory.Inventory, transports *transport.Registry, local bool) hcl.Diagnostics {
	def := "ssh"
	if local {
		def = "local"
	}
	var diags hcl.Diagnostics
	for _, name := range inv.Order {
		if err := transports.Check(name, inv.HostVars(name), def); err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid host settings",
				Detail: err.Error() + ". Found before any host was touched; fix the inventory."})
		}
	}
	return diags
}

// connector dials hosts through the run's transports, with the run's SSH
// passphrases in the dialling context. A host naming no connection uses
// ssh, or local for a --local run.
func connector(o Options, local bool) engine.Connector {
	transports := o.Transports
	if transports == nil {
		transports = transport.NewRegistry(transport.Options{Agents: o.Agents})
	}
	passphrases := sshtransport.NewPassphrases(o.Passphrase)
	def := "ssh"
	if local {
		def = "local"
	}
	return engine.ConnectorFunc(func(ctx context.Context, t engine.Target) (host.Host, error) {
		return transports.Dial(sshtransport.WithPassphrases(ctx, passphrases), t.Name, t.Vars, def)
	})
}

// SavePlan writes the plan res made to path with the inputs that made it,
// so `wsu apply path` plans again with exactly them.
func (r *Run) SavePlan(path string, res *engine.Result) error {
	if res.Plan == nil {
		return fmt.Errorf("no plan to save: the run was not a plan")
	}
	p := res.Plan
	p.WSUVersion = version.Version
	if wd, err := os.Getwd(); err == nil {
		p.Dir = wd
	}
	p.Inputs = r.Inputs
	p.Inputs.Vars, p.Inputs.SensitiveVars = nil, nil
	for _, opt := range r.Inputs.Vars {
		name, _, _ := strings.Cut(opt, "=")
		name = strings.TrimSpace(name)
		if r.secretFiles.sensitive[name] {
			if !slices.Contains(p.Inputs.SensitiveVars, name) {
				p.Inputs.SensitiveVars = append(p.Inputs.SensitiveVars, name)
			}
			continue
		}
		p.Inputs.Vars = append(p.Inputs.Vars, opt)
	}
	return planfile.Save(path, p)
}

// savedInputs are a saved plan's inputs with the sensitive -var options
// it left out given again (Options.Inputs.Vars; or WSU_VAR_NAME in
// environ). A -var for anything else is an error: the plan carries its
// own inputs.
func savedInputs(saved planfile.Inputs, given []string, environ []string) (planfile.Inputs, hcl.Diagnostics) {
	in := saved
	in.Vars = slices.Clone(saved.Vars)
	var diags hcl.Diagnostics
	have := map[string]bool{}
	for _, kv := range environ {
		if name, _, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, engine.EnvPrefix) {
			have[strings.TrimPrefix(name, engine.EnvPrefix)] = true
		}
	}
	for _, opt := range given {
		name, _, _ := strings.Cut(opt, "=")
		name = strings.TrimSpace(name)
		if !slices.Contains(saved.SensitiveVars, name) {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Input given with a saved plan",
				Detail: fmt.Sprintf("The saved plan carries its own inputs; -var %q is not one it left out (only the sensitive variables it did not save may be given again: %s). Plan again with the new value.", name, orNone(saved.SensitiveVars))})
			continue
		}
		have[name] = true
		in.Vars = append(in.Vars, opt)
	}
	for _, name := range saved.SensitiveVars {
		if !have[name] {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Sensitive variable not given",
				Detail: fmt.Sprintf("The plan was made with -var %s=..., which a saved plan does not keep because %q is sensitive. Give it again: -var '%s=...' or %s%s.", name, name, name, engine.EnvPrefix, name)})
		}
	}
	return in, diags
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ResolvePlaybook says which playbook an argument names, explicitly:
//   - wsu:NAME (or wsu:NAME.hcl) is always the stock playbook NAME, and an
//     unknown stock name is an error with the nearest one;
//   - an existing file is that file; when it is named like a stock playbook
//     (./join) a warning says the local file is used, not wsu:join;
//   - a stock name with no such file is the stock playbook (wsu:NAME.hcl);
//   - anything else is returned as given, with a suggestion when it looks
//     like a misspelt stock name (joni: did you mean join?).
//
// A directory, or an empty file, is an error: neither is a playbook.
func ResolvePlaybook(arg string, stock fs.FS) (string, hcl.Diagnostics) {
	return resolvePlaybook(arg, stock, nil)
}

// resolvePlaybook is ResolvePlaybook reading an existing file through
// files (to tell an empty one), so that a pipe is not read away before the
// loader reads it.
func resolvePlaybook(arg string, stock fs.FS, files *limits.Files) (string, hcl.Diagnostics) {
	if rest, ok := strings.CutPrefix(arg, playbook.EmbeddedPrefix); ok {
		name := strings.TrimSuffix(rest, ".hcl") + ".hcl"
		if _, err := fs.Stat(stock, name); err != nil {
			return arg, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unknown stock playbook",
				Detail: fmt.Sprintf("wsu has no stock playbook %q.%s `wsu playbooks list` lists them.", rest, suggestStock(rest, stock))}}
		}
		return playbook.EmbeddedPrefix + name, nil
	}
	stockName := ""
	if !strings.ContainsAny(arg, `/\`) {
		name := strings.TrimSuffix(arg, ".hcl") + ".hcl"
		if _, err := fs.Stat(stock, name); err == nil {
			stockName = name
		}
	}
	if st, err := os.Stat(arg); err == nil {
		return arg, localPlaybook(arg, st, stockName, files)
	}
	if stockName != "" {
		return playbook.EmbeddedPrefix + stockName, nil
	}
	if !strings.ContainsAny(arg, `/\`) {
		if s := suggestStock(arg, stock); s != "" {
			return arg, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No such playbook",
				Detail: fmt.Sprintf("There is no file %q and no stock playbook of that name.%s", arg, s)}}
		}
	}
	return arg, nil
}

// localPlaybook checks that an existing path can be a playbook, and warns
// when it hides a stock playbook of the same name.
func localPlaybook(arg string, st fs.FileInfo, stockName string, files *limits.Files) hcl.Diagnostics {
	stockHint := ""
	if stockName != "" {
		stockHint = fmt.Sprintf(" For the stock playbook write wsu:%s.", strings.TrimSuffix(stockName, ".hcl"))
	}
	if st.IsDir() {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Not a playbook",
			Detail: fmt.Sprintf("%s is a directory; give a playbook file.%s", arg, stockHint)}}
	}
	if src, err := files.Read(arg); err == nil && len(strings.TrimSpace(string(src))) == 0 {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Empty playbook",
			Detail: fmt.Sprintf("%s is empty: there is nothing to check or run.%s", arg, stockHint)}}
	}
	if stockName == "" {
		return nil
	}
	return hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Using the local playbook " + arg,
		Detail: fmt.Sprintf("%s is a file here, so it is used instead of the stock playbook of that name.%s", arg, stockHint)}}
}

// suggestStock is " Did you mean "join"?" for a name near a stock
// playbook's, else "".
func suggestStock(name string, stock fs.FS) string {
	entries, err := fs.ReadDir(stock, ".")
	if err != nil {
		return ""
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".hcl"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	if s := modules.Nearest(strings.TrimSuffix(name, ".hcl"), names); s != "" {
		return fmt.Sprintf(" Did you mean %q (the stock playbook)?", s)
	}
	return ""
}

// LocalGroup is the group of --local's host "localhost": the group the
// stock playbooks target (hosts = "windows").
const LocalGroup = "windows"

// loadInventory reads the inventory (several -i sources merged in order,
// as inventory.Merge does), or makes the one-host inventory Local implies. With errors, the inventory is what could be read of it (or nil),
// for the scrubber to learn its secrets from. It adds what a saved plan fingerprints to sources ("inventory:"
// keys) and the text diagnostics point into to text, by file name.
func loadInventory(ctx context.Context, in planfile.Inputs, clusters *kube.Cache, files *limits.Files, sources, text map[string][]byte) (*inventory.Inventory, hcl.Diagnostics) {
	sourcesGiven := in.InventorySources()
	if len(sourcesGiven) == 0 {
		if !in.Local {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No inventory", Detail: "Give the hosts with -i INVENTORY (a file, a ConfigMap k8s://NAMESPACE/NAME, or a list like \"win01,win02,\"), or use --local to run on this machine."}}
		}
		inv := inventory.Local(LocalGroup)
		inv.Hosts["localhost"].Vars["connection"] = inventory.Var{Value: cty.StringVal("local")}
		return inv, setHostVars(inv, in.HostVars) // checked as over a -i inventory
	}
	var invs []*inventory.Inventory
	var diags hcl.Diagnostics
	for _, ref := range sourcesGiven {
		inv, d := loadInventorySource(ctx, ref, clusters, files, sources, text)
		diags = append(diags, d...)
		if inv != nil {
			invs = append(invs, inv)
		}
	}
	var inv *inventory.Inventory
	switch {
	case len(invs) == 1:
		inv = invs[0]
	case len(invs) > 1:
		var d hcl.Diagnostics
		inv, d = inventory.Merge(invs...)
		diags = append(diags, d...)
	}
	if diags.HasErrors() {
		return inv, diags // what could be read, for its secrets only
	}
	if in.Local {
		for _, name := range sortedHosts(inv) {
			inv.Hosts[name].Vars["connection"] = inventory.Var{Value: cty.StringVal("local")}
		}
	}
	return inv, append(diags, setHostVars(inv, in.HostVars)...)
}

// loadInventorySource reads one -i source: a ConfigMap k8s://NS/NAME, a
// file or an inline list.
func loadInventorySource(ctx context.Context, ref string, clusters *kube.Cache, files *limits.Files, sources, text map[string][]byte) (*inventory.Inventory, hcl.Diagnostics) {
	if kubeinv.IsRef(ref) {
		return loadKubeInventory(ctx, ref, clusters, sources, text)
	}
	inv, diags := inventory.LoadFrom(ref, files)
	if src, err := files.Read(ref); err == nil {
		abs, _ := filepath.Abs(ref)
		sources["inventory:"+abs] = src
		text[ref] = src
	}
	return inv, diags
}

// setHostVars sets each --host-var NAME=VALUE on every host, over what the
// inventory says, as the controller's --host-var does. Secrets are refused:
// a saved plan records its inputs, and a secret belongs in the inventory
// or the key Secret.
func setHostVars(inv *inventory.Inventory, list []string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, kv := range list {
		name, value, ok := strings.Cut(kv, "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok || name == "":
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid --host-var",
				Detail: fmt.Sprintf("--host-var %q: want NAME=VALUE, e.g. --host-var ansible_port=2222.", kv)})
			continue
		case !hclsyntax.ValidIdentifier(name):
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid --host-var",
				Detail: fmt.Sprintf("--host-var %q: %q is not a variable name (letters, digits, _ and -, not starting with a digit).", kv, name)})
			continue
		case inventory.SecretName(name):
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Secret in --host-var",
				Detail: fmt.Sprintf("--host-var %s: %q names a secret, which a command line (and a saved plan) must not carry; set it in the inventory (a BYOH inventory's key comes from its Secret).", name, name)})
			continue
		}
		for _, h := range sortedHosts(inv) {
			inv.Hosts[h].Vars[name] = inventory.Var{Value: cty.StringVal(value)}
		}
	}
	return diags
}

// loadKubeInventory reads k8s://NAMESPACE/NAME through the run's cluster
// client (its --kubeconfig, else KUBECONFIG, in-cluster, ~/.kube/config).
// The ConfigMap's rendered data is both what a saved plan fingerprints (so a
// changed ConfigMap makes the plan stale) and what diagnostics quote; the
// private key is in neither.
func loadKubeInventory(ctx context.Context, ref string, clusters *kube.Cache, sources, text map[string][]byte) (*inventory.Inventory, hcl.Diagnostics) {
	if _, _, diags := kubeinv.ParseRef(ref); diags.HasErrors() {
		return nil, diags
	}
	cl, err := clusters.Get("", "")
	if err != nil {
		return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot connect to the cluster",
			Detail: fmt.Sprintf("-i %s reads the cluster: %v. Give --kubeconfig FILE or set KUBECONFIG.", ref, err)}}
	}
	inv, src, diags := kubeinv.Load(ctx, cl.Kube, ref)
	for _, d := range diags {
		if d.Subject == nil && d.Severity == hcl.DiagError {
			d.Detail += fmt.Sprintf(" Cluster: %s.", cl.Source)
		}
	}
	if inv != nil { // also an empty ConfigMap: a saved plan notices entries appearing
		sources["inventory:"+ref] = src
		text[ref] = src
	}
	return inv, diags
}

func sortedHosts(inv *inventory.Inventory) []string {
	names := make([]string, 0, len(inv.Hosts))
	for n := range inv.Hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// forks is how many hosts the run works on at once: --forks, else the
// engine's default.
func forks(n int) int {
	if n <= 0 {
		return engine.DefaultForks
	}
	return n
}

// confineDirs are dirs made absolute with their symbolic links followed,
// so a path is compared with what it really names.
func confineDirs(dirs []string) ([]string, hcl.Diagnostics) {
	var out []string
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Cannot confine the run", Detail: fmt.Sprintf("The directory %s the run is confined to: %s.", d, err)}}
		}
		out = append(out, abs)
	}
	return out, nil
}
