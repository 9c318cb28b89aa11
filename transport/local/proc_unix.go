//go:build unix

package local

import (
	"os/exec"
	"syscall"
)

// detach puts a long-lived child (the agent) in its own process group, so
// the terminal's Ctrl-C reaches wsu only.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
