package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/limits"
	"github.com/wsu-project/wsu/userdata"
)

// userDataCommand prints the first-boot script of Windows Machines, so an
// administrator reads exactly what a MachineSet's machines will run.
func (a *app) userDataCommand() *cobra.Command {
	var secret bool
	var namespace string
	cmd := &cobra.Command{
		Use:   "user-data KEY",
		Short: "Print the first-boot script that lets wsu reach a Windows Machine (a MachineSet's userDataSecret)",
		Long: "Prints the user data a Windows Machine runs at first boot (and every boot): install and start OpenSSH Server,\n" +
			"authorise KEY's public key for administrators, open TCP 22. KEY is the private key wsu logs in with (the\n" +
			"controller's key Secret holds it) or its public key (a .pub file). With --secret, prints it as the\n" +
			"windows-user-data Secret a MachineSet references (userDataSecret), for kubectl apply -f -.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := limits.ReadFile(args[0])
			if err != nil {
				return err
			}
			pub, err := userdata.PublicKey(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			script := userdata.Script(pub)
			if !secret {
				_, err := fmt.Fprint(a.stdout, script)
				return err
			}
			out, err := yaml.Marshal(userdata.Secret(namespace, pub))
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(out)
			return err
		},
	}
	cmd.Flags().BoolVar(&secret, "secret", false, "print the windows-user-data Secret manifest instead of the script")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", userdata.MachineAPINamespace, "the Secret's namespace (with --secret)")
	return cmd
}
