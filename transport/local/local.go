// Package local is the `local` transport: the machine wsu runs on. With
// an agent (Dialer.Agent, the run's wsu-agent build for this platform) it
// starts that agent as a child process and drives it over the agent
// protocol, as the SSH and WinRM transports do on a remote host; without
// one (wsu used as a library, the engine's tests) it serves the host
// in-process (New).
package local

import (
	"github.com/wsu-project/wsu/agent/platform/native"
	"github.com/wsu-project/wsu/host"
)

// New returns a Host acting on the local machine in-process: on Windows
// the agent's Win32 platform, elsewhere the POSIX host
// (agent/platform/native).
func New() host.Host { return native.New() }

// NewPOSIX returns the in-process POSIX host (Windows operations are not
// supported).
func NewPOSIX() host.Host { return native.NewPOSIX() }
