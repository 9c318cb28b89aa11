//go:build !unix && !windows

package local

import "os/exec"

// detach has nothing to do without process groups.
func detach(cmd *exec.Cmd) {}
