package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/term"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/inventory/kubeinv"
	"github.com/wsu-project/wsu/kube"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/playbooks"
	"github.com/wsu-project/wsu/transport"
	"github.com/wsu-project/wsu/transport/agentbin"
	sshtransport "github.com/wsu-project/wsu/transport/ssh"
	"github.com/wsu-project/wsu/version"
	"github.com/wsu-project/wsu/view"
)

// runOptions are the flags plan and apply share.
type runOptions struct {
	inventory        string
	kubeconfig       string
	kubeContext      string
	vars             []string
	varFiles         []string
	limit            string
	tags             []string
	skipTags         []string
	forks            int
	output           string
	noColor          bool
	local            bool
	verbose          bool
	out              string // plan -out
	detailedExitcode bool   // plan
	check            bool   // apply --check: plan
	diff             bool   // apply --diff
}

func (o *runOptions) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.inventory, "inventory", "i", "", "inventory file (INI, YAML or HCL), a BYOH ConfigMap k8s://NAMESPACE/NAME, or a comma-separated host list like \"win01,win02,\"")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for -i k8s://... and the cluster modules (default: KUBECONFIG, in-cluster, ~/.kube/config)")
	f.StringVar(&o.kubeContext, "context", "", "kubeconfig context for -i k8s://... and the cluster modules (default: the kubeconfig's current context)")
	f.StringArrayVar(&o.vars, "var", nil, "set a variable: -var 'name=value' (repeatable)")
	f.StringArrayVar(&o.varFiles, "var-file", nil, "read variable values from an HCL file (repeatable)")
	f.StringVarP(&o.limit, "limit", "l", "", "further limit hosts to a pattern")
	f.StringSliceVarP(&o.tags, "tags", "t", nil, "run only tasks with these tags")
	f.StringSliceVar(&o.skipTags, "skip-tags", nil, "skip tasks with these tags")
	f.IntVarP(&o.forks, "forks", "f", engine.DefaultForks, "how many hosts to work on at once")
	f.StringVarP(&o.output, "output", "o", "human", "output format: human or json (one event per line)")
	f.BoolVar(&o.noColor, "no-color", false, "no colours, even on a terminal")
	f.BoolVar(&o.local, "local", false, "run against this machine (connection local), without an inventory")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "also show unchanged and skipped tasks")
}

func (a *app) planCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "plan PLAYBOOK",
		Short: "Show what apply would change, changing nothing",
		Long: `Plan reads every host's current state and shows, per host and task, what apply would
change: + create, ~ update (field: old → new), - delete, -/+ replace, ! run, and the
services that would be restarted. Values known only after apply show as
(known after apply); sensitive values as (sensitive).

Exit codes: 0 success; 1 error. With -detailed-exitcode: 0 no changes, 1 error,
2 changes present.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.run(cmd.Context(), cmd.Flags(), o, args[0], engine.ModePlan)
		},
	}
	o.bind(cmd)
	cmd.Flags().StringVar(&o.out, "out", "", "save the plan to this file, to apply exactly it later with 'wsu apply FILE'")
	cmd.Flags().BoolVar(&o.detailedExitcode, "detailed-exitcode", false, "exit 2 when there are changes, 0 when none")
	return cmd
}

func (a *app) applyCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "apply PLAYBOOK | PLANFILE",
		Short: "Bring hosts to the state a playbook describes",
		Long: `Apply plans and applies each task in turn on every host. Given a plan saved by
'wsu plan -out FILE', it applies exactly that plan, and refuses if anything it was
based on (playbook files, variables, inventory, a host's state) has changed since.

--check is plan under Ansible's name. Exit codes: 0 success; 1 error, or a host
failed or was unreachable.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mode := engine.ModeApply
			if o.check {
				mode = engine.ModePlan
			}
			return a.run(cmd.Context(), cmd.Flags(), o, args[0], mode)
		},
	}
	o.bind(cmd)
	cmd.Flags().BoolVarP(&o.check, "check", "C", false, "plan only (Ansible's check mode)")
	cmd.Flags().BoolVarP(&o.diff, "diff", "D", false, "show each change's field diff as it is applied")
	return cmd
}

