//go:build unix

package ssh

import (
	"os"
	"syscall"
)

// lockKnownHosts takes an exclusive flock on the open known hosts file,
// held until f is closed. flock excludes other open files of the same
// path, in this process (another run, another host of this run) and in
// others (a second wsu, a Job sharing the file).
func lockKnownHosts(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}
