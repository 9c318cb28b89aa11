package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/transport/agentbin"
	sshtransport "github.com/wsu-project/wsu/transport/ssh"
	"github.com/wsu-project/wsu/version"
	"github.com/wsu-project/wsu/view"
)

// runOptions are the flags plan and apply share.
type runOptions struct {
	inventories      []string // -i, repeatable
	kubeconfig       string
	kubeContext      string
	vars             []string
	varFiles         []string
	joinConfig       string   // --join-config: a kubeadm JoinConfiguration
	hostVars         []string // --host-var NAME=VALUE: on every host
	extraVars        []string // Ansible's -e: NAME=VALUE..., @FILE or JSON
	syntaxCheck      bool     // Ansible's --syntax-check: validate
	listHosts        bool     // Ansible's --list-hosts
	listTasks        bool     // Ansible's --list-tasks
	limit            string
	tags             []string
	skipTags         []string
	startAtTask      string // Ansible's --start-at-task
	forks            int
	output           string
	noColor          bool
	local            bool
	verbose          bool
	out              string // plan -out
	detailedExitcode bool   // plan
	check            bool   // apply --check: plan
	diff             bool   // apply --diff
	autoApprove      bool   // apply --auto-approve: no confirmation
}

func (o *runOptions) bind(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVarP(&o.inventories, "inventory", "i", nil, "inventory file (INI, YAML or HCL), a BYOH ConfigMap k8s://NAMESPACE/NAME, or a comma-separated host list like \"win01,win02,\" or \"win[01:03],\"; repeatable: merged in order, later values win")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig for -i k8s://... and the cluster modules (default: KUBECONFIG, in-cluster, ~/.kube/config)")
	f.StringVar(&o.kubeContext, "context", "", "kubeconfig context for -i k8s://... and the cluster modules (default: the kubeconfig's current context)")
	f.StringArrayVar(&o.vars, "var", nil, "set a variable: -var 'name=value' (repeatable)")
	f.StringArrayVar(&o.varFiles, "var-file", nil, "read variable values from an HCL file, or a JSON one (*.json) (repeatable)")
	f.StringVar(&o.joinConfig, "join-config", "", joinConfigHelp)
	f.StringArrayVar(&o.hostVars, "host-var", nil, "set an inventory variable on every host, over the inventory's: --host-var ansible_port=2222 (repeatable; for a BYOH ConfigMap, which holds only addresses and users)")
	f.StringArrayVarP(&o.extraVars, "extra-vars", "e", nil, "as Ansible: 'name=value other=value' (like --var), @FILE (like --var-file) or a JSON object (repeatable)")
	f.BoolVar(&o.listHosts, "list-hosts", false, "as Ansible: list each play's hosts, touching no host")
	f.BoolVar(&o.listTasks, "list-tasks", false, "as Ansible: list each play's tasks that --tags, --skip-tags and --start-at-task select, touching no host")
	f.BoolVar(&o.syntaxCheck, "syntax-check", false, "as Ansible: only check the playbook and the inputs given (wsu validate), touching no host")
	f.StringVarP(&o.limit, "limit", "l", "", "further limit hosts to a pattern")
	f.StringSliceVarP(&o.tags, "tags", "t", nil, "run only tasks with these tags")
	f.StringSliceVar(&o.skipTags, "skip-tags", nil, "skip tasks with these tags")
	f.StringVar(&o.startAtTask, "start-at-task", "", "as Ansible: start at the first task with this name (or address), skipping the tasks and plays before it")
	f.IntVarP(&o.forks, "forks", "f", engine.DefaultForks, "how many hosts to work on at once")
	f.StringVarP(&o.output, "output", "o", "human", "output format: human, json (one event per line) or yaml (one document per event)")
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

Given a playbook, apply first shows the plan and asks for 'yes' on the terminal, as
terraform apply does (with stdout redirected, the question goes to stderr). A saved
plan or --auto-approve needs no answer. Where no one can answer (--output json or
yaml, stdin not a terminal, the environment variable CI set) apply of a playbook
without --auto-approve is refused, changing nothing.

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
	cmd.Flags().BoolVar(&o.autoApprove, "auto-approve", false, "apply a playbook without showing the plan and asking for 'yes' first (as Terraform)")
	return cmd
}

