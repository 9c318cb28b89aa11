//go:build wsu_embed_agents

package agents

import (
	"embed"
	"io/fs"
)

// files holds the node agent builds make build cross-compiles into
// cmd/internal/agents (wsu-agent-windows-amd64.exe, wsu-agent-linux-amd64)
// before it builds wsu and wsu-controller with -tags wsu_embed_agents, so
// each is one file that carries what it deploys.
//
//go:embed wsu-agent-*
var files embed.FS

// Embedded are the agent builds this program carries.
func Embedded() fs.FS { return files }
