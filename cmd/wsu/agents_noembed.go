//go:build !wsu_embed_agents

package main

import "io/fs"

// embeddedAgents is nil in a build without -tags wsu_embed_agents (go
// build, go test, go run): such a wsu finds the agents beside itself
// (make build leaves them in bin/) or runs itself as its local agent.
func embeddedAgents() fs.FS { return nil }