// joinConfigHelp is --join-config's help, on plan, apply and validate.
const joinConfigHelp = "read join's variables from a kubeadm JoinConfiguration (kubeadm.k8s.io/v1beta3 or v1beta4), as Cluster API writes /run/kubeadm/kubeadm-join-config.yaml: endpoint, token (sensitive), caCertHashes, node name, taints, kubeletExtraArgs; its values rank above the playbook's defaults and the var files, below -var and -e"

// run is plan and apply: flags in, setup.Prepare, engine.Run, view and
// exit code out.
func (a *app) run(ctx context.Context, flags *pflag.FlagSet, o *runOptions, target string, mode engine.Mode) error {
	if o.output != "human" && o.output != "json" && o.output != "yaml" {
		return fmt.Errorf("--output must be human, json or yaml, not %q", o.output)
	}
	if o.forks < 1 {
		return fmt.Errorf("--forks must be at least 1 (how many hosts to work on at once), not %d", o.forks)
	}
	if flags.Changed("limit") && strings.Trim(o.limit, " ,:") == "" {
		return fmt.Errorf("--limit %q selects no host; drop --limit to run on every host of the plays", o.limit)
	}
	if err := o.expandExtraVars(); err != nil {
		return err
	}
	if o.syntaxCheck {
		return a.syntaxCheck(o, target)
	}
	opts := setup.Options{
		Request:    o.request(target, mode),
		Environ:    a.env,
		Passphrase: a.passphrasePrompt(),
		Agents:     a.agentSource(),
	}
	// The argument is read once, as a plan or else as the playbook: it may
	// be a pipe. A FIFO nothing writes to is given up on at Ctrl-C.
	opts.Files = limits.NewFiles(ctx)
	if saved, isPlan, err := planfile.LoadFrom(target, opts.Files); err != nil && isPlan {
		return err
	} else if isPlan {
		if given := inputFlags(flags, len(saved.Inputs.SensitiveVars) > 0); len(given) > 0 {
			return fmt.Errorf("%s is a saved plan, which carries its own inputs; drop %s (or plan again with them)", target, strings.Join(given, ", "))
		}
		if mode != engine.ModeApply {
			return fmt.Errorf("%s is a saved plan; apply it with `wsu apply %s`, or review it with `wsu show %s`", target, target, target)
		}
		if wd, err := os.Getwd(); err == nil {
			if err := saved.CheckDir(wd); err != nil {
				return fmt.Errorf("%s: %w", target, err)
			}
		}
		opts.Saved = saved
	}
	if mode == engine.ModeApply && opts.Saved == nil && !o.autoApprove && !o.listHosts && !o.listTasks {
		if why := a.cannotAsk(o); why != "" {
			return fmt.Errorf("apply needs approval, and wsu cannot ask for it: %s; nothing was changed. "+
				"Review the plan (wsu plan) and pass --auto-approve, or save it with `wsu plan -out FILE` and apply that with `wsu apply FILE`", why)
		}
	}
	run, diags := setup.Prepare(ctx, opts)
	v := a.newView(o, run)
	defer v.Close()
	if opts.Saved != nil && opts.Saved.WSUVersion != version.Version {
		v.Diagnostics(hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: "Saved plan from another wsu version",
			Detail: fmt.Sprintf("%s was made by wsu %s; this is wsu %s. It is applied only if this wsu plans exactly the same changes (otherwise it is refused as stale).", target, opts.Saved.WSUVersion, version.Version)}})
	}
	v.Diagnostics(diags) // errors, or warnings such as a missing SSH key
	if diags.HasErrors() {
		return exitError{1}
	}
	if o.listHosts || o.listTasks {
		return a.list(run, o, v)
	}
	run.Request.Hooks = v
	if a.timingsFile != "" {
		run.Request.Connector = a.timings.connector(run.Request.Connector)
	}
	approved := false
	if mode == engine.ModeApply && opts.Saved == nil && !o.autoApprove {
		// The plan shown, its check and the apply share each host's
		// connection.
		conns := engine.NewConnections()
		defer conns.Close()
		run.Request.Connector = conns.Connector(run.Request.Connector)
		if proceed, err := a.approve(ctx, run); !proceed {
			return err
		}
		approved = true
	}
	run.Request.Diff = o.diff
	if a.timingsFile != "" {
		a.timings.mark(&a.timings.RunStart)
	}
	res := engine.Run(ctx, run.Request)
	if a.timingsFile != "" {
		a.timings.mark(&a.timings.RunEnd)
	}
	if approved {
		// The plan shown before the question showed its warnings.
		v.Diagnostics(errorsOnly(res.SetupDiagnostics))
	} else {
		v.Diagnostics(res.SetupDiagnostics)
	}
	if res.Failed() {
		return exitError{1}
	}
	if mode == engine.ModePlan && o.out != "" {
		if err := run.SavePlan(o.out, res); err != nil {
			return fmt.Errorf("saving the plan: %w", err)
		}
		if o.output == "human" {
			fmt.Fprintf(a.stdout, "\nSaved the plan to %s. Apply exactly it with: wsu apply %s\n", o.out, o.out)
		}
	}
	if mode == engine.ModePlan && o.detailedExitcode && res.NothingChecked != "" {
		return exitError{1} // 0 would claim the hosts were checked and match
	}
	if mode == engine.ModePlan && o.detailedExitcode && res.Changes > 0 {
		return exitError{2}
	}
	return nil
}

