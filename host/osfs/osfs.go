// Package osfs implements the file operations of the Host API with the os
// package, once for every host that keeps its files on a local file system:
// transport/local (POSIX), the agent's Win32 platform and, for the parts
// that are the same, the Windows simulation. FS's fields are the steps where
// the platforms really differ.
package osfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"unicode/utf8"

	"github.com/wsu-project/wsu/host"
)

// ChunkSize is how much is copied between two cancellation checks.
const ChunkSize = 1 << 20

// maxTempBase keeps the temp file name within NAME_MAX even for long targets.
const maxTempBase = 64

// FS implements Stat, SHA256, ReadFile, WriteFile, MkdirAll, Chmod, Remove
// and ReadDir of host.Host on the paths it is given. The zero FS is POSIX; a
// host embeds it to serve those operations.
type FS struct {
	// ChmodClosed sets a written file's mode by name once the temp file is
	// closed, instead of on the open file before its sync (Windows, where
	// only the read-only bit of the mode means anything).
	ChmodClosed bool
	// Rename moves a finished temp file over its target, replacing it, and
	// makes that durable. nil: os.Rename followed by an fsync of the
	// directory (POSIX).
	Rename func(tmp, target string) error
	// RemoveAll deletes a tree and is quiet about a missing path. nil:
	// os.RemoveAll.
	RemoveAll func(path string) error
}

// CopyChunks copies src to dst, checking ctx between chunks so a cancelled
// play stops a large transfer promptly.
func CopyChunks(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := io.CopyN(dst, src, ChunkSize)
		total += n
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// Stat describes path, following symlinks; a missing path is Exists=false.
func (FS) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return host.FileInfo{}, err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return host.FileInfo{Path: path}, nil
	}
	if err != nil {
		return host.FileInfo{}, err
	}
	return host.FileInfo{
		Path:    path,
		Exists:  true,
		IsDir:   fi.IsDir(),
		Size:    fi.Size(),
		Mode:    fi.Mode(),
		ModTime: fi.ModTime(),
	}, nil
}

// SHA256 returns the hex sha256 of a regular file's content.
func (FS) SHA256(ctx context.Context, path string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	f, err := OpenRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return SumSHA256(ctx, path, f)
}

// FileSHA256 returns the hex sha256 of a local regular file, for the
// controller side (payload checks, agent binaries) where no context applies.
func FileSHA256(path string) (string, error) {
	return FS{}.SHA256(context.Background(), path)
}

// SumSHA256 returns the hex sha256 of what r yields; errors name name.
func SumSHA256(ctx context.Context, name string, r io.Reader) (string, error) {
	sum := sha256.New()
	if _, err := CopyChunks(ctx, sum, r); err != nil {
		return "", fmt.Errorf("sha256 %s: %w", name, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// ReadFile returns a regular file's content; one larger than limit is an
// error (limit <= 0: no limit).
func (FS) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadLimit(ctx, path, f, limit)
}

// ReadLimit reads r to its end; more than limit bytes is an error (limit
// <= 0: no limit). Errors name name.
func ReadLimit(ctx context.Context, name string, r io.Reader, limit int64) ([]byte, error) {
	if limit > 0 {
		// One byte past the limit tells "exactly limit" from "too large".
		r = io.LimitReader(r, limit+1)
	}
	var buf bytes.Buffer
	if _, err := CopyChunks(ctx, &buf, r); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if limit > 0 && int64(buf.Len()) > limit {
		return nil, fmt.Errorf("read %s: file is larger than the limit of %d bytes", name, limit)
	}
	return buf.Bytes(), nil
}

// OpenRegular opens path for reading and refuses directories, whose read
// errors would otherwise be cryptic.
func OpenRegular(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New("is a directory")}
	}
	return f, nil
}

// WriteFile streams content to a temp file beside path, syncs it and
// renames it over path (see host.Host.WriteFile).
func (f FS) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return f.Write(ctx, path, content, mode, WriteOptions{})
}

// WriteOptions are what a caller of Write adds to WriteFile. The zero
// value is WriteFile's behaviour.
type WriteOptions struct {
	// Name is the path errors name; "": the target. A host that translates
	// paths names the one it was given.
	Name string
	// Err shapes the error of a failed step on the temp file or of the
	// rename; nil: "write <Name>: <err>".
	Err func(err error) error
	// Commit runs the rename step (rename, already shaped by Err) and
	// returns what it returns, as it is: a host that must check the target
	// and rename under a lock does both inside.
	Commit func(rename func() error) error
}