// run is plan and apply.
func (a *app) run(ctx context.Context, flags *pflag.FlagSet, o *runOptions, target string, mode engine.Mode) error {
	if o.output != "human" && o.output != "json" {
		return fmt.Errorf("--output must be human or json, not %q", o.output)
	}
	var expect *planfile.Plan
	if saved, isPlan, err := planfile.Load(target); err != nil && isPlan {
		return err
	} else if isPlan {
		if given := inputFlags(flags); len(given) > 0 {
			return fmt.Errorf("%s is a saved plan, which carries its own inputs; drop %s (or plan again with them)", target, strings.Join(given, ", "))
		}
		if mode != engine.ModeApply {
			return fmt.Errorf("%s is a saved plan; apply it with `wsu apply %s`", target, target)
		}
		expect = saved
		target = saved.Playbook
		o.inventory, o.varFiles, o.vars, o.limit = saved.Inventory, saved.VarFiles, saved.Vars, saved.Limit
		o.tags, o.skipTags, o.local = saved.Tags, saved.SkipTags, saved.Local
		o.kubeconfig, o.kubeContext = saved.Kubeconfig, saved.KubeContext
	}

	// --kubeconfig reaches the k8s:// inventory and every cluster module.
	ctx = kube.WithKubeconfig(ctx, o.kubeconfig)
	ctx = kube.WithKubeContext(ctx, o.kubeContext)
	loader := playbook.NewLoader(all.Registry(), playbooks.FS)
	v := a.newView(o, loader.Sources())
	defer v.Close()
	target = resolvePlaybook(target)
	pb, diags := loader.Load(target)
	if diags.HasErrors() {
		v.Diagnostics(diags)
		return exitError{1}
	}
	v.Diagnostics(diags) // warnings
	sources := map[string][]byte{}
	for k, s := range loader.Sources() {
		sources[k] = s
	}
	inv, invSources, invText, diags := a.loadInventory(ctx, o)
	// The view quotes source lines from the loader's map; the inventory's
	// text joins it there (only for display: the plan's sources are above).
	for k, s := range invText {
		loader.Sources()[k] = s
	}
	// Var files too, so their diagnostics quote the line; the engine reads
	// them again (and reports one it cannot read).
	for _, f := range o.varFiles {
		if src, err := os.ReadFile(f); err == nil {
			loader.Sources()[f] = src
		}
	}
	v.Diagnostics(diags) // errors, or warnings such as a missing SSH key
	if diags.HasErrors() {
		return exitError{1}
	}
	for k, s := range invSources {
		sources[k] = s
	}
	// On a terminal an encrypted SSH key's passphrase is asked for (once
	// per key); elsewhere (a Job, a pipe) it must be in WSU_SSH_PASSPHRASE.
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		sshtransport.SetPassphrasePrompt(func(what string) ([]byte, error) {
			fmt.Fprintf(a.stderr, "Enter the passphrase for the private key %s: ", what)
			p, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(a.stderr)
			return p, err
		})
		defer sshtransport.SetPassphrasePrompt(nil)
	}
	// This run's agent builds: each hashed once, whatever the host count.
	var agents *agentbin.Source
	if a.agents != nil {
		agents = agentbin.New(*a.agents)
	}
	transports := transport.NewRegistry(transport.Options{Agents: agents})
	def := "ssh"
	if o.local {
		def = "local"
	}
	req := engine.Request{
		Playbook:  pb,
		Inventory: inv,
		Inputs:    engine.Inputs{VarFiles: o.varFiles, Vars: o.vars, Environ: a.env},
		Mode:      mode,
		Registry:  all.Registry(),
		Connector: engine.ConnectorFunc(func(ctx context.Context, t engine.Target) (host.Host, error) {
			return transports.Dial(ctx, t.Name, t.Vars, def)
		}),
		Hooks:    v,
		Forks:    o.forks,
		Limit:    o.limit,
		Tags:     o.tags,
		SkipTags: o.skipTags,
		Sources:  sources,
		Expect:   expect,
	}
	res := engine.Run(ctx, req)
	v.Diagnostics(res.SetupDiagnostics)
	if res.Failed() {
		return exitError{1}
	}
	if mode == engine.ModePlan && o.out != "" {
		p := res.Plan
		p.WSUVersion = version.Version
		p.Playbook, p.Inventory, p.VarFiles, p.Vars = target, o.inventory, o.varFiles, o.vars
		p.Limit, p.Tags, p.SkipTags, p.Local = o.limit, o.tags, o.skipTags, o.local
		p.Kubeconfig, p.KubeContext = o.kubeconfig, o.kubeContext
		if err := planfile.Save(o.out, p); err != nil {
			return fmt.Errorf("saving the plan: %w", err)
		}
		if o.output != "json" {
			fmt.Fprintf(a.stdout, "\nSaved the plan to %s. Apply exactly it with: wsu apply %s\n", o.out, o.out)
		}
	}
	if mode == engine.ModePlan && o.detailedExitcode && res.Changes > 0 {
		return exitError{2}
	}
	return nil
}

