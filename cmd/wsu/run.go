package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/transport/agentbin"
	sshtransport "github.com/wsu-project/wsu/transport/ssh"
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

// run is plan and apply: flags in, setup.Prepare, engine.Run, view and
// exit code out.
func (a *app) run(ctx context.Context, flags *pflag.FlagSet, o *runOptions, target string, mode engine.Mode) error {
	if o.output != "human" && o.output != "json" {
		return fmt.Errorf("--output must be human or json, not %q", o.output)
	}
	opts := setup.Options{
		Inputs:     o.inputs(target),
		Mode:       mode,
		Forks:      o.forks,
		Environ:    a.env,
		Passphrase: a.passphrasePrompt(),
		Agents:     a.agentSource(),
	}
	if saved, isPlan, err := planfile.Load(target); err != nil && isPlan {
		return err
	} else if isPlan {
		if given := inputFlags(flags, len(saved.Inputs.SensitiveVars) > 0); len(given) > 0 {
			return fmt.Errorf("%s is a saved plan, which carries its own inputs; drop %s (or plan again with them)", target, strings.Join(given, ", "))
		}
		if mode != engine.ModeApply {
			return fmt.Errorf("%s is a saved plan; apply it with `wsu apply %s`", target, target)
		}
		opts.Saved = saved
	}
	run, diags := setup.Prepare(ctx, opts)
	v := a.newView(o, run)
	defer v.Close()
	v.Diagnostics(diags) // errors, or warnings such as a missing SSH key
	if diags.HasErrors() {
		return exitError{1}
	}
	run.Request.Hooks = v
	res := engine.Run(ctx, run.Request)
	v.Diagnostics(res.SetupDiagnostics)
	if res.Failed() {
		return exitError{1}
	}
	if mode == engine.ModePlan && o.out != "" {
		if err := run.SavePlan(o.out, res); err != nil {
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

// inputs are the flags a saved plan records.
func (o *runOptions) inputs(target string) planfile.Inputs {
	return planfile.Inputs{
		Playbook: target, Inventory: o.inventory, VarFiles: o.varFiles, Vars: o.vars,
		Limit: o.limit, Tags: o.tags, SkipTags: o.skipTags, Local: o.local,
		Kubeconfig: o.kubeconfig, KubeContext: o.kubeContext,
	}
}

// agentSource is this run's agent builds (each hashed once, whatever the
// host count); nil when wsu runs without them (in-process tests).
func (a *app) agentSource() *agentbin.Source {
	if a.agents == nil {
		return nil
	}
	return agentbin.New(*a.agents)
}

// passphrasePrompt asks on the terminal for an encrypted SSH key's
// passphrase (once per key); off a terminal (a Job, a pipe) there is none
// and the passphrase must be in WSU_SSH_PASSPHRASE.
func (a *app) passphrasePrompt() sshtransport.PassphrasePrompt {
	f, ok := a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return func(what string) ([]byte, error) {
		fmt.Fprintf(a.stderr, "Enter the passphrase for the private key %s: ", what)
		p, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		return p, err
	}
}

func (a *app) newView(o *runOptions, run *setup.Run) view.View {
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
		Sources:  run.Text,
		Hidden:   run.Hidden,
		Err:      a.stderr,
	})
}

// inputFlags names the input flags set on the command line; -var aside
// when the saved plan left sensitive -var options out (setup checks that
// the options given are those).
func inputFlags(flags *pflag.FlagSet, sensitiveVars bool) []string {
	var given []string
	for _, name := range []string{"inventory", "var", "var-file", "limit", "tags", "skip-tags", "local", "kubeconfig", "context"} {
		if name == "var" && sensitiveVars {
			continue
		}
		if flags.Changed(name) {
			given = append(given, "--"+name)
		}
	}
	return given
}
