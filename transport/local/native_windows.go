//go:build windows

package local

import (
	"github.com/wsu-project/wsu/agent/platform/windows"
	"github.com/wsu-project/wsu/host"
)

// On the node itself (wsu apply --local, cloudbase-init) the agent's Win32
// platform serves in-process: no agent process, no RPC hop.
func newNative() host.Host { return windows.New() }
