//go:build windows

package local

import (
	"os/exec"
	"syscall"
)

// detach starts a long-lived child (the agent) in a new process group,
// which Windows exempts from the console's Ctrl-C: that is wsu's to handle.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}
