package main

import (
	"github.com/spf13/cobra"

	"github.com/wsu-project/wsu/agent/agentcmd"
)

// agentCommand is `wsu agent`: the node agent's command line
// (agent/agentcmd), the same as the slim cmd/wsu-agent binary's, so a full
// wsu binary can serve as an agent too (a build without the agents
// embedded runs itself for connection=local). Its flags are the agent's,
// parsed by agentcmd.
func (a *app) agentCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "agent",
		Short:              "Serve the Host API on stdin/stdout (the node agent; see wsu-agent)",
		Long:               agentcmd.Usage,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := agentcmd.Main(cmd.Context(), args, a.stdin, a.stdout, a.stderr); code != 0 {
				return exitError{code}
			}
			return nil
		},
	}
}
