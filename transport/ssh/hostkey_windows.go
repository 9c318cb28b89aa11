package ssh

import (
	"os"

	"golang.org/x/sys/windows"
)

// lockKnownHosts takes an exclusive lock on the open known hosts file,
// held until f is closed: other handles of the file, in this process and
// in others, wait for it. The locked byte is far past the end, so readers
// of the file are not refused.
func lockKnownHosts(f *os.File) error {
	ol := &windows.Overlapped{Offset: 0xFFFFFFFE, OffsetHigh: 0x7FFFFFFF}
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, ol)
}
