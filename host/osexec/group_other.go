//go:build !unix

package osexec

import "os/exec"

// KillProcessGroup keeps exec's default where there are no POSIX process
// groups: kill the direct child; WaitDelay covers any grandchild still
// holding the pipes.
func KillProcessGroup(cmd *exec.Cmd) {}
