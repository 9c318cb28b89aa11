//go:build unix

package local

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// killTree puts the child in its own process group and kills the whole group
// on cancel, so `sh -c "sleep 100"` does not leave the sleep behind.
func killTree(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
}

// detach puts a long-lived child (the agent) in its own process group, so
// the terminal's Ctrl-C reaches wsu only.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
