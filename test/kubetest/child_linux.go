package kubetest

import (
	"os/exec"
	"syscall"
)

// dieWithParent kills a build when the test binary that started it dies
// (go test's timeout panics it): an orphaned build would hold no lock and
// race the next one.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
