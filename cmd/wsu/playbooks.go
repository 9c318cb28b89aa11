package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/playbooks"
)

// resolvePlaybook maps a stock playbook name ("join", "join.hcl") to its
// embedded copy unless a file of that name exists here.
func resolvePlaybook(arg string) string {
	if strings.HasPrefix(arg, playbook.EmbeddedPrefix) {
		return arg
	}
	if _, err := os.Stat(arg); err == nil {
		return arg
	}
	name := arg
	if !strings.HasSuffix(name, ".hcl") {
		name += ".hcl"
	}
	if _, err := fs.Stat(playbooks.FS, name); err == nil && !strings.ContainsAny(arg, `/\`) {
		return playbook.EmbeddedPrefix + name
	}
	return arg
}

func (a *app) playbooksCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "playbooks",
		Short: "List or export the stock playbooks built into wsu",
		Long: `The stock playbooks (join, remove, upgrade and their steps) are built into wsu:
'wsu apply join -i INVENTORY' runs the built-in copy, and a site playbook includes
them with source = "wsu:join.hcl". Export them to read or adapt them.`,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the stock playbooks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entries, err := fs.ReadDir(playbooks.FS, ".")
			if err != nil {
				return err
			}
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".hcl") {
					fmt.Fprintln(a.stdout, strings.TrimSuffix(e.Name(), ".hcl"))
				}
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "export DIR",
		Short: "Write the stock playbooks and their templates to DIR",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			n := 0
			err := fs.WalkDir(playbooks.FS, ".", func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				target := filepath.Join(dir, filepath.FromSlash(p))
				if d.IsDir() {
					return os.MkdirAll(target, 0o755)
				}
				if _, err := os.Stat(target); err == nil {
					return fmt.Errorf("%s exists; export refuses to overwrite", target)
				}
				data, err := fs.ReadFile(playbooks.FS, p)
				if err != nil {
					return err
				}
				n++
				return os.WriteFile(target, data, 0o644)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "Exported %d files to %s\n", n, dir)
			return nil
		},
	})
	return cmd
}
