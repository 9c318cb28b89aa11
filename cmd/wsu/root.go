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

	cpuProfile  string
	profileFile *os.File
}

// Execute runs the CLI and returns the process exit code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr, env: os.Environ()}
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
	root.AddCommand(a.planCommand(), a.applyCommand(), a.validateCommand(), a.fmtCommand(), a.modulesCommand(), a.versionCommand(), a.agentCommand(), a.payloadCommand(), a.playbooksCommand(), a.controllerCommand())
	return root
}

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the wsu version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.stdout, "wsu %s\n", version.Version)
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