// Write is WriteFile's work, after its cancellation check, for a host
// that needs WriteOptions. The target stays untouched and no temp file
// lingers whatever fails.
func (f FS) Write(ctx context.Context, target string, content io.Reader, mode fs.FileMode, o WriteOptions) error {
	name := o.Name
	if name == "" {
		name = target
	}
	stepErr := o.Err
	if stepErr == nil {
		stepErr = func(err error) error { return fmt.Errorf("write %s: %w", name, err) }
	}
	dir, base := filepath.Split(target)
	if base == "" {
		return fmt.Errorf("write %s: path names a directory", name)
	}
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, TempPattern(base))
	if err != nil {
		return stepErr(err)
	}
	tmpName, closed, renamed := tmp.Name(), false, false
	defer func() {
		// Whatever failed, the target is untouched and no temp file lingers.
		if !closed {
			tmp.Close()
		}
		if !renamed {
			os.Remove(tmpName)
		}
	}()

	if _, err := CopyChunks(ctx, tmp, content); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if !f.ChmodClosed {
		if err := tmp.Chmod(mode); err != nil {
			return stepErr(err)
		}
	}
	if err := tmp.Sync(); err != nil {
		return stepErr(err)
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return stepErr(err)
	}
	if f.ChmodClosed {
		if err := os.Chmod(tmpName, mode); err != nil {
			return stepErr(err)
		}
	}
	// Last chance to honour a cancel before the change becomes visible.
	if err := ctx.Err(); err != nil {
		return err
	}
	rename := func() error {
		var err error
		if f.Rename != nil {
			err = f.Rename(tmpName, target)
		} else {
			err = os.Rename(tmpName, target)
		}
		if err != nil {
			return stepErr(err)
		}
		renamed = true
		return nil
	}
	if o.Commit != nil {
		err = o.Commit(rename)
	} else {
		err = rename()
	}
	if err != nil {
		return err
	}
	if f.Rename == nil {
		if err := SyncDir(dir); err != nil {
			return fmt.Errorf("write %s: sync directory: %w", name, err)
		}
	}
	return nil
}

// TempPattern names a temp file after its target so a leftover is
// recognisable, truncating long names at a rune boundary.
func TempPattern(base string) string {
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
		for len(base) > 0 && !utf8.ValidString(base) {
			base = base[:len(base)-1]
		}
	}
	return ".wsu-tmp-" + base + "-*"
}

// SyncDir makes a rename in dir durable. Windows cannot fsync a directory,
// and NTFS journals the rename anyway.
func SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// MkdirAll creates path and any missing parents.
func (FS) MkdirAll(ctx context.Context, path string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.MkdirAll(path, mode)
}

// Chmod changes a path's permission bits (on Windows, the os package maps
// them to the read-only attribute).
func (FS) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}

// Remove deletes path, or with recursive the tree under it; a missing path
// is not an error.
func (f FS) Remove(ctx context.Context, path string, recursive bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if recursive {
		if f.RemoveAll != nil {
			return f.RemoveAll(path)
		}
		return os.RemoveAll(path) // already quiet about a missing path
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// ReadDir lists at most host.DirLimit(limit) entries of a directory, sorted
// by name (see host.Host.ReadDir).
func (FS) ReadDir(ctx context.Context, path string, limit int) ([]host.DirEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ReadDirLimit(ctx, path, path, limit)
}

// ErrNotDir is what ReadDir wraps for a path that is not a directory.
var ErrNotDir = errors.New("not a directory")

// ReadDirLimit is ReadDir's work on the local directory dir, with errors
// naming name (a host that translates paths names the one it was given).
// Only the entries returned are read from the directory, so a huge one
// costs no more than a small one.
func ReadDirLimit(ctx context.Context, name, dir string, limit int) ([]host.DirEntry, error) {
	fail := func(err error) ([]host.DirEntry, error) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	f, err := os.Open(dir)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if !fi.IsDir() {
		return fail(ErrNotDir)
	}
	ents, err := f.ReadDir(host.DirLimit(limit))
	if err != nil && !errors.Is(err, io.EOF) { // EOF: an empty directory
		return fail(err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	out := make([]host.DirEntry, 0, len(ents))
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since it was read: no longer an entry
		}
		if err != nil {
			return fail(err)
		}
		out = append(out, host.DirEntry{Name: e.Name(), IsDir: info.IsDir(), Size: info.Size(), Mode: info.Mode(), ModTime: info.ModTime()})
	}
	return out, nil
}
