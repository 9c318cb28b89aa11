package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel send SIGTERM to a HostProcess stand-in if
// the kubelet stand-in dies without stopping it (SIGKILL), so no process
// outlives the kubelet.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
