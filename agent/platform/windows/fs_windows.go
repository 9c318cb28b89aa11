//go:build windows

package windows

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
	"unicode/utf8"

	"golang.org/x/sys/windows"

	"github.com/wsu-project/wsu/host"
)

// chunkSize is how much is copied between two cancellation checks.
const chunkSize = 1 << 20

// maxTempBase keeps the temp file name short even for long targets.
const maxTempBase = 64

// copyChunks copies src to dst, checking ctx between chunks so a cancelled
// play stops a large transfer promptly.
func copyChunks(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := io.CopyN(dst, src, chunkSize)
		total += n
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func (h *winHost) Stat(ctx context.Context, path string) (host.FileInfo, error) {
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

func (h *winHost) SHA256(ctx context.Context, path string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	f, err := openRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := copyChunks(ctx, sum, f); err != nil {
		return "", fmt.Errorf("sha256 %s: %w", path, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

func (h *winHost) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if limit > 0 {
		// One byte past the limit tells "exactly limit" from "too large".
		r = io.LimitReader(f, limit+1)
	}
	var buf bytes.Buffer
	if _, err := copyChunks(ctx, &buf, r); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if limit > 0 && int64(buf.Len()) > limit {
		return nil, fmt.Errorf("read %s: file is larger than the limit of %d bytes", path, limit)
	}
	return buf.Bytes(), nil
}

// openRegular opens path for reading and refuses directories, whose read
// errors would otherwise be cryptic.
func openRegular(path string) (*os.File, error) {
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

func (h *winHost) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if base == "" {
		return fmt.Errorf("write %s: path names a directory", path)
	}
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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

	if _, err := copyChunks(ctx, tmp, content); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Only the read-only bit of mode means anything on Windows.
	if err := os.Chmod(tmpName, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Last chance to honour a cancel before the change becomes visible.
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := replaceFile(tmpName, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	return nil
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

// tempPattern names the temp file after its target so a leftover is
// recognisable, truncating long names at a rune boundary.
func tempPattern(base string) string {
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
		for len(base) > 0 && !utf8.ValidString(base) {
			base = base[:len(base)-1]
		}
	}
	return ".wsu-tmp-" + base + "-*"
}

func (h *winHost) MkdirAll(ctx context.Context, path string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.MkdirAll(path, mode)
}

func (h *winHost) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}

func (h *winHost) Remove(ctx context.Context, path string, recursive bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if recursive {
		err := os.RemoveAll(path) // already quiet about a missing path
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
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
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
