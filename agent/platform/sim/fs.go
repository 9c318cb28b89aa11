package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
)

// Files are stored executable so stand-in binaries run whatever mode they
// were written with (Windows has no execute bit); the owner write bit is
// Windows' read-only attribute.
const (
	permWritable = 0o755
	permReadOnly = 0o555
)

// filePerm maps a requested mode to the stored one.
func filePerm(mode fs.FileMode) fs.FileMode {
	if mode&0o200 != 0 {
		return permWritable
	}
	return permReadOnly
}

// winMode reports a mode as Go does on Windows: 0666 or, read-only, 0444
// for files; 0777 for directories.
func winMode(fi fs.FileInfo) fs.FileMode {
	if fi.IsDir() {
		return fs.ModeDir | 0o777
	}
	if fi.Mode().Perm()&0o200 != 0 {
		return 0o666
	}
	return 0o444
}

// pathErr names the Windows path, not the file behind it.
func pathErr(op, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// notExist also counts a path through a file, which Windows reports as
// "path not found".
func notExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

func (h *Host) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return host.FileInfo{}, err
	}
	lp, err := h.LocalPath(path)
	if err != nil {
		return host.FileInfo{}, err
	}
	fi, err := os.Stat(lp)
	if notExist(err) {
		return host.FileInfo{Path: path}, nil
	}
	if err != nil {
		return host.FileInfo{}, pathErr("stat", path, err)
	}
	info := host.FileInfo{Path: path, Exists: true, IsDir: fi.IsDir(), Mode: winMode(fi), ModTime: fi.ModTime()}
	if !fi.IsDir() {
		info.Size = fi.Size() // NTFS reports 0 for directories
	}
	return info, nil
}

// open opens a regular file for reading.
func (h *Host) open(op, path string) (*os.File, error) {
	lp, err := h.LocalPath(path)
	if err != nil {
		return nil, err
	}
	f, err := osfs.OpenRegular(lp)
	if err != nil {
		return nil, pathErr(op, path, err)
	}
	return f, nil
}

func (h *Host) SHA256(ctx context.Context, path string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	f, err := h.open("sha256", path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return osfs.SumSHA256(ctx, path, f)
}

func (h *Host) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := h.open("read", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return osfs.ReadLimit(ctx, path, f, limit)
}

// WriteFile is atomic as on the agent's Windows backend, and fails, as
// Windows does, over the binary of a running process or a read-only file.
func (h *Host) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := parsePath(path)
	if err != nil {
		return err
	}
	if len(w.parts) == 0 {
		return fmt.Errorf("write %s: path names a directory", path)
	}
	lp := h.resolve(w)
	// Fail before streaming a large file that cannot land.
	if err := h.view(func(t *tx) error { return h.canReplace(t, "write", path, lp) }); err != nil {
		return err
	}
	// The simulated files are Linux files: osfs's POSIX steps, with errors
	// naming the Windows path.
	return osfs.FS{}.Write(ctx, lp, content, filePerm(mode), osfs.WriteOptions{
		Name: path,
		Err:  func(err error) error { return pathErr("write", path, err) },
		// Check and rename under the lock, so a service cannot start on
		// the old binary in between.
		Commit: func(rename func() error) error {
			return h.update(func(t *tx) error {
				if err := h.canReplace(t, "write", path, lp); err != nil {
					return err
				}
				return rename()
			})
		},
	})
}

// canReplace refuses to replace a directory, a read-only file or a binary
// in use.
func (h *Host) canReplace(t *tx, op, path, lp string) error {
	if fi, err := os.Stat(lp); err == nil {
		if fi.IsDir() {
			return pathErr(op, path, ErrAccessDenied)
		}
		if fi.Mode().Perm()&0o200 == 0 {
			return pathErr(op, path, fmt.Errorf("file is read-only: %w", ErrAccessDenied))
		}
	}
	return h.checkInUse(t, op, path, lp, false)
}

