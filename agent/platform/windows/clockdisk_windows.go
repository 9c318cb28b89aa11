//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

// SystemTime is the machine's clock (GetSystemTimePreciseAsFileTime,
// through the runtime).
func (h *winHost) SystemTime(ctx context.Context) (time.Time, error) {
	return time.Now(), ctx.Err()
}

// DiskFree asks GetDiskFreeSpaceEx about the volume holding path, or its
// nearest existing parent: the call wants a directory that exists.
func (h *winHost) DiskFree(ctx context.Context, path string) (host.DiskSpace, error) {
	if err := ctx.Err(); err != nil {
		return host.DiskSpace{}, err
	}
	dir, err := nearestDir(path)
	if err != nil {
		return host.DiskSpace{}, err
	}
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return host.DiskSpace{}, fmt.Errorf("free space of %s: %w", path, err)
	}
	var avail, total, totalFree uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &totalFree); err != nil {
		return host.DiskSpace{}, &fs.PathError{Op: "GetDiskFreeSpaceEx", Path: dir, Err: err}
	}
	return host.DiskSpace{Free: avail, Total: total}, nil
}

// nearestDir is path when it is a directory, else the nearest existing
// directory above it.
func nearestDir(path string) (string, error) {
	p := filepath.Clean(path)
	for {
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return p, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return "", &fs.PathError{Op: "free space", Path: path, Err: err}
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", &fs.PathError{Op: "free space", Path: path, Err: fs.ErrNotExist}
		}
		p = parent
	}
}

var _ host.ModTimeStepper = (*winHost)(nil)

// clockTick is how often Windows advances the system time file times are
// stamped with: 15.625 ms unless a program asks for finer.
const clockTick = 16 * time.Millisecond

// ModTimeStep asks GetVolumeInformation which file system holds path:
// NTFS, ReFS and exFAT stamp at the clock tick, FAT at two seconds;
// anything else (a network share: its server's clock) is not known, 0.
func (h *winHost) ModTimeStep(_ context.Context, path string) time.Duration {
	name, err := fileSystemName(path)
	if err != nil {
		return 0
	}
	switch strings.ToUpper(name) {
	case "NTFS", "REFS", "EXFAT":
		return clockTick
	case "FAT", "FAT32":
		return 2 * time.Second
	}
	return 0
}

// fileSystemName is the name of the file system of the volume holding
// path (or its nearest existing parent).
func fileSystemName(path string) (string, error) {
	dir, err := nearestDir(path)
	if err != nil {
		return "", err
	}
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return "", err
	}
	root := make([]uint16, windows.MAX_PATH+1)
	if err := windows.GetVolumePathName(p, &root[0], uint32(len(root))); err != nil {
		return "", err
	}
	fsName := make([]uint16, windows.MAX_PATH+1)
	if err := windows.GetVolumeInformation(&root[0], nil, 0, nil, nil, nil, &fsName[0], uint32(len(fsName))); err != nil {
		return "", err
	}
	return windows.UTF16ToString(fsName), nil
}
