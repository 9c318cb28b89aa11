package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/transport/agentbin"
	"github.com/wsu-project/wsu/version"
	"github.com/wsu-project/wsu/view"
)

// exitError carries an exit code through cobra without printing anything
// more (the view already said what went wrong).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// app holds what every command shares.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	env    []string
	// agents say where a run finds its agent builds (main: agentOptions);
	// nil: none, the local host in-process.
	agents *agentbin.Options
	// clock times the human view's progress; nil: the real clock (tests
	// tick a fake one).
	clock view.Clock

	cpuProfile  string
	profileFile *os.File
	memProfile  string    // hidden --memprofile
	peak        *peakHeap // its sampler, while the command runs
	// timingsFile is the hidden --timings; timings records into it.
	timingsFile string
	timings     *timings
	// replace runs a program in place of this process (`wsu controller`
	// runs wsu-controller so); nil: as a child (in-process use, Windows).
	replace func(path string, argv, env []string) error
	// ignored are the other tools' options wsu accepts and ignores
	// (-input=false), which normalizeArgs hands over as the hidden
	// --ignored-option.
	ignored []string
}

// Execute runs the CLI in-process, without agent builds (see agentOptions),
// and returns the process exit code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return execute(ctx, args, stdin, stdout, stderr, nil, nil, time.Now())
}

// execute runs the CLI with the given agent builds and process replacer
// (app.replace); started is when main began (the hidden --timings reports
// it).
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, agents *agentbin.Options,
	replace func(path string, argv, env []string) error, started time.Time) int {
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, env: os.Environ(), agents: agents, replace: replace, timings: &timings{Main: started}}
	root := a.rootCommand()
	if len(args) > 0 && args[0] == "controller" {
		root.SetArgs(args) // wsu-controller's arguments, exactly as given
	} else {
		root.SetArgs(normalizeArgs(root, args))
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if perr := a.stopProfile(); perr != nil && err == nil {
		err = perr
	}
	if a.timingsFile != "" {
		if terr := a.timings.write(a.timingsFile); terr != nil && err == nil {
			err = terr
		}
	}
	var ee exitError
	switch {
	case err == nil:
		return 0
	case !errors.As(err, &ee) && machineOutput(args) != "":
		// -o json or yaml: the error is an event on stdout, where the
		// program reading the run looks, not text on stderr.
		a.jsonView(machineOutput(args)).Diagnostics(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: err.Error()}})
		return 1
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintf(stderr, "Error: %s\n", err)
		return 1
	}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "wsu",
		Short: "Declarative playbooks that join Windows hosts to Kubernetes",
		Long: `wsu runs HCL playbooks against Windows hosts: plan shows what would change,
apply changes it. The stock playbooks join, upgrade and remove Windows workers.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --version (-v, -version) prints what `wsu version` prints, as
	// terraform -version does; cobra's own would print another line.
	showVersion := root.Flags().BoolP("version", "v", false, "print the wsu version and the agent builds it deploys (as wsu version)")
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if *showVersion {
			a.printVersion()
			return nil
		}
		return cmd.Help()
	}
	// For the benchmarks (make bench, docs/performance.md): not a user option.
	root.PersistentFlags().StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentFlags().StringVar(&a.memProfile, "memprofile", "", "write a heap profile, taken when the heap was largest, to this file")
	root.PersistentFlags().MarkHidden("memprofile")
	root.PersistentFlags().StringVar(&a.timingsFile, "timings", "", "write when each phase of the run happened to this file (JSON)")
	root.PersistentFlags().MarkHidden("timings")
	root.PersistentFlags().StringArrayVar(&a.ignored, ignoredFlag, nil, "another tool's option wsu accepts and ignores")
	root.PersistentFlags().MarkHidden(ignoredFlag)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		a.noteIgnored(cmd)
		return a.startProfile()
	}
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(a.planCommand(), a.applyCommand(), a.validateCommand(), a.fmtCommand(), a.modulesCommand(), a.versionCommand(), a.agentCommand(), a.payloadCommand(), a.playbooksCommand(), a.controllerCommand(), a.approveCommand(), a.showCommand(), a.userDataCommand())
	return root
}

// printAgents lists the agent builds a run would deploy: embedded, a file
// beside wsu, or wsu itself.
func (a *app) printAgents() {
	if a.agents == nil {
		return
	}
	src := agentbin.New(*a.agents)
	for _, p := range []agentbin.Platform{{OS: "windows", Arch: "amd64"}, {OS: "linux", Arch: "amd64"}} {
		b, err := src.For(p)
		if err != nil {
			fmt.Fprintf(a.stdout, "agent %s: none (make build embeds it)\n", p)
			continue
		}
		where := b.Name()
		if b.InMemory() {
			where = "embedded"
		}
		r, size, err := b.Open()
		if err != nil {
			fmt.Fprintf(a.stdout, "agent %s: %s: %v\n", p, where, err)
			continue
		}
		r.Close()
		fmt.Fprintf(a.stdout, "agent %s: %s, %.1f MB\n", p, where, float64(size)/1e6)
	}
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the wsu version and the agent builds it deploys",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.printVersion()
			return nil
		},
	}
}

// printVersion is wsu version and wsu --version: the version, then the
// agent builds a run would deploy.
func (a *app) printVersion() {
	fmt.Fprintf(a.stdout, "wsu %s\n", version.Version)
	a.printAgents()
}

// normalizeArgs rewrites what admins type from other tools into what the
// flag parser reads:
//   - long options with one dash, as in Terraform (-var, -out,
//     -detailed-exitcode): any long option of any command, rewritten to two
//     dashes (pflag reads one dash as shorthand letters);
//   - Terraform's options wsu has no use for (-input=false, -lock=false):
//     handed to the hidden --ignored-option, which says so on stderr;
//   - other tools' options wsu spells differently (-json, -target):
//     rewritten to two dashes, so that pflag reports the option, not a
//     shorthand letter (-target=x is not -t arget=x), and flagError says
//     what wsu offers instead;
//   - flags before the command (`wsu -v plan ...`, `wsu --no-color apply
//     ...`): moved after it, where the command's own flags are; `wsu -v`
//     alone still prints the version.
func normalizeArgs(root *cobra.Command, args []string) []string {
	long := longFlags(root)
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 2 {
			name, _, _ := strings.Cut(a[1:], "=")
			switch {
			case long[name], otherSpellings[name] != "":
				a = "-" + a
			case ignoredSpellings[name] != "":
				a = "--" + ignoredFlag + "=" + a
			}
		}
		out = append(out, a)
	}
	return commandFirst(root, out)
}

