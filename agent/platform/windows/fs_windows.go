//go:build windows

package windows

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host/osfs"
)

// winFS is the file half of the Host API on Win32: osfs with the steps
// where Windows differs.
var winFS = osfs.FS{
	// Only the read-only bit of mode means anything on Windows.
	ChmodClosed: true,
	Rename:      replaceFile,
	RemoveAll:   removeAll,
}

// replaceFile renames from over to; WRITE_THROUGH returns only once the
// rename is on disk. A read-only target refuses to be replaced, and the new
// file is meant to take its place whatever it was, so the bit is cleared.
func replaceFile(from, to string) error {
	f, err := windows.UTF16PtrFromString(from)
	if err != nil {
		return err
	}
	t, err := windows.UTF16PtrFromString(to)
	if err != nil {
		return err
	}
	const flags = windows.MOVEFILE_REPLACE_EXISTING | windows.MOVEFILE_WRITE_THROUGH
	err = windows.MoveFileEx(f, t, flags)
	if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		if attrs, aerr := windows.GetFileAttributes(t); aerr == nil && attrs&windows.FILE_ATTRIBUTE_READONLY != 0 {
			if windows.SetFileAttributes(t, attrs&^windows.FILE_ATTRIBUTE_READONLY) == nil {
				err = windows.MoveFileEx(f, t, flags)
			}
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// removeAll is os.RemoveAll, which is already quiet about a missing path,
// with a fallback.
func removeAll(path string) error {
	err := os.RemoveAll(path)
	if err == nil {
		return nil
	}
	// os.RemoveAll deletes with POSIX semantics and gives up on answers
	// it does not expect from the file system (Wine 8: "Invalid
	// function"); delete the classic way before reporting failure.
	if removeWalk(path) == nil {
		return nil
	}
	return err
}

// removeWalk deletes a tree depth first with DeleteFile/RemoveDirectory
// (os.Remove, which also clears a read-only bit). Links are removed, not
// followed.
func removeWalk(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := removeWalk(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
