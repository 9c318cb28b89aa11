package main

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryEventTypeDocumented: the JSON schema in docs/cli.md has a row
// for every event type engine/event.go declares, and architecture.md lists
// it, so a new event cannot reach consumers undocumented. The types are
// read from the source, so a new constant is covered without touching
// this test.
func TestEveryEventTypeDocumented(t *testing.T) {
	src, err := os.ReadFile("../../engine/event.go")
	require.NoError(t, err)
	types := regexp.MustCompile(`(?m)^\s+Event\w+\s+EventType = "([a-z_]+)"$`).FindAllStringSubmatch(string(src), -1)
	require.GreaterOrEqual(t, len(types), 11, "the event types in engine/event.go")
	cli, err := os.ReadFile("../../docs/cli.md")
	require.NoError(t, err)
	arch, err := os.ReadFile("../../docs/architecture.md")
	require.NoError(t, err)
	for _, m := range types {
		assert.Contains(t, string(cli), "| `"+m[1]+"` |", "docs/cli.md event table lacks %s", m[1])
		assert.Contains(t, string(arch), "`"+m[1]+"`", "docs/architecture.md lacks %s", m[1])
	}
}
