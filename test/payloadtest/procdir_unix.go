//go:build unix

package payloadtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

const procDirPattern = "wsu-payloadtest-*"

// processDir makes this process's directory for compiled stand-ins. The
// process holds a lock on it until it exits, so a later process can remove
// the directories of processes that are gone: a library has no hook to
// clean up at exit.
func processDir() (string, error) {
	sweep()
	// Locked under a name sweep ignores, then renamed to one it sees: it
	// never finds the directory unlocked.
	staging, err := os.MkdirTemp("", ".staging-"+procDirPattern)
	if err != nil {
		return "", fmt.Errorf("payloadtest: %w", err)
	}
	// A raw descriptor, never closed: an *os.File would be closed (and
	// the lock dropped) by its finalizer.
	fd, err := syscall.Open(filepath.Join(staging, "lock"), syscall.O_CREAT|syscall.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err == nil {
		err = syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
	}
	dir := filepath.Join(filepath.Dir(staging), strings.TrimPrefix(filepath.Base(staging), ".staging-"))
	if err == nil {
		err = os.Rename(staging, dir)
	}
	if err != nil {
		os.RemoveAll(staging)
		return "", fmt.Errorf("payloadtest: %w", err)
	}
	return dir, nil
}

// sweep removes the directories whose process has exited (the kernel
// dropped its lock).
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), procDirPattern))
	for _, d := range dirs {
		f, err := os.Open(filepath.Join(d, "lock"))
		if err != nil {
			continue // being created, or not ours
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			os.RemoveAll(d)
		}
		f.Close()
	}
}
