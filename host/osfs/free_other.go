//go:build !unix

package osfs

import (
	"errors"

	"github.com/wsu-project/wsu/host"
)

// DiskFree is statfs(2) on POSIX systems; the Windows platform asks
// GetDiskFreeSpaceEx itself (agent/platform/windows).
func DiskFree(path string) (host.DiskSpace, error) {
	return host.DiskSpace{}, errors.New("free space of " + path + ": statfs is POSIX only")
}
