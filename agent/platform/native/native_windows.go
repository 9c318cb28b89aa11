//go:build windows

package native

import (
	"github.com/wsu-project/wsu/agent/platform/windows"
	"github.com/wsu-project/wsu/host"
)

// The machine itself on Windows is the agent's Win32 platform: what
// the agent serves (and so `wsu apply --local` on a node, through its
// agent child), and what a library user of New gets in-process.
func newNative() host.Host { return windows.New() }
