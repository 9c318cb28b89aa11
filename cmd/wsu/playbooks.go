package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agext/levenshtein"
	"github.com/spf13/cobra"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/playbooks"
	"github.com/wsu-project/wsu/playbooks/doc"
)

func (a *app) playbooksCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "playbooks",
		Short: "List, document or export the stock playbooks built into wsu",
		Long: `The stock playbooks (join, remove, upgrade, rotate-key and their steps) are built into wsu:
'wsu apply join -i INVENTORY' runs the built-in copy, and a site playbook includes
them with source = "wsu:join.hcl". Doc documents them; export them to read or
adapt them.`,
	}
	cmd.AddCommand(a.playbooksDocCommand())
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

func (a *app) playbooksDocCommand() *cobra.Command {
	var markdown bool
	cmd := &cobra.Command{
		Use:   "doc [NAME]",
		Short: "Document the stock playbooks: variables, includes, plays, tasks, outputs",
		Long: `Doc documents every stock playbook, or the one named, from the embedded files
themselves: the header comment, each variable (type, default, description), what
it includes and with which variables, its plays and tasks in order (module, when,
for_each, notify), handlers and outputs. --markdown prints Markdown;
docs/playbooks.md is 'wsu playbooks doc --markdown'.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pbs, err := doc.Load(playbooks.FS, all.Schemas())
			if err != nil {
				return err
			}
			if len(args) == 0 {
				if markdown {
					fmt.Fprint(a.stdout, doc.Markdown(pbs))
					return nil
				}
				for i, p := range pbs {
					if i > 0 {
						fmt.Fprintln(a.stdout)
					}
					fmt.Fprint(a.stdout, doc.Text(p))
				}
				return nil
			}
			name := strings.TrimSuffix(strings.TrimPrefix(args[0], playbook.EmbeddedPrefix), ".hcl")
			var names []string
			for _, p := range pbs {
				if p.Name != name {
					names = append(names, p.Name)
					continue
				}
				if markdown {
					fmt.Fprint(a.stdout, doc.MarkdownPlaybook(p))
				} else {
					fmt.Fprint(a.stdout, doc.Text(p))
				}
				return nil
			}
			msg := fmt.Sprintf("no stock playbook named %q", args[0])
			if s := nearest(name, names); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			return fmt.Errorf("%s (`wsu playbooks list` lists them)", msg)
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print Markdown (without NAME: the whole reference, docs/playbooks.md)")
	return cmd
}

// nearest is the candidate closest to name, if it is close enough to be a
// likely typo.
func nearest(name string, candidates []string) string {
	best, bestDist := "", 3
	for _, c := range candidates {
		if d := levenshtein.Distance(name, c, nil); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}
