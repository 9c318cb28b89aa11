//go:build !unix && !windows

package local

import "os/exec"

// killTree keeps exec's default: kill the direct child; WaitDelay covers any
// grandchild still holding the pipes.
func killTree(cmd *exec.Cmd) {}

// detach has nothing to do without process groups.
func detach(cmd *exec.Cmd) {}
