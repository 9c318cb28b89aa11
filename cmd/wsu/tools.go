package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/spf13/cobra"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/modules/docs"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/view"
)

func (a *app) validateCommand() *cobra.Command {
	var noColor bool
	var in planfile.Inputs
	var inventories []string
	cmd := &cobra.Command{
		Use:   "validate PLAYBOOK",
		Short: "Check a playbook without touching any host",
		Long: `Validate loads a playbook and everything it includes and checks syntax, module
names and arguments, argument types, references, duplicate names and cycles, and
each play's literal hosts, serial and max_fail_percentage. With -i, -var,
-var-file and --join-config it also checks a site's inputs against the playbook: every value
against its variable's type and validation rules, each host's connection
settings, and each play's hosts pattern against the inventory.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Playbook = args[0]
			in.Inventory, in.MoreInventories = first(inventories), rest(inventories)
			_, noColorEnv := os.LookupEnv("NO_COLOR")
			run, diags := a.validate(cmd.Context(), in)
			a.diagnostics(isTerminal(a.stderr) && !noColor && !noColorEnv, run, diags)
			if diags.HasErrors() {
				return exitError{1}
			}
			fmt.Fprintln(a.stdout, "Success! The playbook is valid.")
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&noColor, "no-color", false, "no colours")
	f.StringArrayVarP(&inventories, "inventory", "i", nil, "also check this inventory's values and hosts against the playbook (repeatable: merged in order)")
	f.StringArrayVar(&in.Vars, "var", nil, "also check this variable value: -var 'name=value' (repeatable)")
	f.StringArrayVar(&in.VarFiles, "var-file", nil, "also check the values in this variables file (repeatable)")
	f.StringVar(&in.JoinConfig, "join-config", "", "also check this kubeadm JoinConfiguration and the values it gives join ("+joinConfigHelp[len("read "):]+")")
	return cmd
}

// validate loads the playbook and, through setup and engine.Check, checks
// everything that can be known without a host. Without -i, hosts patterns
// are not matched (there is no inventory to match them against).
func (a *app) validate(ctx context.Context, in planfile.Inputs) (*setup.Run, hcl.Diagnostics) {
	withInventory := len(in.InventorySources()) > 0
	in.Local = !withInventory // an inventory of its own is needed to prepare
	run, diags := setup.Prepare(ctx, setup.Options{Request: setup.Request{Inputs: in, Mode: engine.ModePlan}, Environ: a.env})
	if diags.HasErrors() {
		return run, diags
	}
	req := run.Request
	if !withInventory {
		req.Inventory = nil
	}
	return run, append(diags, run.Scrub(engine.Check(req))...)
}

// diagnostics writes diags to stderr, for the commands that print no run
// (validate, --syntax-check, fmt), through the one redaction path plan
// and apply take (newView): run's scrubber, and no source line run.Hidden
// refuses to quote.
func (a *app) diagnostics(color bool, run *setup.Run, diags hcl.Diagnostics) {
	view.NewHuman(a.stderr, view.HumanOptions{Color: color, Sources: run.Text, Hidden: run.Hidden}).Diagnostics(diags)
}

func (a *app) fmtCommand() *cobra.Command {
	var check, list bool
	cmd := &cobra.Command{
		Use:   "fmt [PATH...]",
		Short: "Rewrite playbooks in the canonical HCL style",
		Long: `Fmt rewrites .hcl files (default: every .hcl file below the current directory) in
the canonical style. With --check it changes nothing, lists the files that need
formatting and exits 3 if there are any (for CI).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"."}
			}
			files, err := hclFiles(args)
			if err != nil {
				return err
			}
			var bad []string
			var diags hcl.Diagnostics
			sources := map[string][]byte{}
			for _, f := range files {
				src, err := limits.ReadFile(f)
				if err != nil {
					return err
				}
				sources[f] = src
				if d := limits.CheckConfig(src, f, hcl.InitialPos); d.HasErrors() {
					diags = append(diags, d...)
					continue
				}
				if _, d := hclsyntax.ParseConfig(src, f, hcl.InitialPos); d.HasErrors() {
					diags = append(diags, d...)
					continue
				}
				out := hclwrite.Format(src)
				if bytes.Equal(out, src) {
					continue
				}
				bad = append(bad, f)
				if check {
					continue
				}
				if err := writeFileAtomic(f, out); err != nil {
					return err
				}
			}
			if len(diags) > 0 {
				run := setup.ForSources(sources)
				a.diagnostics(false, run, run.Scrub(diags))
				return exitError{2}
			}
			if check || list {
				for _, f := range bad {
					fmt.Fprintln(a.stdout, f)
				}
			}
			if check && len(bad) > 0 {
				return exitError{3}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "change nothing; list unformatted files and exit 3 if any")
	cmd.Flags().BoolVar(&list, "list", false, "list the files rewritten")
	return cmd
}

func hclFiles(args []string) ([]string, error) {
	var out []string
	for _, arg := range args {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, arg)
			continue
		}
		err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != arg && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(p, ".hcl") {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func writeFileAtomic(path string, data []byte) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".wsu-fmt-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(st.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func (a *app) modulesCommand() *cobra.Command {
	var markdown bool
	cmd := &cobra.Command{
		Use:   "modules [NAME]",
		Short: "List the modules, or document one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			reg := all.Schemas()
			if markdown {
				fmt.Fprint(a.stdout, docs.Markdown(reg))
				return nil
			}
			if len(args) == 0 {
				fmt.Fprint(a.stdout, docs.List(reg))
				return nil
			}
			m, ok := reg.Lookup(args[0])
			if !ok {
				msg := fmt.Sprintf("no module named %q", args[0])
				if s := reg.Suggest(args[0]); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				return fmt.Errorf("%s", msg)
			}
			fmt.Fprint(a.stdout, docs.Text(m.Schema()))
			return nil
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the module reference (docs/modules.md) as Markdown")
	return cmd
}