// cannotAsk is why apply of a playbook cannot ask a person for "yes"
// ("" when it can): as terraform apply, an unattended apply without
// --auto-approve or a saved plan is refused rather than run unreviewed.
func (a *app) cannotAsk(o *runOptions) string {
	f, ok := a.stdin.(*os.File)
	switch {
	case o.output != "human":
		return fmt.Sprintf("--output %s is read by a program, not a person", o.output)
	case envValue(a.env, "CI") != "":
		return "the environment variable CI is set"
	case !ok || !term.IsTerminal(int(f.Fd())):
		return "stdin is not a terminal"
	}
	return ""
}

// promptTo is where the question goes: stdout on a terminal, else
// stderr, so that with stdout redirected (wsu apply ... > log) the
// question is seen rather than written into the file while wsu waits.
func (a *app) promptTo() (w io.Writer, planAbove bool) {
	if isTerminal(a.stdout) {
		return a.stdout, true
	}
	return a.stderr, false
}

// approve plans, shows the plan and asks for "yes", as terraform apply
// does. proceed is true when the answer was yes: the run then applies
// exactly the plan shown (Request.Expect), refusing if it went stale
// while the question was open. Otherwise err is the exit (nil when there
// was nothing to apply).
func (a *app) approve(ctx context.Context, run *setup.Run) (proceed bool, err error) {
	req := run.Request
	req.Mode = engine.ModePlan
	res := engine.Run(ctx, req)
	if v, ok := req.Hooks.(view.View); ok {
		v.Diagnostics(res.SetupDiagnostics)
		v.Close() // prints what the plan still holds
	}
	if res.Failed() {
		return false, exitError{1}
	}
	deferred := 0
	for _, r := range res.Recap {
		deferred += r.Deferred
	}
	if res.NothingChecked != "" || res.Changes+deferred == 0 {
		return false, nil // the plan said so
	}
	w, above := a.promptTo()
	where := "described above"
	if !above {
		where = "in the plan written to standard output"
	}
	fmt.Fprintf(w, "\nDo you want to perform these actions?\n  wsu will apply the changes %s to the hosts.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ", where)
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(a.stdin).ReadString('\n')
		answer <- strings.TrimSpace(line)
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(w)
		return false, fmt.Errorf("apply cancelled: interrupted; nothing was changed")
	case got := <-answer:
		fmt.Fprintln(w)
		if got != "yes" {
			return false, fmt.Errorf("apply cancelled: only 'yes' approves (got %q); nothing was changed", got)
		}
	}
	run.Request.Expect = res.Plan
	return true, nil
}

