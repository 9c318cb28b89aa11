//go:build unix

package main

import "syscall"

// processReplacer runs a program in place of this process (execve), as
// kubectl runs a plugin: the same PID, signals and exit code.
func processReplacer() func(path string, argv, env []string) error { return syscall.Exec }
