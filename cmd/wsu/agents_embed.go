//go:build wsu_embed_agents

package main

import (
	"embed"
	"io/fs"
)

// agents holds the node agent builds make build cross-compiles into
// cmd/wsu/agents (wsu-agent-windows-amd64.exe, wsu-agent-linux-amd64) before
// it builds wsu with -tags wsu_embed_agents, so the CLI is one file that
// carries what it deploys.
//
//go:embed agents/wsu-agent-*
var agents embed.FS

func embeddedAgents() fs.FS {
	sub, err := fs.Sub(agents, "agents")
	if err != nil {
		panic(err) // "agents" is a valid path: cannot happen
	}
	return sub
}
