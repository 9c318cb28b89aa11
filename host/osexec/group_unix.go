//go:build unix

package osexec

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// KillProcessGroup is a Prepare for POSIX hosts: the child gets its own
// process group and cancel kills the whole group, so `sh -c "sleep 100"`
// does not leave the sleep behind.
func KillProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}
