package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	sigyaml "sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/view"
)

// showCommand is `wsu show PLANFILE`, as terraform show: a saved plan
// printed for review, for people or (-o json, -o yaml) for programs.
func (a *app) showCommand() *cobra.Command {
	var output string
	var noColor, verbose bool
	cmd := &cobra.Command{
		Use:   "show PLANFILE",
		Short: "Print a plan saved by 'wsu plan -out' for review",
		Long: `Show prints a saved plan: the inputs it was made with and, per host, every change
it will make with the fields and content diffs the plan showed (secrets were hidden
when it was saved). It reads only the file: no host or cluster is contacted.
-o json prints the plan file's content as one JSON document; -o yaml the same as YAML.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := args[0]
			p, isPlan, err := planfile.LoadFrom(file, limits.NewFiles(cmd.Context()))
			switch {
			case err != nil:
				return err
			case !isPlan:
				return fmt.Errorf("%s is not a saved plan (wsu plan -out FILE writes one); to see what a playbook would change, run wsu plan %s", file, file)
			}
			switch output {
			case "json", "yaml":
				data, err := json.MarshalIndent(p, "", "  ")
				if err != nil {
					return err
				}
				if output == "yaml" {
					if data, err = sigyaml.JSONToYAML(data); err != nil {
						return err
					}
					_, err = a.stdout.Write(data)
					return err
				}
				_, err = fmt.Fprintf(a.stdout, "%s\n", data)
				return err
			case "human":
			default:
				return fmt.Errorf("--output must be human, json or yaml, not %q", output)
			}
			_, noColorEnv := os.LookupEnv("NO_COLOR")
			v := view.NewHuman(a.stdout, view.HumanOptions{Color: isTerminal(a.stdout) && !noColor && !noColorEnv, Verbose: verbose})
			v.SavedPlan(file, p)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "human", "output format: human, json or yaml")
	cmd.Flags().BoolVar(&noColor, "no-color", false, "no colours, even on a terminal")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "also list unchanged and skipped tasks")
	return cmd
}
