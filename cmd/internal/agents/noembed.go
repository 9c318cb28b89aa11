//go:build !wsu_embed_agents

package agents

import "io/fs"

// Embedded is nil in a build without -tags wsu_embed_agents (go build, go
// test, go run): such a program finds the agents beside itself (make build
// leaves them in bin/) or, for wsu, runs itself as its local agent.
func Embedded() fs.FS { return nil }