// errorsOnly are the errors among diags.
func errorsOnly(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			out = append(out, d)
		}
	}
	return out
}

// envValue is NAME's value in env, or "".
func envValue(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// request is the run the flags ask for: the inputs a saved plan records,
// the mode and --forks.
func (o *runOptions) request(target string, mode engine.Mode) setup.Request {
	return setup.Request{Inputs: o.inputs(target), Mode: mode, Forks: o.forks}
}

// inputs are the flags a saved plan records.
func (o *runOptions) inputs(target string) planfile.Inputs {
	return planfile.Inputs{
		Playbook: target, Inventory: first(o.inventories), MoreInventories: rest(o.inventories), VarFiles: o.varFiles, JoinConfig: o.joinConfig, Vars: o.vars, HostVars: o.hostVars,
		Limit: o.limit, Tags: o.tags, SkipTags: o.skipTags, StartAtTask: o.startAtTask, Local: o.local,
		Kubeconfig: o.kubeconfig, KubeContext: o.kubeContext,
	}
}

// first and rest split a repeatable flag's values as planfile.Inputs keeps
// -i: the first source, then the others.
func first(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return list[0]
}

func rest(list []string) []string {
	if len(list) < 2 {
		return nil
	}
	return list[1:]
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

// jsonView is -o json's view, or -o yaml's: the same events.
func (a *app) jsonView(format string) *view.JSON {
	if format == "yaml" {
		return view.NewJSON(&yamlStream{w: a.stdout})
	}
	return view.NewJSON(a.stdout)
}

func (a *app) newView(o *runOptions, run *setup.Run) view.View {
	if o.output == "json" || o.output == "yaml" {
		return a.jsonView(o.output)
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
		Clock:    a.clock,
	})
}

// inputFlags names the input flags set on the command line; -var aside
// when the saved plan left sensitive -var options out (setup checks that
// the options given are those).
func inputFlags(flags *pflag.FlagSet, sensitiveVars bool) []string {
	var given []string
	for _, name := range []string{"inventory", "var", "var-file", "join-config", "host-var", "extra-vars", "limit", "tags", "skip-tags", "start-at-task", "local", "kubeconfig", "context"} {
		if name == "var" && sensitiveVars {
			continue
		}
		if flags.Changed(name) {
			given = append(given, "--"+name)
		}
	}
	return given
}

// expandExtraVars turns Ansible's -e values into -var and -var-file ones:
// @FILE is a var file, a JSON object sets each member, and
// "a=1 b=2" sets each pair.
func (o *runOptions) expandExtraVars() error {
	for _, e := range o.extraVars {
		e = strings.TrimSpace(e)
		switch {
		case strings.HasPrefix(e, "@"):
			o.varFiles = append(o.varFiles, e[1:])
		case strings.HasPrefix(e, "{"):
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(e), &m); err != nil {
				return fmt.Errorf("-e %s: not a JSON object: %v", e, err)
			}
			names := make([]string, 0, len(m))
			for k := range m {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				var str string
				if json.Unmarshal(m[k], &str) == nil {
					o.vars = append(o.vars, k+"="+str)
				} else {
					o.vars = append(o.vars, k+"="+string(m[k]))
				}
			}
		default:
			fields := strings.Fields(e)
			for _, f := range fields {
				if !strings.Contains(f, "=") {
					o.vars = append(o.vars, e) // one value with spaces, or a mistake -var reports
					fields = nil
					break
				}
			}
			o.vars = append(o.vars, fields...)
		}
	}
	return nil
}

