//go:build unix

package osfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wsu-project/wsu/host"
)

// DiskFree describes the file system holding path, or its nearest existing
// parent when path does not exist yet (host.System.DiskFree).
func DiskFree(path string) (host.DiskSpace, error) {
	p, err := NearestExisting(path)
	if err != nil {
		return host.DiskSpace{}, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		return host.DiskSpace{}, fmt.Errorf("free space of %s: %w", path, err)
	}
	bs := uint64(st.Bsize) //nolint:gosec // a block size is positive
	return host.DiskSpace{Free: st.Bavail * bs, Total: st.Blocks * bs}, nil
}

// NearestExisting is path, or its nearest parent that exists.
func NearestExisting(path string) (string, error) {
	p := filepath.Clean(path)
	for {
		_, err := os.Stat(p)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", fmt.Errorf("free space of %s: no part of the path exists: %w", path, err)
		}
		p = parent
	}
}