// commandFirst moves flags given before the command name after it.
func commandFirst(root *cobra.Command, args []string) []string {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return args
	}
	for i, a := range args {
		if a == "--" {
			return args
		}
		if strings.HasPrefix(a, "-") {
			continue
		}
		if cmd, _, err := root.Find([]string{a}); err == nil && cmd != root {
			moved := append([]string{a}, args[:i]...)
			return append(moved, args[i+1:]...)
		}
	}
	return args
}

// longFlags are the long option names of every command.
func longFlags(root *cobra.Command) map[string]bool {
	names := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		c.PersistentFlags().VisitAll(func(f *pflag.Flag) { names[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return names
}

// otherSpellings are options of other tools that wsu spells differently,
// or whose job another wsu option does.
var otherSpellings = map[string]string{
	"json":        "--output json",
	"verbose":     "--verbose",
	"target":      "--limit PATTERN (hosts) or --tags TAG (tasks)",
	"parallelism": "--forks N",
}

// spellingWhy says why an otherSpellings option is not wsu's.
var spellingWhy = map[string]string{
	"target": " A playbook has no resource addresses: --limit chooses the hosts and --tags the tasks a run touches.",
}

// ignoredSpellings are Terraform's options that have nothing to do in
// wsu, accepted so that a Terraform habit or script works, with why.
var ignoredSpellings = map[string]string{
	"input":        "wsu never asks for variable values (a variable without one is an error before any host is touched)",
	"lock":         "wsu keeps no state, so there is no state lock to take",
	"lock-timeout": "wsu keeps no state, so there is no state lock to wait for",
}

// ignoredFlag is the hidden option normalizeArgs gives ignoredSpellings.
const ignoredFlag = "ignored-option"

// noteIgnored says on stderr, for each ignored option given, that and why
// it is ignored.
func (a *app) noteIgnored(cmd *cobra.Command) {
	for _, opt := range a.ignored {
		name, _, _ := strings.Cut(strings.TrimLeft(opt, "-"), "=")
		fmt.Fprintf(cmd.ErrOrStderr(), "Note: %s is Terraform's option, ignored: %s.\n", opt, ignoredSpellings[name])
	}
}

// flagError names the nearest option for an unknown one: pflag's own
// message for -json is about a shorthand 'j'.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var given string
	if _, rest, ok := strings.Cut(msg, "unknown shorthand flag: "); ok {
		if _, arg, ok := strings.Cut(rest, " in "); ok {
			given = strings.TrimLeft(arg, "-")
		}
	} else if _, rest, ok := strings.Cut(msg, "unknown flag: "); ok {
		given = strings.TrimLeft(rest, "-")
	}
	if given == "" {
		return err
	}
	given, _, _ = strings.Cut(given, "=")
	if alt, ok := otherSpellings[given]; ok {
		return fmt.Errorf("unknown option %q for %q; did you mean %s?%s", "-"+strings.TrimPrefix(given, "-"), cmd.CommandPath(), alt, spellingWhy[given])
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if s := modules.Nearest(given, names); s != "" {
		return fmt.Errorf("unknown option %q for %q; did you mean --%s?", given, cmd.CommandPath(), s)
	}
	return fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())
}

// machineOutput is "json" or "yaml" when args ask for that output
// (-o json, -ojson, --output json, --output=json), else "". It reads the
// raw arguments, so that an error in parsing them is still reported in
// the form asked for.
func machineOutput(args []string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		var v string
		switch {
		case (a == "-o" || a == "--output" || a == "-output") && i+1 < len(args):
			v = args[i+1]
		case strings.HasPrefix(a, "--output="), strings.HasPrefix(a, "-output="):
			_, v, _ = strings.Cut(a, "=")
		case strings.HasPrefix(a, "-o") && !strings.HasPrefix(a, "--"):
			v = strings.TrimPrefix(strings.TrimPrefix(a, "-o"), "=")
		}
		if v == "json" || v == "yaml" {
			return v
		}
	}
	return ""
}

// isTerminal reports whether w is a terminal (colour and progress).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// startProfile starts the hidden --cpuprofile and --memprofile.
func (a *app) startProfile() error {
	if a.memProfile != "" {
		a.peak = startPeakHeap(a.memProfile, 100*time.Millisecond)
	}
	if a.cpuProfile == "" {
		return nil
	}
	f, err := os.Create(a.cpuProfile)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	a.profileFile = f
	return nil
}

func (a *app) stopProfile() error {
	var peakErr error
	if a.peak != nil {
		peakErr = a.peak.Stop()
	}
	if a.profileFile == nil {
		return peakErr
	}
	pprof.StopCPUProfile()
	if err := a.profileFile.Close(); err != nil {
		return err
	}
	return peakErr
}