// syntaxCheck is --syntax-check: validate with this run's inputs.
func (a *app) syntaxCheck(o *runOptions, target string) error {
	in := o.inputs(target)
	run, diags := a.validate(a.ctx, planfile.Inputs{Playbook: in.Playbook, Inventory: in.Inventory, MoreInventories: in.MoreInventories, Vars: in.Vars, VarFiles: in.VarFiles, JoinConfig: in.JoinConfig})
	_, noColorEnv := os.LookupEnv("NO_COLOR")
	a.diagnostics(isTerminal(a.stderr) && !o.noColor && !noColorEnv, run, diags)
	if diags.HasErrors() {
		return exitError{1}
	}
	fmt.Fprintln(a.stdout, "Success! The playbook is valid.")
	return nil
}

// yamlStream re-encodes the JSON view's lines as YAML documents, for -o
// yaml as kubectl offers it beside -o json: the same events and fields.
type yamlStream struct {
	w   io.Writer
	buf []byte
}

func (y *yamlStream) Write(p []byte) (int, error) {
	y.buf = append(y.buf, p...)
	for {
		i := bytes.IndexByte(y.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := y.buf[:i]
		y.buf = y.buf[i+1:]
		doc, err := sigyaml.JSONToYAML(line)
		if err != nil {
			return 0, err
		}
		if _, err := fmt.Fprintf(y.w, "---\n%s", doc); err != nil {
			return 0, err
		}
	}
}

// list is --list-hosts and --list-tasks: each play in run order with its
// hosts and the tasks selected, from the inventory and the playbook alone.
func (a *app) list(run *setup.Run, o *runOptions, v view.View) error {
	plays, diags := engine.Outline(run.Request)
	v.Diagnostics(diags)
	if j, ok := v.(*view.JSON); ok {
		listEvents(j, plays, o)
	} else {
		a.listText(run, plays, o)
	}
	if diags.HasErrors() {
		return exitError{1}
	}
	return nil
}

// listEvents is the list as play_outline events, for -o json and yaml.
func listEvents(j *view.JSON, plays []engine.PlayOutline, o *runOptions) {
	for _, p := range plays {
		e := engine.Event{Schema: engine.EventSchema, Type: engine.EventPlayOutline, Time: time.Now().UTC(), Play: p.Play, Count: len(p.Tasks)}
		if p.HostsErr != "" {
			e.Message = "hosts not known: " + p.HostsErr
		} else if o.listHosts {
			e.Hosts = p.Hosts
		}
		if o.listTasks {
			e.Tasks = p.Tasks
		}
		j.Event(e)
	}
}

// listText is the list as Ansible prints it.
func (a *app) listText(run *setup.Run, plays []engine.PlayOutline, o *runOptions) {
	fmt.Fprintf(a.stdout, "playbook: %s\n", run.Inputs.Playbook)
	for _, p := range plays {
		fmt.Fprintf(a.stdout, "\n  play %q", p.Play)
		if p.HostsErr != "" {
			fmt.Fprintf(a.stdout, ": hosts not known: %s\n", p.HostsErr)
		} else {
			fmt.Fprintf(a.stdout, " (%d %s)\n", len(p.Hosts), map[bool]string{true: "host", false: "hosts"}[len(p.Hosts) == 1])
		}
		if o.listHosts {
			for _, h := range p.Hosts {
				fmt.Fprintf(a.stdout, "    %s\n", h)
			}
		}
		if o.listTasks {
			if o.listHosts {
				fmt.Fprintln(a.stdout, "    tasks:")
			}
			for _, t := range p.Tasks {
				tags := ""
				if len(t.Tags) > 0 {
					tags = "  tags: " + strings.Join(t.Tags, ", ")
				}
				fmt.Fprintf(a.stdout, "    %s (%s)%s\n", t.Address, t.Module, tags)
			}
		}
	}
}