// checkInUse fails if lp (or, for a tree, anything under it) is the binary
// of a running process.
func (h *Host) checkInUse(t *tx, op, path, lp string, tree bool) error {
	hit := func(bin string) bool {
		return bin == lp || tree && strings.HasPrefix(bin, lp+string(filepath.Separator))
	}
	p, err := t.processes()
	if err != nil {
		return err
	}
	for _, r := range p.Procs {
		if r.Binary != "" && hit(r.Binary) && r.alive() {
			who := "process " + r.Image
			if r.Service != "" {
				who = "service " + r.Service
			}
			return pathErr(op, path, fmt.Errorf("%w; in use by running %s", ErrFileInUse, who))
		}
	}
	h.runMu.Lock()
	defer h.runMu.Unlock()
	for bin := range h.runBin {
		if hit(bin) {
			return pathErr(op, path, fmt.Errorf("%w; in use by a running command", ErrFileInUse))
		}
	}
	return nil
}

func (h *Host) MkdirAll(ctx context.Context, path string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := parsePath(path)
	if err != nil {
		return err
	}
	// A drive is there or not; mkdir does not create one.
	if _, err := os.Stat(filepath.Join(h.fsRoot, string(w.drive))); err != nil {
		return fmt.Errorf("mkdir %s: drive %c: does not exist", path, w.drive)
	}
	if err := os.MkdirAll(h.resolve(w), 0o755); err != nil {
		return pathErr("mkdir", path, err)
	}
	return nil
}

// Chmod sets or clears the read-only attribute, the only permission
// Windows keeps; on a directory it changes nothing.
func (h *Host) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	lp, err := h.LocalPath(path)
	if err != nil {
		return err
	}
	fi, err := os.Stat(lp)
	if err != nil {
		return pathErr("chmod", path, err)
	}
	if fi.IsDir() {
		return nil
	}
	if err := os.Chmod(lp, filePerm(mode)); err != nil {
		return pathErr("chmod", path, err)
	}
	return nil
}

// Remove refuses, before deleting anything, when the path or (recursive)
// anything below it is a running binary.
func (h *Host) Remove(ctx context.Context, path string, recursive bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w, err := parsePath(path)
	if err != nil {
		return err
	}
	if len(w.parts) == 0 {
		return fmt.Errorf("remove %s: refusing to remove a drive root", path)
	}
	lp := h.resolve(w)
	if _, err := os.Lstat(lp); notExist(err) {
		return nil
	}
	return h.update(func(t *tx) error {
		if err := h.checkInUse(t, "remove", path, lp, recursive); err != nil {
			return err
		}
		if recursive {
			err = os.RemoveAll(lp)
		} else {
			err = os.Remove(lp)
		}
		if err != nil && !notExist(err) {
			return pathErr("remove", path, err)
		}
		return nil
	})
}

// ReadDir lists a directory as Windows would: names as they were created
// (the path itself matches regardless of case), modes and directory sizes
// as Windows reports them, and a path through a file is "not found".
func (h *Host) ReadDir(ctx context.Context, path string, limit int) ([]host.DirEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lp, err := h.LocalPath(path)
	if err != nil {
		return nil, err
	}
	ents, err := osfs.ReadDirLimit(ctx, path, lp, limit)
	if err != nil {
		if notExist(err) && !errors.Is(err, osfs.ErrNotDir) {
			return nil, pathErr("readdir", path, fs.ErrNotExist)
		}
		return nil, err
	}
	for i := range ents {
		e := &ents[i]
		switch {
		case e.IsDir:
			e.Mode, e.Size = fs.ModeDir|0o777, 0
		case e.Mode.Perm()&0o200 != 0:
			e.Mode = e.Mode.Type() | 0o666 // a link stays a link
		default:
			e.Mode = e.Mode.Type() | 0o444
		}
	}
	return ents, nil
}
