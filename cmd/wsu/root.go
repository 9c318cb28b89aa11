package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wsu-project/wsu/transport/agentbin"
	"github.com/wsu-project/wsu/version"
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

	cpuProfile  string
	profileFile *os.File
}

// Execute runs the CLI in-process, without agent builds (see agentOptions),
// and returns the process exit code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return execute(ctx, args, stdin, stdout, stderr, nil)
}

// execute runs the CLI with the given agent builds.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, agents *agentbin.Options) int {
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, env: os.Environ(), agents: agents}
	root := a.rootCommand()
	root.SetArgs(normalizeArgs(args))
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if perr := a.stopProfile(); perr != nil && err == nil {
		err = perr
	}
	var ee exitError
	switch {
	case err == nil:
		return 0
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
		Version:       version.Version,
	}
	// For the benchmarks (make bench, docs/performance.md): not a user option.
	root.PersistentFlags().StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile to this file")
	root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return a.startProfile() }
	root.AddCommand(a.planCommand(), a.applyCommand(), a.validateCommand(), a.fmtCommand(), a.modulesCommand(), a.versionCommand(), a.agentCommand(), a.payloadCommand(), a.playbooksCommand(), a.controllerCommand(), a.approveCommand())
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
			fmt.Fprintf(a.stdout, "wsu %s\n", version.Version)
			a.printAgents()
			return nil
		},
	}
}

// singleDash are long options users type with one dash, as in Terraform
// (-var, -out). pflag reads one dash as shorthand letters, so they are
// rewritten to two dashes before parsing.
var singleDash = []string{"var", "var-file", "out", "detailed-exitcode", "no-color", "check", "diff", "limit", "tags", "skip-tags", "forks", "output", "local", "inventory", "kubeconfig", "context"}

func normalizeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 2 {
			name, _, _ := strings.Cut(a[1:], "=")
			for _, s := range singleDash {
				if name == s {
					a = "-" + a
					break
				}
			}
		}
		out = append(out, a)
	}
	return out
}

// isTerminal reports whether w is a terminal (colour and progress).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// startProfile starts the hidden --cpuprofile.
func (a *app) startProfile() error {
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
	if a.profileFile == nil {
		return nil
	}
	pprof.StopCPUProfile()
	return a.profileFile.Close()
}
