package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
)

// TestEveryEventTypeDocumented: the JSON schema in docs/cli.md has a row
// for every event type the engine emits, and architecture.md lists it, so
// a new event cannot reach consumers undocumented.
func TestEveryEventTypeDocumented(t *testing.T) {
	cli, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	arch, err := os.ReadFile("../../docs/architecture.md")
	require.NoError(t, err)
	for _, et := range engine.EventTypes {
		assert.Contains(t, string(cli), "| `"+string(et)+"` |", "docs/cli.md event table lacks %s", et)
		assert.Contains(t, string(arch), "`"+string(et)+"`", "docs/architecture.md lacks %s", et)
	}
}