func (a *app) newView(o *runOptions, sources map[string][]byte) view.View {
	if o.output == "json" {
		return view.NewJSON(a.stdout)
	}
	tty := isTerminal(a.stdout)
	_, noColorEnv := os.LookupEnv("NO_COLOR")
	return view.NewHuman(a.stdout, view.HumanOptions{
		Color:    tty && !o.noColor && !noColorEnv,
		Progress: tty,
		Diff:     o.diff,
		Verbose:  o.verbose,
		Sources:  sources,
		Err:      a.stderr,
	})
}

// inputFlags names the input flags set on the command line.
func inputFlags(flags *pflag.FlagSet) []string {
	var given []string
	for _, name := range []string{"inventory", "var", "var-file", "limit", "tags", "skip-tags", "local", "kubeconfig", "context"} {
		if flags.Changed(name) {
			given = append(given, "--"+name)
		}
	}
	return given
}

// loadInventory reads -i, or makes the one-host inventory --local implies.
// It returns the inventory, what a saved plan fingerprints ("inventory:"
// keys), and the text its diagnostics point into, by file name.
func (a *app) loadInventory(ctx context.Context, o *runOptions) (*inventory.Inventory, map[string][]byte, map[string][]byte, hcl.Diagnostics) {
	sources, text := map[string][]byte{}, map[string][]byte{}
	if o.inventory == "" {
		if !o.local {
			return nil, nil, nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No inventory", Detail: "Give the hosts with -i INVENTORY (a file, a ConfigMap k8s://NAMESPACE/NAME, or a list like \"win01,win02,\"), or use --local to run on this machine."}}
		}
		inv := inventory.FromList("localhost,")
		inv.Hosts["localhost"].Vars["connection"] = inventory.Var{Value: cty.StringVal("local")}
		return inv, sources, text, nil
	}
	var inv *inventory.Inventory
	var diags hcl.Diagnostics
	if kubeinv.IsRef(o.inventory) {
		inv, diags = a.loadKubeInventory(ctx, o.inventory, sources, text)
	} else {
		inv, diags = inventory.Load(o.inventory)
		if src, err := os.ReadFile(o.inventory); err == nil {
			abs, _ := filepath.Abs(o.inventory)
			sources["inventory:"+abs] = src
			text[o.inventory] = src
		}
	}
	if diags.HasErrors() {
		return nil, nil, text, diags
	}
	if o.local {
		for _, name := range sortedHosts(inv) {
			inv.Hosts[name].Vars["connection"] = inventory.Var{Value: cty.StringVal("local")}
		}
	}
	return inv, sources, text, diags
}

// loadKubeInventory reads -i k8s://NAMESPACE/NAME through the run's shared
// cluster client (--kubeconfig, else KUBECONFIG, in-cluster, ~/.kube/config).
// The ConfigMap's rendered data is both what a saved plan fingerprints (so a
// changed ConfigMap makes the plan stale) and what diagnostics quote; the
// private key is in neither.
func (a *app) loadKubeInventory(ctx context.Context, ref string, sources, text map[string][]byte) (*inventory.Inventory, hcl.Diagnostics) {
	if _, _, diags := kubeinv.ParseRef(ref); diags.HasErrors() {
		return nil, diags
	}
	cl, err := kube.Shared(ctx, "", "")
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
