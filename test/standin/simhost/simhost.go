// Package simhost lets a TEST STAND-IN binary find the files behind the
// Windows paths it is given: the simulated host (agent/platform/sim) that
// started it sets sim.EnvRoot, and its paths are translated with the same
// code the agent uses. Opening it is safe while the agent runs: the sim
// serialises every state transaction with a lock file.
package simhost

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/wsu-project/wsu/agent/platform/sim"
)

// Paths translates paths; without a simulated host it passes Linux paths
// through, so a stand-in also runs on its own.
type Paths struct {
	Host *sim.Host // nil when not started by the simulated host
}

// Open opens the simulated host named by sim.EnvRoot, if set. It refuses a
// root that holds no host rather than create an empty one.
func Open() (*Paths, error) {
	root := os.Getenv(sim.EnvRoot)
	if root == "" {
		return &Paths{}, nil
	}
	if fi, err := os.Stat(filepath.Join(root, "state")); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%s=%s holds no simulated host (no state directory)", sim.EnvRoot, root)
	}
	h, err := sim.New(root, sim.Options{})
	if err != nil {
		return nil, fmt.Errorf("opening the simulated host at %s: %w", root, err)
	}
	return &Paths{Host: h}, nil
}

// IsWindows reports whether p is a Windows path (C:\x, c:/x, \\?\C:\x,
// /C:/x): one only the simulated host can translate.
func IsWindows(p string) bool {
	switch {
	case len(p) >= 4 && (p[:4] == `\\?\` || p[:4] == `//?/`):
		p = p[4:]
	case len(p) >= 3 && (p[0] == '/' || p[0] == '\\') && p[2] == ':':
		p = p[1:]
	}
	return len(p) >= 2 && p[1] == ':' && (p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z')
}

// Local is the local file for p: a Windows path is translated through the
// simulated host, any other path is used as it is.
func (s *Paths) Local(p string) (string, error) {
	if !IsWindows(p) {
		return p, nil
	}
	if s.Host == nil {
		return "", fmt.Errorf("%s is a Windows path and %s is not set: run under the simulated host", p, sim.EnvRoot)
	}
	return s.Host.LocalPath(p)
}
